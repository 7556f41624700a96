"""What the conversation already did: the calls whose results came back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..families._parse import call_key, disguised_calls
from ._decide import content_text

__all__ = ["answered_calls", "failed_calls"]


def answered_calls(messages: Sequence[Mapping[str, Any]], offered: frozenset[str]) -> frozenset[str]:
    """The ``call_key`` of every call made for the current request whose result came back: a call
    in an assistant's ``tool_calls`` answered by a tool message with its id, and a call to an
    ``offered`` tool the assistant wrote in its text (agents that keep their history as text,
    "Action: {...}" then "Observation: ...") that a later user or tool message followed.

    The current request starts at the user's last message that answers no written call: a new
    request may ask for a call made before again ("list the files again"), and what the tools
    read may have changed since (a file written, a folder changed)."""
    made: dict[str, str] = {}
    answered: set[str] = set()
    written: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "user" and not written:
            answered = set()  # a new request: what was done for the ones before may be done again
        if role in ("user", "tool"):
            answered |= written
            written = set()
        if role != "assistant":
            if role == "tool" and str(message.get("tool_call_id")) in made:
                answered.add(made[str(message.get("tool_call_id"))])
            continue
        written |= {call_key(name, values) for name, values in disguised_calls(content_text(message.get("content")) or "", offered)}
        for call in message.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                continue
            arguments = fn.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    continue
            made[str(call.get("id"))] = call_key(fn["name"], arguments)
    return frozenset(answered)


#: What the agent loop writes as a failed call's result ("Error: the call to 'x' failed: ...").
_LOOP_ERROR = "Error:"


def failed_calls(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the conversation ends in the results of the model's last calls and every one of
    them is an error: the loop's wording of a call that raised, timed out or was refused
    ("Error: ..."), or a tool's own error, a JSON object with an ``error`` key, as many APIs
    return one (``{"error": "cd: 'document': No such file or directory"}``)."""
    results = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.append(content_text(message.get("content")) or "")
    return bool(results) and len(messages) > len(results) and \
        messages[-len(results) - 1].get("role") == "assistant" and all(_an_error(text) for text in results)


def _an_error(text: str) -> bool:
    text = text.strip()
    if text.startswith(_LOOP_ERROR):
        return True
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and "error" in value
