"""OpenAI Responses requests in, responses and stream events out, for ``localtools serve``
(``POST /v1/responses``).

Translation only: ``input`` (a string, or message, ``function_call`` and ``function_call_output``
items paired by ``call_id``) and ``instructions`` become the ``ChatRequest`` chat completions
makes, with the same checks of tools and text; the turn becomes ``output`` items (reasoning, a
message, a ``function_call`` per call). ``previous_response_id`` continues a response this server
kept (``store``, the default, keeps it; a bounded number are kept, the oldest dropped first).
``text.format`` ``json_schema`` (or ``json_object``) asks for a structured answer, decoded under
the schema's grammar and checked. What this server cannot do (built-in tools such as web
search, files, images) is refused with a 400 naming it.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import OrderedDict
from typing import Any

from ..model._stream import StreamEvent
from ..model._turn import ChatResult
from ._decisions import decisions_json
from ._dialect import BadRequest, ChatRequest, sse
from ._openai import ChunkWriter, _number, _tool_choice, _tools_as, _unreadable, answer_schema, error_body

__all__ = ["Responses"]

#: Fields of the Responses API this server cannot honour: refused, never ignored.
_UNSUPPORTED = ("include", "background", "prompt", "conversation", "max_tool_calls", "top_logprobs")


def _new(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"{where}.content must be a string or a list of text parts", f"{where}.content")
    parts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text") \
                or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise BadRequest(f"{where}.content[{j}]: only text parts are supported, got {kind!r}",
                             f"{where}.content[{j}]", "unsupported_content")
        parts.append(part["text"])
    return "".join(parts)


def _input(raw: Any, instructions: str, previous: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``input`` as chat messages after ``previous`` (a kept response's conversation)."""
    if isinstance(raw, str):
        items: list[Any] = [{"type": "message", "role": "user", "content": raw}]
    elif isinstance(raw, list) and raw:
        items = raw
    else:
        raise BadRequest("'input' must be a string or a non-empty list of items", "input")
    out = [m for m in previous if m["role"] != "system"]
    if instructions:
        out.insert(0, {"role": "system", "content": instructions})
    open_calls = {c["id"]: c["function"]["name"] for m in out for c in m.get("tool_calls", [])}
    reasoning = ""
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise BadRequest(f"{where} must be an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise BadRequest(f"{where}.role {role!r} is not user, system, developer or assistant", f"{where}.role")
            text = _content_text(item.get("content"), where)
            if role == "assistant":
                out.append({"role": "assistant", "content": text, **({"reasoning_content": reasoning} if reasoning else {})})
                reasoning = ""
            else:
                out.append({"role": "system" if role == "developer" else role, "content": text})
        elif kind == "reasoning":
            # A kept thought of an earlier output: it goes with the assistant turn that follows.
            summary = item.get("summary") or []
            if not isinstance(summary, list):
                raise BadRequest(f"{where}.summary must be a list of summary_text parts", f"{where}.summary")
            reasoning += "".join(p.get("text", "") for p in summary if isinstance(p, dict) and isinstance(p.get("text"), str))
        elif kind == "function_call":
            call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments", "{}")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not isinstance(arguments, str):
                raise BadRequest(f"{where} must be {{'type': 'function_call', 'call_id', 'name', 'arguments': '<JSON>'}}",
                                 where)
            try:
                parsed = json.loads(arguments)
            except ValueError as exc:
                raise BadRequest(f"{where}.arguments is not JSON: {exc}", f"{where}.arguments") from None
            if not isinstance(parsed, dict):
                raise BadRequest(f"{where}.arguments must be a JSON object", f"{where}.arguments")
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": parsed}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and not last["content"] and "tool_calls" in last:
                last["tool_calls"].append(call)  # parallel calls of one turn
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call],
                            **({"reasoning_content": reasoning} if reasoning else {})})
                reasoning = ""
            open_calls[call_id] = name
        elif kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if not isinstance(call_id, str) or call_id not in open_calls:
                raise BadRequest(f"{where}.call_id {call_id!r} answers no earlier function_call", f"{where}.call_id")
            if not isinstance(output, str):
                output = _content_text(output, where) if isinstance(output, list) else None
                if output is None:
                    raise BadRequest(f"{where}.output must be a string", f"{where}.output")
            out.append({"role": "tool", "tool_call_id": call_id, "name": open_calls[call_id], "content": output})
        else:
            raise BadRequest(f"{where}: items of type {kind!r} are not supported by this server (message, "
                             "function_call, function_call_output and reasoning are)", f"{where}.type",
                             "unsupported_content")
    if not any(m["role"] != "system" for m in out):
        raise BadRequest("'input' holds no message", "input")
    return out


def _function_tool(i: int, tool: Any) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        raise BadRequest(f"tools[{i}] is a {kind!r} tool, which this server does not have; only function tools "
                         "are supported", f"tools[{i}].type", "unsupported_tool")
    return {"type": "function", "function": {k: tool[k] for k in ("name", "description", "parameters") if k in tool}}


def _function_tools(raw: Any) -> list[dict[str, Any]]:
    """Responses tools (flat: ``{"type": "function", "name", "parameters"}``) as chat-completions tools."""
    return _tools_as(raw, _function_tool, [(".function", "")])


#: Responses name one tool flat: {"type": "function", "name": ...}.
_NAMED = ("{'type': 'function', 'name': ...}", lambda raw: raw.get("name"))


class Responses:
    """The OpenAI Responses dialect (``POST /v1/responses``), with the responses it keeps for
    ``previous_response_id``."""

    name = "responses"

    def __init__(self, keep: int = 256) -> None:
        self._kept: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()

    def parse(self, body: Any, *, default_max_tokens: int, default_temperature: float) -> ChatRequest:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        if (problem := _unreadable(body)) is not None:
            raise problem
        for key in _UNSUPPORTED:
            if body.get(key) not in (None, False, []):
                raise BadRequest(f"'{key}' is not supported by this server", key, "unsupported_parameter")
        text = body.get("text")
        if text is not None and not isinstance(text, dict):
            raise BadRequest("'text' must be an object such as {'format': {'type': 'text'}}", "text")
        fmt = (text or {}).get("format")
        answer = answer_schema(fmt, "text.format", fmt, "text.format")
        max_tokens = body.get("max_output_tokens")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            raise BadRequest(f"'max_output_tokens' must be a positive integer, got {max_tokens!r}", "max_output_tokens")
        instructions = body.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise BadRequest("'instructions' must be a string", "instructions")
        previous_id = body.get("previous_response_id")
        previous: list[dict[str, Any]] = []
        if previous_id is not None:
            with self._lock:
                kept = self._kept.get(previous_id) if isinstance(previous_id, str) else None
            if kept is None:
                raise BadRequest(f"previous_response_id {previous_id!r} is no response this server kept (it keeps "
                                 f"the last {self._keep}, and none sent with store: false)", "previous_response_id")
            previous = kept
        parallel, stream, store = (body.get(k, d) for k, d in (("parallel_tool_calls", True), ("stream", False),
                                                                ("store", True)))
        for key, value in (("parallel_tool_calls", parallel), ("stream", stream), ("store", store)):
            if not isinstance(value, bool):
                raise BadRequest(f"'{key}' must be true or false", key)
        reasoning = body.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, dict):
            raise BadRequest("'reasoning' must be an object such as {'effort': 'medium'}", "reasoning")
        effort = (reasoning or {}).get("effort")
        tools = _function_tools(body.get("tools"))
        return ChatRequest(
            messages=_input(body.get("input"), instructions or "", previous),
            tools=tools,
            tool_choice=_tool_choice(body.get("tool_choice"), tools, _NAMED),
            parallel_tool_calls=parallel,
            temperature=_number(body, "temperature", default_temperature, 0.0, 2.0),
            top_p=_number(body, "top_p", 1.0, 0.0, 1.0) or 1.0,
            max_tokens=max_tokens or default_max_tokens,
            stream=stream,
            include_usage=True,
            model=str(body.get("model") or ""),
            # Reasoning asked for turns a thinking family's thinking on; effort "none" or "minimal" off.
            thinking=None if reasoning is None else effort not in ("none", "minimal"),
            store=store,
            instructions=instructions,
            previous_response_id=previous_id,
            answer_schema=answer,
            answer_format=fmt if answer is not None else None,
        )

    def error_body(self, status: int, message: str, *, kind: str, param: str | None, code: str | None) -> dict[str, Any]:
        return error_body(message, kind=kind, param=param, code=code)

    def keep(self, response_id: str, request: ChatRequest, result: ChatResult) -> None:
        """Keep the conversation so far for a later ``previous_response_id`` (unless ``store`` is false)."""
        if not request.store:
            return
        with self._lock:
            self._kept[response_id] = [*request.messages, result.message()]
            while len(self._kept) > self._keep:
                self._kept.popitem(last=False)

    def reply(self, result: ChatResult, request: ChatRequest, *, model: str) -> dict[str, Any]:
        response = _response(_new("resp"), request, model, _output(result), result)
        self.keep(response["id"], request, result)
        return response

    def writer(self, request: ChatRequest, *, model: str) -> _ResponseStream:
        return _ResponseStream(self, request, model=model)


def _output(result: ChatResult) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if result.reasoning:
        items.append({"type": "reasoning", "id": _new("rs"), "summary": [{"type": "summary_text",
                                                                         "text": result.reasoning}]})
    if result.content or not result.tool_calls:
        items.append({"type": "message", "id": _new("msg"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": result.content, "annotations": []}]})
    items += [{"type": "function_call", "id": _new("fc"), "call_id": c.id, "name": c.name,
               "arguments": json.dumps(c.arguments, ensure_ascii=False), "status": "completed"} for c in result.tool_calls]
    return items


def _response(response_id: str, request: ChatRequest, model: str, output: list[dict[str, Any]],
              result: ChatResult | None, created: int | None = None) -> dict[str, Any]:
    """A ``response`` object; ``result`` None: one still being generated."""
    cut = result is not None and result.finish_reason == "length"
    return {
        "id": response_id, "object": "response", "created_at": created or int(time.time()),
        "status": "in_progress" if result is None else "incomplete" if cut else "completed",
        "model": model, "output": output, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "instructions": request.instructions, "metadata": {}, "parallel_tool_calls": request.parallel_tool_calls,
        "temperature": request.temperature, "top_p": request.top_p, "max_output_tokens": request.max_tokens,
        "tool_choice": request.tool_choice if request.tool_choice in ("auto", "none", "required") else
        {"type": "function", "name": request.tool_choice},
        "tools": [{"type": "function", "strict": False, **t["function"]} for t in request.tools],
        "previous_response_id": request.previous_response_id, "store": request.store,
        "text": {"format": request.answer_format or {"type": "text"}}, "reasoning": None,
        "usage": None if result is None else {
            "input_tokens": result.prompt_tokens, "output_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        # This server's extension: the levers' decisions this turn (docs/serve.md); null while in progress.
        "decisions": None if result is None else decisions_json(result),
    }


class _ResponseStream:
    """A turn's events as Responses stream events: ``response.created``, then each output item
    (reasoning, the message, a ``function_call`` per call) added, its deltas, done; then
    ``response.completed`` with the whole response. The deltas are the chat-completions chunks'
    (``ChunkWriter``), so what a repaired turn re-sends is handled once."""

    def __init__(self, dialect: Responses, request: ChatRequest, *, model: str) -> None:
        self.dialect, self.request, self.model = dialect, request, model
        self.response_id, self.created = _new("resp"), int(time.time())
        self._chunks = ChunkWriter(model=model, completion_id=self.response_id)
        self._items: list[dict[str, Any]] = []
        self._open: tuple[str, int] | None = None  # the open item's kind and call index
        self._sequence = 0

    def _event(self, kind: str, **data: Any) -> str:
        self._sequence += 1
        return sse({"type": kind, "sequence_number": self._sequence, **data}, kind)

    def opening(self) -> list[str]:
        response = _response(self.response_id, self.request, self.model, [], None, self.created)
        return [self._event("response.created", response=response), self._event("response.in_progress", response=response)]

    def _start(self, kind: str, call: int, item: dict[str, Any]) -> list[str]:
        if self._open == (kind, call):
            return []
        out = self._close()
        self._items.append(item)
        self._open = (kind, call)
        out.append(self._event("response.output_item.added", output_index=len(self._items) - 1, item=item))
        if kind == "message":
            out.append(self._event("response.content_part.added", item_id=item["id"], output_index=len(self._items) - 1,
                                   content_index=0, part={"type": "output_text", "text": "", "annotations": []}))
        elif kind == "reasoning":
            out.append(self._event("response.reasoning_summary_part.added", item_id=item["id"],
                                   output_index=len(self._items) - 1, summary_index=0,
                                   part={"type": "summary_text", "text": ""}))
        return out

    def _close(self) -> list[str]:
        if self._open is None:
            return []
        kind, _ = self._open
        self._open = None
        index, item = len(self._items) - 1, self._items[-1]
        out = []
        if kind == "message":
            part = item["content"][0]
            out += [self._event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                                text=part["text"]),
                    self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                                part=part)]
            item["status"] = "completed"
        elif kind == "reasoning":
            part = item["summary"][0]
            out += [self._event("response.reasoning_summary_text.done", item_id=item["id"], output_index=index,
                                summary_index=0, text=part["text"]),
                    self._event("response.reasoning_summary_part.done", item_id=item["id"], output_index=index,
                                summary_index=0, part=part)]
        else:
            out.append(self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                   arguments=item["arguments"]))
            item["status"] = "completed"
        out.append(self._event("response.output_item.done", output_index=index, item=item))
        return out

    def event(self, event: StreamEvent) -> list[str]:
        chunk = self._chunks.event(event)
        if chunk is None:
            return []
        delta = chunk["choices"][0]["delta"]
        if "reasoning_content" in delta:
            out = self._start("reasoning", -1, {"type": "reasoning", "id": _new("rs"),
                                                "summary": [{"type": "summary_text", "text": ""}]})
            item = self._items[-1]
            item["summary"][0]["text"] += delta["reasoning_content"]
            return [*out, self._event("response.reasoning_summary_text.delta", item_id=item["id"],
                                      output_index=len(self._items) - 1, summary_index=0,
                                      delta=delta["reasoning_content"])]
        if "content" in delta:
            out = self._start("message", -1, {"type": "message", "id": _new("msg"), "status": "in_progress",
                                              "role": "assistant",
                                              "content": [{"type": "output_text", "text": "", "annotations": []}]})
            item = self._items[-1]
            item["content"][0]["text"] += delta["content"]
            return [*out, self._event("response.output_text.delta", item_id=item["id"],
                                      output_index=len(self._items) - 1, content_index=0, delta=delta["content"])]
        call = delta["tool_calls"][0]
        out = []
        if "id" in call:
            out += self._start("function_call", call["index"], {
                "type": "function_call", "id": _new("fc"), "call_id": call["id"], "name": call["function"]["name"],
                "arguments": "", "status": "in_progress"})
        if arguments := call["function"].get("arguments"):
            item = self._items[-1]
            item["arguments"] += arguments
            out.append(self._event("response.function_call_arguments.delta", item_id=item["id"],
                                   output_index=len(self._items) - 1, delta=arguments))
        return out

    def closing(self, result: ChatResult) -> list[str]:
        out = self._close()
        if not self._items:  # an empty answer still has its message
            out += self._start("message", -1, {"type": "message", "id": _new("msg"), "status": "in_progress",
                                               "role": "assistant",
                                               "content": [{"type": "output_text", "text": "", "annotations": []}]})
            out += self._close()
        response = _response(self.response_id, self.request, self.model, self._items, result, self.created)
        self.dialect.keep(self.response_id, self.request, result)
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        return [*out, self._event(kind, response=response)]

    def failure(self, body: dict[str, Any]) -> list[str]:
        error = body.get("error", {})
        return [self._event("error", code=error.get("code"), message=error.get("message"), param=error.get("param"))]
