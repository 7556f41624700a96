"""OpenAI chat-completions requests in, responses and stream chunks out, for ``localtools serve``.

Every check a request can fail is here, each with the parameter it names, so the server answers
a bad request with OpenAI's error JSON and a 400 before the model sees it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..families._parse import decode_arguments
from ..model._stream import DisguiseCaught, ReasoningDelta, SchemaRepair, StreamEvent, TextDelta, ToolCallDelta, ToolCallStarted
from ..model._turn import ChatResult
from ..tools._schema import MAX_SCHEMA_DEPTH, schema_problem, spec_problems
from ._decisions import decisions_json
from ._dialect import BadRequest, ChatRequest, sse

__all__ = ["TEMPLATE_VARIABLES", "BadRequest", "ChatCompletions", "ChatRequest", "ChunkWriter", "completion_body",
           "error_body", "parse_request"]

#: Template variables the server sets itself (and render's own parameters); ``chat_template_kwargs`` may not.
TEMPLATE_VARIABLES = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "source",
                                "object_arguments"})

_ROLES = {"system", "developer", "user", "assistant", "tool"}
#: The deepest nesting a request may have: a tool's parameters at their deepest, plus the request's own.
MAX_BODY_DEPTH = MAX_SCHEMA_DEPTH + 8
# Request fields this server cannot honour; a request that sets one is refused rather than half-answered.
_UNSUPPORTED = ("logprobs", "top_logprobs", "audio", "prediction", "functions", "function_call")


def error_body(message: str, *, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _text(content: Any, where: str) -> str:
    """Message content as a string: a string, null, or a list of text parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        out = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise BadRequest(f"{where}.content[{j}]: only text parts are supported, got {kind!r}", f"{where}.content")
            out.append(part["text"])
        return "".join(out)
    raise BadRequest(f"{where}.content must be a string or a list of text parts, got {type(content).__name__}",
                     f"{where}.content")


def _messages(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise BadRequest(f"'messages' must be a list, got {type(raw).__name__}", "messages")
    if not raw:
        raise BadRequest("'messages' is empty; send at least one message", "messages")
    out: list[dict[str, Any]] = []
    open_calls: dict[str, str] = {}  # call id -> tool name, for pairing tool results
    for i, msg in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise BadRequest(f"{where} must be an object", where)
        role = msg.get("role")
        if role not in _ROLES:
            raise BadRequest(f"{where}.role {role!r} is not one of {', '.join(sorted(_ROLES))}", f"{where}.role")
        content = _text(msg.get("content"), where)
        if role in ("system", "developer", "user"):
            # Developer messages are OpenAI's newer name for system messages.
            out.append({"role": "system" if role == "developer" else role, "content": content})
        elif role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": content}
            reasoning = msg.get("reasoning_content")
            if reasoning is not None and not isinstance(reasoning, str):
                raise BadRequest(f"{where}.reasoning_content must be a string", f"{where}.reasoning_content")
            if reasoning:
                entry["reasoning_content"] = reasoning
            calls = msg.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                raise BadRequest(f"{where}.tool_calls must be a list of calls, got {type(calls).__name__}",
                                 f"{where}.tool_calls")
            if calls:
                entry["tool_calls"] = [_history_call(c, f"{where}.tool_calls[{j}]", open_calls) for j, c in enumerate(calls)]
            out.append(entry)
        else:
            call_id = msg.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise BadRequest(f"{where}: a tool message needs the tool_call_id it answers", f"{where}.tool_call_id")
            if call_id not in open_calls:
                raise BadRequest(f"{where}.tool_call_id {call_id!r} answers no earlier assistant tool call",
                                 f"{where}.tool_call_id")
            out.append({"role": "tool", "tool_call_id": call_id, "name": msg.get("name") or open_calls[call_id],
                        "content": content})
    return out


def _history_call(call: Any, where: str, open_calls: dict[str, str]) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise BadRequest(f"{where} must be {{'id', 'type': 'function', 'function': {{'name', 'arguments'}}}}", where)
    try:
        arguments = decode_arguments(fn.get("arguments", "{}"))
    except ValueError as exc:
        raise BadRequest(f"{where}.function.arguments is {exc}", f"{where}.function.arguments") from None
    except RecursionError:
        raise BadRequest(f"{where}.function.arguments nests arrays and objects too deeply to read",
                         f"{where}.function.arguments", "too_deep") from None
    if (problem := _unreadable(arguments)) is not None:
        raise BadRequest(f"{where}.function.arguments: {problem}", f"{where}.function.arguments", problem.code)
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise BadRequest(f"{where} has no id", f"{where}.id")
    open_calls[call_id] = fn["name"]
    return {"id": call_id, "type": "function", "function": {"name": fn["name"], "arguments": arguments}}


def _tools(raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRequest(f"'tools' must be a list of tools, got {type(raw).__name__}", "tools")
    out, seen = [], set()
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type", "function") != "function" or not isinstance(tool.get("function"), dict):
            raise BadRequest(f"{where} must be {{'type': 'function', 'function': {{'name', 'parameters'}}}}", where)
        fn = tool["function"]
        if problems := spec_problems(fn):
            key, problem = problems[0]
            raise BadRequest(f"{where}.function: {problem}", f"{where}.function.{key}")
        name = fn["name"]
        if name in seen:
            raise BadRequest(f"{where}: a second tool named {name!r}", f"{where}.function.name")
        seen.add(name)
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": {"name": name, "description": fn.get("description") or "",
                                                     "parameters": params}})
    return out


def _tools_as(raw: Any, one: Callable[[int, Any], dict[str, Any]],
              renames: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Another dialect's ``tools``, each put into chat-completions form by ``one(i, tool)`` (which
    refuses what the dialect cannot have), then checked as ``_tools`` checks ours: its errors name
    the fields as that dialect spells them (each ``(ours, theirs)`` of ``renames``, in order)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRequest(f"'tools' must be a list of tools, got {type(raw).__name__}", "tools")
    specs = [one(i, tool) for i, tool in enumerate(raw)]
    try:
        return _tools(specs)
    except BadRequest as exc:
        param, message = exc.param or "", str(exc)
        for ours, theirs in renames:
            param, message = param.replace(ours, theirs), message.replace(ours, theirs)
        raise BadRequest(message, param, exc.code) from None


_NOT_NAMED = object()
#: How a chat-completions request names one tool in ``tool_choice``.
_NAMED = ("{'type': 'function', 'function': {'name': ...}}",
          lambda raw: raw["function"].get("name") if isinstance(raw.get("function"), dict) else _NOT_NAMED)


def _tool_choice(raw: Any, tools: list[dict[str, Any]],
                 named: tuple[str, Callable[[dict[str, Any]], Any]] = _NAMED) -> str:
    """``tool_choice`` checked against ``tools``; ``named``: how the dialect spells one tool by name,
    and how to read the name out of it."""
    names = [t["function"]["name"] for t in tools]
    spelling, name_of = named
    if raw is None:
        return "auto" if tools else "none"
    if raw in ("auto", "none", "required"):
        if raw == "required" and not tools:
            raise BadRequest("tool_choice 'required' needs at least one tool in 'tools'", "tool_choice")
        return str(raw)
    if isinstance(raw, dict) and raw.get("type") == "function" and (name := name_of(raw)) is not _NOT_NAMED:
        if name not in names:
            raise BadRequest(f"tool_choice names {name!r}, which is not in 'tools' ({', '.join(names) or 'none given'})",
                             "tool_choice")
        return str(name)
    raise BadRequest(f"tool_choice must be 'auto', 'none', 'required' or {spelling}", "tool_choice")


def _number(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise BadRequest(f"'{key}' must be a number from {low} to {high}, got {value!r}", key)
    return float(value)


def _unreadable(body: Any) -> BadRequest | None:
    """The first string in ``body`` with a lone UTF-16 surrogate (valid JSON, "\\ud800", but not
    Unicode text: no tokenizer can encode it), or nesting deeper than any walk of it may recurse."""
    stack: list[tuple[Any, str, int]] = [(body, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_BODY_DEPTH:
            return BadRequest(f"{path} nests arrays and objects more than {MAX_BODY_DEPTH} levels deep",
                              path, "too_deep")
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                where = path or "the body"
                return BadRequest(f"{where} holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), "
                                  "which is not Unicode text; send it as a pair or as U+FFFD", where, "invalid_unicode")
        elif isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in value.items())
            stack.extend((k, f"{path} (a key)" if path else "a key", depth + 1) for k in value)
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
    return None


def parse_request(body: Any, *, default_max_tokens: int = 1024, default_temperature: float = 0.0) -> ChatRequest:
    """A chat-completions request body, checked; raises ``BadRequest`` naming the first problem."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if (problem := _unreadable(body)) is not None:
        raise problem
    for key in _UNSUPPORTED:
        if body.get(key) not in (None, False):
            raise BadRequest(f"'{key}' is not supported by this server", key, "unsupported_parameter")
    if body.get("n") not in (None, 1):
        raise BadRequest("'n' must be 1: this server writes one choice per request", "n")
    fmt = body.get("response_format")
    answer = answer_schema(fmt, "response_format", fmt.get("json_schema") if isinstance(fmt, dict) else None,
                           "response_format.json_schema")
    tools = _tools(body.get("tools"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest(f"'max_tokens' must be a positive integer, got {max_tokens!r}", "max_tokens")
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop or []
    if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(s, str) and s for s in stops):
        raise BadRequest("'stop' must be a string or a list of up to 4 non-empty strings", "stop")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**64):
        raise BadRequest(f"'seed' must be an integer from -2**63 to 2**64 - 1, got {seed!r}", "seed")
    parallel = body.get("parallel_tool_calls", True)
    stream = body.get("stream", False)
    if not isinstance(parallel, bool) or not isinstance(stream, bool):
        raise BadRequest("'parallel_tool_calls' and 'stream' must be true or false",
                         "stream" if not isinstance(stream, bool) else "parallel_tool_calls")
    options = body.get("stream_options") or {}
    kwargs = body.get("chat_template_kwargs")
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, dict):
        raise BadRequest("'chat_template_kwargs' must be an object of template variables", "chat_template_kwargs")
    if reserved := sorted(set(kwargs) & TEMPLATE_VARIABLES):
        raise BadRequest(f"'chat_template_kwargs' may not set {', '.join(reserved)}: the server sets them",
                         "chat_template_kwargs")
    # Only switches and numbers: a template renders its variables as template text, so a string
    # from a request could spell control tokens (a request's text belongs in its messages).
    bad = sorted(k for k, v in kwargs.items() if not (v is None or isinstance(v, (bool, int, float))))
    if bad:
        raise BadRequest(f"'chat_template_kwargs' values must be true, false, numbers or null; {', '.join(bad)} "
                         "is not (text belongs in the messages)", "chat_template_kwargs")
    kwargs = dict(kwargs)
    thinking = kwargs.pop("enable_thinking", None)
    if thinking is not None and not isinstance(thinking, bool):
        raise BadRequest("'chat_template_kwargs.enable_thinking' must be true or false", "chat_template_kwargs")
    budget = body.get("reasoning_budget")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise BadRequest(f"'reasoning_budget' must be a positive number of tokens, got {budget!r}", "reasoning_budget")
    return ChatRequest(
        messages=_messages(body.get("messages")),
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
        parallel_tool_calls=parallel,
        temperature=_number(body, "temperature", default_temperature, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0) or 1.0,
        max_tokens=max_tokens or default_max_tokens,
        stop=stops,
        seed=seed,
        stream=stream,
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        model=str(body.get("model") or ""),
        template_kwargs=kwargs,
        thinking=thinking,
        reasoning_budget=budget,
        answer_schema=answer,
    )


def answer_schema(fmt: Any, where: str, spec: Any, spec_at: str) -> Any:
    """The JSON schema a structured answer follows, from a response format ``fmt`` found at
    ``where`` (``None`` for text): ``json_object`` is any object; ``json_schema`` takes ``spec``'s
    ``schema`` (found at ``spec_at``; chat completions nest it under ``json_schema``, the Responses
    API does not). ``strict`` is read as OpenAI means it: the answer follows the schema, as every
    structured answer here does."""
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind != "json_schema":
        raise BadRequest(f"'{where}' must be {{'type': 'text'}}, {{'type': 'json_object'}} or {{'type': 'json_schema', "
                         f"...}}, got {fmt!r:.200}", f"{where}.type" if isinstance(fmt, dict) else where)
    if not isinstance(spec, dict):
        raise BadRequest(f"'{spec_at}' must be an object with 'name' and 'schema'", spec_at)
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest(f"'{spec_at}.name' must be a non-empty string", f"{spec_at}.name")
    if not isinstance(spec.get("strict", False), (bool, type(None))):
        raise BadRequest(f"'{spec_at}.strict' must be true or false", f"{spec_at}.strict")
    schema = spec.get("schema", {})
    if (problem := schema_problem(schema, f"'{spec_at}.schema'")) is not None:
        raise BadRequest(problem, f"{spec_at}.schema")
    return schema


def _usage(result: ChatResult) -> dict[str, int]:
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens}


def new_completion_id() -> str:
    return "chatcmpl-" + secrets.token_hex(12)


def completion_body(result: ChatResult, *, model: str, completion_id: str, created: int | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.content if not result.tool_calls else result.content or None}
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
    if result.tool_calls:
        message["tool_calls"] = [c.to_openai() for c in result.tool_calls]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason, "logprobs": None}],
        "usage": _usage(result),
        # This server's extension: the levers' decisions this turn (docs/serve.md).
        "decisions": decisions_json(result),
    }


class ChunkWriter:
    """A turn's events as OpenAI ``chat.completion.chunk`` objects, in the order they come: the
    role, reasoning (``reasoning_content`` deltas, as llama.cpp and vLLM send them), content, and
    each call by index with its id and name first, then its arguments (calls come once the turn's
    calls all passed their check, so a repaired turn sends only its repaired calls).

    Text and reasoning a failed attempt sent stay sent (a stream cannot take them back): after a
    ``SchemaRepair`` or a ``DisguiseCaught`` the next attempt's prose is sent past what the client
    already has where it repeats it, else after a blank line, so no answer is lost."""

    def __init__(self, *, model: str, completion_id: str, created: int | None = None) -> None:
        self.model, self.completion_id, self.created = model, completion_id, created or int(time.time())
        #: Per delta key ("content", "reasoning_content"): what the client has; what this attempt
        #: wrote; what a failed attempt left the client that this one has not yet gone past.
        self._client = {"content": "", "reasoning_content": ""}
        self._attempt = dict(self._client)
        self._echo = dict(self._client)

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    def opening(self) -> dict[str, Any]:
        return self.chunk({"role": "assistant", "content": ""})

    def event(self, event: StreamEvent) -> dict[str, Any] | None:
        """The chunk for one event; ``None`` for events a client is not sent (a call's end, a
        repair, the turn's end)."""
        if isinstance(event, SchemaRepair | DisguiseCaught):
            self._echo, self._attempt = dict(self._client), {key: "" for key in self._client}
            return None
        if isinstance(event, ReasoningDelta | TextDelta):
            return self._prose("reasoning_content" if isinstance(event, ReasoningDelta) else "content", event.text)
        if isinstance(event, ToolCallStarted):
            return self.chunk({"tool_calls": [{"index": event.index, "id": event.id, "type": "function",
                                               "function": {"name": event.name, "arguments": ""}}]})
        if isinstance(event, ToolCallDelta):
            return self.chunk({"tool_calls": [{"index": event.index, "function": {"arguments": event.arguments}}]})
        return None

    def _prose(self, key: str, piece: str) -> dict[str, Any] | None:
        self._attempt[key] += piece
        now, echo = self._attempt[key], self._echo[key]
        if echo:
            if echo.startswith(now):
                return None  # the new attempt repeats what the client has
            out = now[len(echo):] if now.startswith(echo) else "\n\n" + now
            self._echo[key] = ""
        else:
            out = piece
        self._client[key] += out
        return self.chunk({key: out}) if out else None

    def closing(self, result: ChatResult, *, include_usage: bool = False) -> list[dict[str, Any]]:
        """The finish reason with the turn's decisions (as the whole reply has them), and (asked
        for) the usage."""
        chunks = [{**self.chunk({}, result.finish_reason), "decisions": decisions_json(result)}]
        if include_usage:
            chunks.append({"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                           "model": self.model, "choices": [], "usage": _usage(result)})
        return chunks


class _ChunkStream:
    """Chat-completions chunks as server-sent events, ``[DONE]`` last."""

    def __init__(self, request: ChatRequest, *, model: str) -> None:
        self._chunks = ChunkWriter(model=model, completion_id=new_completion_id())
        self._usage = request.include_usage

    def opening(self) -> list[str]:
        return [sse(self._chunks.opening())]

    def event(self, event: StreamEvent) -> list[str]:
        chunk = self._chunks.event(event)
        return [] if chunk is None else [sse(chunk)]

    def closing(self, result: ChatResult) -> list[str]:
        return [*(sse(c) for c in self._chunks.closing(result, include_usage=self._usage)), sse("[DONE]")]

    def failure(self, body: dict[str, Any]) -> list[str]:
        # An error object in the stream, as OpenAI's own streams end on one.
        return [sse(body), sse("[DONE]")]


class ChatCompletions:
    """The OpenAI chat-completions dialect (``POST /v1/chat/completions``)."""

    name = "chat completions"

    def parse(self, body: Any, *, default_max_tokens: int, default_temperature: float) -> ChatRequest:
        return parse_request(body, default_max_tokens=default_max_tokens, default_temperature=default_temperature)

    def error_body(self, status: int, message: str, *, kind: str, param: str | None, code: str | None) -> dict[str, Any]:
        return error_body(message, kind=kind, param=param, code=code)

    def reply(self, result: ChatResult, request: ChatRequest, *, model: str) -> dict[str, Any]:
        return completion_body(result, model=model, completion_id=new_completion_id())

    def writer(self, request: ChatRequest, *, model: str) -> _ChunkStream:
        return _ChunkStream(request, model=model)
