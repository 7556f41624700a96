"""Anthropic Messages requests in, messages and stream events out, for ``localtools serve``
(``POST /v1/messages``, ``POST /v1/messages/count_tokens``).

Translation only: a request becomes the ``ChatRequest`` chat completions makes (the same checks
of tools, schemas and text), and the turn's events become the Messages API's. ``tool_result``
blocks pair with the ``tool_use`` ids before them; ``is_error`` results reach the model as errors;
``thinking`` with a budget is the reasoning budget. What this server cannot do (images, documents,
server tools such as web search, ``top_k``) is refused with a 400 naming it.
"""

from __future__ import annotations

import secrets
from typing import Any

from ..model._stream import StreamEvent
from ..model._turn import ChatResult
from ._decisions import decisions_json
from ._dialect import BadRequest, ChatRequest, sse
from ._openai import ChunkWriter, _number, _tools_as, _unreadable

__all__ = ["Messages", "message_body", "parse_messages"]

#: Fields of the Messages API this server cannot honour: refused, never ignored.
_UNSUPPORTED = ("top_k", "container", "mcp_servers", "context_management")
#: An error's ``type`` in Anthropic's error shape, by HTTP status.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 422: "invalid_request_error",
                429: "rate_limit_error", 503: "overloaded_error"}


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """Message content as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise BadRequest(f"{where}.content must be a string or a list of content blocks, got {type(content).__name__}",
                         f"{where}.content")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise BadRequest(f"{where}.content[{j}] must be a content block, an object with a 'type'",
                             f"{where}.content[{j}]")
    return content


def _text_of(block: dict[str, Any], where: str, key: str = "text") -> str:
    text = block.get(key)
    if not isinstance(text, str):
        raise BadRequest(f"{where}.{key} must be a string", f"{where}.{key}")
    return text


def _result_text(block: dict[str, Any], where: str) -> str:
    """A ``tool_result``'s content: a string, absent, or text blocks."""
    content = block.get("content")
    if content is None:
        return ""
    parts = []
    for j, part in enumerate(_blocks(content, where)):
        if part["type"] != "text":
            raise BadRequest(f"{where}.content[{j}]: a tool result may hold text only, got {part['type']!r}",
                             f"{where}.content[{j}].type")
        parts.append(_text_of(part, f"{where}.content[{j}]"))
    return "".join(parts)


def _messages(raw: Any, system: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest("'messages' must be a non-empty list of messages", "messages")
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    open_calls: dict[str, str] = {}  # tool_use id -> tool name, for pairing results
    for i, msg in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            raise BadRequest(f"{where} must be an object whose role is 'user' or 'assistant'", f"{where}.role")
        blocks = _blocks(msg.get("content"), where)
        if msg["role"] == "assistant":
            out.append(_assistant(blocks, where, open_calls))
            continue
        texts = []
        for j, block in enumerate(blocks):
            at = f"{where}.content[{j}]"
            if block["type"] == "text":
                texts.append(_text_of(block, at))
            elif block["type"] == "tool_result":
                call_id = block.get("tool_use_id")
                if not isinstance(call_id, str) or call_id not in open_calls:
                    raise BadRequest(f"{at}.tool_use_id {call_id!r} answers no earlier tool_use block",
                                     f"{at}.tool_use_id")
                is_error = block.get("is_error", False)
                if not isinstance(is_error, bool):
                    raise BadRequest(f"{at}.is_error must be true or false", f"{at}.is_error")
                text = _result_text(block, at)
                # The model reads a failed call's result as an error, as the agent loop writes one.
                out.append({"role": "tool", "tool_call_id": call_id, "name": open_calls[call_id],
                            "content": f"Error: {text}" if is_error else text})
            else:
                raise BadRequest(f"{at}: a user message may hold text and tool_result blocks; {block['type']!r} "
                                 "is not supported by this server", f"{at}.type", "unsupported_content")
        if texts:
            out.append({"role": "user", "content": "".join(texts)})
    return out


def _assistant(blocks: list[dict[str, Any]], where: str, open_calls: dict[str, str]) -> dict[str, Any]:
    text, reasoning, calls = [], [], []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        if block["type"] == "text":
            text.append(_text_of(block, at))
        elif block["type"] == "thinking":
            reasoning.append(_text_of(block, at, "thinking"))
        elif block["type"] == "tool_use":
            call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not isinstance(arguments, dict):
                raise BadRequest(f"{at} must be {{'type': 'tool_use', 'id', 'name', 'input': {{...}}}}", at)
            open_calls[call_id] = name
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        else:
            raise BadRequest(f"{at}: an assistant message may hold text, thinking and tool_use blocks; "
                             f"{block['type']!r} is not supported by this server", f"{at}.type", "unsupported_content")
    entry: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if reasoning:
        entry["reasoning_content"] = "".join(reasoning)
    if calls:
        entry["tool_calls"] = calls
    return entry


def _system(raw: Any) -> str:
    if raw is None or isinstance(raw, str):
        return raw or ""
    if isinstance(raw, list):
        parts = []
        for j, block in enumerate(raw):
            if not isinstance(block, dict) or block.get("type") != "text":
                raise BadRequest(f"system[{j}] must be a text block", f"system[{j}]")
            parts.append(_text_of(block, f"system[{j}]"))
        return "".join(parts)
    raise BadRequest("'system' must be a string or a list of text blocks", "system")


def _function_tool(i: int, tool: Any) -> dict[str, Any]:
    if not isinstance(tool, dict):
        raise BadRequest(f"tools[{i}] must be an object with 'name' and 'input_schema'", f"tools[{i}]")
    if tool.get("type", "custom") != "custom":
        raise BadRequest(f"tools[{i}] is the server tool {tool.get('type')!r}, which this server does not have; "
                         "describe it as a custom tool with an input_schema", f"tools[{i}].type", "unsupported_tool")
    if "input_schema" not in tool:
        raise BadRequest(f"tools[{i}] needs an 'input_schema'", f"tools[{i}].input_schema")
    return {"type": "function", "function": {"name": tool.get("name"), "description": tool.get("description"),
                                             "parameters": tool["input_schema"]}}


def _function_tools(raw: Any) -> list[dict[str, Any]]:
    """Messages tools as chat-completions tools, checked as those are (their errors say ``input_schema``)."""
    return _tools_as(raw, _function_tool, [(".function.parameters", ".input_schema"), (".function", "")])


def _tool_choice(raw: Any, tools: list[dict[str, Any]]) -> tuple[str, bool]:
    """``tool_choice`` as chat completions spells it, and whether several calls may come at once."""
    names = [t["function"]["name"] for t in tools]
    if raw is None:
        return ("auto" if tools else "none"), True
    if not isinstance(raw, dict) or raw.get("type") not in ("auto", "any", "tool", "none"):
        raise BadRequest("tool_choice must be {'type': 'auto' | 'any' | 'tool' | 'none'}", "tool_choice")
    single = raw.get("disable_parallel_tool_use", False)
    if not isinstance(single, bool):
        raise BadRequest("tool_choice.disable_parallel_tool_use must be true or false",
                         "tool_choice.disable_parallel_tool_use")
    kind = raw["type"]
    if kind in ("any", "tool") and not tools:
        raise BadRequest(f"tool_choice {kind!r} needs at least one tool in 'tools'", "tool_choice")
    if kind == "tool":
        name = raw.get("name")
        if name not in names:
            raise BadRequest(f"tool_choice names {name!r}, which is not in 'tools' ({', '.join(names)})",
                             "tool_choice.name")
        return str(name), not single
    return {"auto": "auto", "any": "required", "none": "none"}[kind], not single


def _thinking(raw: Any) -> tuple[bool | None, int | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, dict) or raw.get("type") not in ("enabled", "disabled"):
        raise BadRequest("thinking must be {'type': 'enabled', 'budget_tokens': N} or {'type': 'disabled'}",
                         "thinking")
    if raw["type"] == "disabled":
        return False, None
    budget = raw.get("budget_tokens")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise BadRequest(f"thinking.budget_tokens must be a positive number of tokens, got {budget!r}",
                         "thinking.budget_tokens")
    return True, budget


def parse_messages(body: Any, *, default_temperature: float = 0.0, need_max_tokens: bool = True) -> ChatRequest:
    """A Messages request body, checked; raises ``BadRequest`` naming the first problem.
    ``need_max_tokens``: ``max_tokens`` is required (as upstream), except to count tokens."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if (problem := _unreadable(body)) is not None:
        raise problem
    for key in _UNSUPPORTED:
        if body.get(key) is not None:
            raise BadRequest(f"'{key}' is not supported by this server", key, "unsupported_parameter")
    max_tokens = body.get("max_tokens")
    if max_tokens is None and need_max_tokens:
        raise BadRequest("'max_tokens' is required: the most tokens the reply may have", "max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest(f"'max_tokens' must be a positive integer, got {max_tokens!r}", "max_tokens")
    stops = body.get("stop_sequences") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise BadRequest("'stop_sequences' must be a list of non-empty strings", "stop_sequences")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false", "stream")
    tools = _function_tools(body.get("tools"))
    choice, parallel = _tool_choice(body.get("tool_choice"), tools)
    thinking, budget = _thinking(body.get("thinking"))
    return ChatRequest(
        messages=_messages(body.get("messages"), _system(body.get("system"))),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        temperature=_number(body, "temperature", default_temperature, 0.0, 1.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0) or 1.0,
        max_tokens=max_tokens or 1,
        stop=list(stops),
        stream=stream,
        include_usage=True,
        model=str(body.get("model") or ""),
        thinking=thinking,
        reasoning_budget=budget,
    )


def new_message_id() -> str:
    return "msg_" + secrets.token_hex(12)


def _stop_reason(result: ChatResult) -> str:
    if result.tool_calls:
        return "tool_use"
    if result.finish_reason == "length":
        return "max_tokens"
    return "stop_sequence" if result.stop_sequence is not None else "end_turn"


def _usage(result: ChatResult) -> dict[str, int]:
    return {"input_tokens": result.prompt_tokens, "output_tokens": result.completion_tokens}


def message_body(result: ChatResult, *, model: str, message_id: str) -> dict[str, Any]:
    """The turn as a Messages API ``message``: thinking, text, then each call as a ``tool_use`` block."""
    content: list[dict[str, Any]] = []
    if result.reasoning:
        content.append({"type": "thinking", "thinking": result.reasoning, "signature": ""})
    if result.content or not result.tool_calls:
        content.append({"type": "text", "text": result.content})
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in result.tool_calls]
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": _stop_reason(result), "stop_sequence": result.stop_sequence, "usage": _usage(result),
            # This server's extension: the levers' decisions this turn (docs/serve.md).
            "decisions": decisions_json(result)}


class _MessageStream:
    """A turn's events as Messages stream events: ``message_start``, then each block (thinking,
    text, a ``tool_use`` per call) as ``content_block_start``, deltas and ``content_block_stop``,
    then ``message_delta`` with the stop reason and usage, and ``message_stop``. The deltas are the
    chat-completions chunks' (``ChunkWriter``), so what a repaired turn re-sends is handled once."""

    def __init__(self, *, model: str) -> None:
        self.model, self.message_id = model, new_message_id()
        self._chunks = ChunkWriter(model=model, completion_id=self.message_id)
        self._open: tuple[str, int] | None = None  # the open block's kind and call index
        self._index = -1

    def opening(self) -> list[str]:
        message: dict[str, Any] = {"id": self.message_id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                   "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}
        return [sse({"type": "message_start", "message": message}, "message_start")]

    def _start(self, kind: str, call: int, block: dict[str, Any]) -> list[str]:
        if self._open == (kind, call):
            return []
        out = self._stop()
        self._index += 1
        self._open = (kind, call)
        return [*out, sse({"type": "content_block_start", "index": self._index, "content_block": block},
                          "content_block_start")]

    def _stop(self) -> list[str]:
        if self._open is None:
            return []
        self._open = None
        return [sse({"type": "content_block_stop", "index": self._index}, "content_block_stop")]

    def _delta(self, delta: dict[str, Any]) -> str:
        return sse({"type": "content_block_delta", "index": self._index, "delta": delta}, "content_block_delta")

    def event(self, event: StreamEvent) -> list[str]:
        chunk = self._chunks.event(event)
        if chunk is None:
            return []
        delta = chunk["choices"][0]["delta"]
        if "reasoning_content" in delta:
            return [*self._start("thinking", -1, {"type": "thinking", "thinking": "", "signature": ""}),
                    self._delta({"type": "thinking_delta", "thinking": delta["reasoning_content"]})]
        if "content" in delta:
            return [*self._start("text", -1, {"type": "text", "text": ""}),
                    self._delta({"type": "text_delta", "text": delta["content"]})]
        call = delta["tool_calls"][0]
        out = []
        if "id" in call:
            out += self._start("tool_use", call["index"], {"type": "tool_use", "id": call["id"],
                                                           "name": call["function"]["name"], "input": {}})
        if arguments := call["function"].get("arguments"):
            out.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return out

    def closing(self, result: ChatResult) -> list[str]:
        # The delta holds the message's top-level fields the end settles; decisions is one of them
        # (not in message_start: the anthropic SDK's snapshot copies only the delta fields it knows,
        # and would keep a placeholder there as if it were the answer).
        message_delta = {"type": "message_delta", "usage": _usage(result),
                         "delta": {"stop_reason": _stop_reason(result), "stop_sequence": result.stop_sequence,
                                   "decisions": decisions_json(result)}}
        return [*self._stop(), sse(message_delta, "message_delta"), sse({"type": "message_stop"}, "message_stop")]

    def failure(self, body: dict[str, Any]) -> list[str]:
        return [sse(body, "error")]


class Messages:
    """The Anthropic Messages dialect (``POST /v1/messages``)."""

    name = "messages"

    def parse(self, body: Any, *, default_max_tokens: int, default_temperature: float) -> ChatRequest:
        return parse_messages(body, default_temperature=default_temperature)

    def error_body(self, status: int, message: str, *, kind: str, param: str | None, code: str | None) -> dict[str, Any]:
        kind = _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def reply(self, result: ChatResult, request: ChatRequest, *, model: str) -> dict[str, Any]:
        return message_body(result, model=model, message_id=new_message_id())

    def writer(self, request: ChatRequest, *, model: str) -> _MessageStream:
        return _MessageStream(model=model)
