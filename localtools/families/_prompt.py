"""Rendering chat templates into prompts whose message text is marked as data.

Message text (user, system, tool results, assistant text, argument strings) must reach the
tokenizer as plain text, never as control tokens. Rendering tracks where each piece of it lands:
the template is rendered once with markers in place of the text and once for real, and the two are
aligned, so a backend can tokenize template text with special tokens and message text without.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from typing import Any, NoReturn

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import SandboxedEnvironment

from .._errors import TemplateError
from .._types import Prompt
from ._parse import decode_arguments

__all__ = ["Prompt", "normalize_messages", "render", "render_text"]

# Markers stand in for message text in a second rendering. Printable characters, so that a
# template's ``| string`` of a list (Python's repr) leaves them as they are.
_MARK = re.compile("\u2e28(\\d+)\u2e29")


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False) -> str:
    # HTML-escaping (Jinja's default tojson) would change what models were trained on. A filter
    # chain (``map`` / ``selectattr``) hands over a generator, which templates mean as a list.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, sort_keys=sort_keys,
                      default=lambda v: list(v) if isinstance(v, Iterator) else _unserializable(v))


def _unserializable(value: Any) -> NoReturn:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _raise(message: str) -> NoReturn:
    raise TemplateError(message)


class _Generation(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: transformers marks the assistant's tokens with
    it (for training masks); rendering a prompt it is the text inside."""

    tags = {"generation"}  # noqa: RUF012 (jinja2's Extension declares it so)

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


@cache
def _environment() -> jinja2.Environment:
    # Sandboxed (no attribute reaches Python's internals), but a template may grow its own lists
    # (Kimi K2's build their namespaces with ``.append``); each render gets copies of our data.
    env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols", _Generation])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


@cache
def _compile(source: str) -> jinja2.Template:
    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"chat template syntax error at line {exc.lineno}: {exc.message}") from None


def normalize_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of OpenAI-shaped messages with call arguments as dicts (templates ``tojson`` them)."""
    out = []
    for i, msg in enumerate(messages):
        msg = copy.deepcopy(dict(msg))
        calls = msg.get("tool_calls") or []
        for call in calls:
            fn = call.get("function", call)
            try:
                fn["arguments"] = decode_arguments(fn.get("arguments", {}))
            except ValueError as exc:
                raise TemplateError(f"messages[{i}].tool_calls: arguments of {fn.get('name')!r} are {exc}") from None
        out.append(msg)
    return out


def with_system(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """``messages`` with ``text`` first in the system message (which is added when there is none)."""
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content") or "", str):
        first = {**messages[0], "content": f"{text}\n\n{messages[0].get('content') or ''}".rstrip("\n")}
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _mark(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    pieces: list[str] = []

    def marker(text: str) -> str:
        pieces.append(text)
        return f"\u2e28{len(pieces) - 1}\u2e29"

    def mark_strings(value: Any) -> Any:
        if isinstance(value, str):
            return marker(value) if value else value
        if isinstance(value, dict):
            return {k: mark_strings(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mark_strings(v) for v in value]
        return value

    marked = copy.deepcopy(messages)
    for msg in marked:
        for key in ("content", "reasoning_content"):
            if isinstance(msg.get(key), str) and msg[key]:
                msg[key] = marker(msg[key])
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", call)
            fn["arguments"] = mark_strings(fn.get("arguments", {}))
    return marked, pieces


def _candidates(text: str) -> list[str]:
    # What a template may have made of a piece of text: as is, trimmed, inside a JSON string, or
    # inside a Python one (a list's ``| string`` is its repr).
    return [text, text.strip(), json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1], repr(text)[1:-1]]


def render(
    source: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
    object_arguments: bool = True,
    **variables: Any,
) -> Prompt:
    """Render a chat template; ``tools`` are OpenAI-style specs (``{"type": "function", ...}``).

    Calls' arguments reach the template as objects (most templates ``tojson`` them); with
    ``object_arguments=False`` they stay as given (the API's JSON strings, which a few read).
    """
    template = _compile(source)
    messages = normalize_messages(messages) if object_arguments else copy.deepcopy(messages)
    context = {"tools": copy.deepcopy(tools) or None, "add_generation_prompt": add_generation_prompt, **variables}
    try:
        real = template.render(messages=copy.deepcopy(messages), **context)
        marked_messages, pieces = _mark(messages)
        marked = template.render(messages=marked_messages, **{**context, "tools": copy.deepcopy(tools) or None})
    except TemplateError:
        raise
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError) as exc:
        raise TemplateError(f"chat template failed to render: {exc}") from None
    parts = _MARK.split(marked)
    controls, indices = parts[0::2], [int(i) for i in parts[1::2]]
    segments: list[tuple[str, bool]] = []
    pos = 0
    for k, control in enumerate(controls):
        if not real.startswith(control, pos):
            raise TemplateError("the chat template renders message text differently on each call; cannot mark it")
        if control:
            segments.append((control, False))
        pos += len(control)
        if k == len(indices):
            break
        following = controls[k + 1]
        for cand in _candidates(pieces[indices[k]]):
            end = pos + len(cand)
            if real.startswith(cand, pos) and real.startswith(following, end) and (following or k + 1 < len(indices) or end == len(real)):
                if cand:
                    segments.append((cand, True))
                pos = end
                break
        else:
            raise TemplateError("the chat template transforms message text in a way that cannot be tracked")
    if pos != len(real):
        raise TemplateError("the chat template output could not be aligned with its messages")
    merged: list[tuple[str, bool]] = []
    for text, is_data in segments:
        if merged and merged[-1][1] == is_data:
            merged[-1] = (merged[-1][0] + text, is_data)
        else:
            merged.append((text, is_data))
    return Prompt(tuple(merged))


def render_text(source: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                add_generation_prompt: bool = True, object_arguments: bool = True, **variables: Any) -> str:
    """The rendered text alone (no marking of message text): for reading a template's output."""
    template = _compile(source)
    messages = normalize_messages(messages) if object_arguments else copy.deepcopy(messages)
    try:
        return template.render(messages=messages, tools=copy.deepcopy(tools) or None,
                               add_generation_prompt=add_generation_prompt, **variables)
    except TemplateError:
        raise
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError) as exc:
        raise TemplateError(f"chat template failed to render: {exc}") from None
