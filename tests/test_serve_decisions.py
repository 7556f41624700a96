"""`localtools serve`'s decision levers without weights: the request field ``decisions`` (a profile
or an object of settings) on every dialect, streamed and not, its 400s, the ``decisions`` list every
reply carries, the official openai and anthropic SDKs reading it, and ``serve --decisions``."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from conftest import tc
from test_serve import WEATHER, post, running

from localtools import Model, ScriptedBackend
from localtools._errors import UsageError
from localtools.model._decide import Decision, DecisionPoint, Decisions
from localtools.model._turn import ChatResult
from localtools.serve._app import ServerConfig, create_app
from localtools.serve._decisions import COUNT_LIMITS, decisions_json

PARIS, LONDON = tc("get_weather", city="Paris"), tc("get_weather", city="London")
#: A reply that repeats one of its calls: ``distinct`` leaves the repeat out.
REPEATED = "\n".join([PARIS, LONDON, PARIS])
ASK = "Weather in Paris and in London?"
CITY: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
#: The chat-completions tool (``WEATHER``) as the Responses API and Messages write it.
FLAT = {"type": "function", "name": "get_weather", "description": "Weather in a city.", "parameters": CITY}
ANTHROPIC = {"name": "get_weather", "description": "Weather in a city.", "input_schema": CITY}
#: Each dialect: its path, and a request asking for the weather with its tools.
DIALECTS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": ASK}], "tools": [WEATHER]}),
    "responses": ("/v1/responses", {"model": "m", "input": ASK, "tools": [FLAT]}),
    "messages": ("/v1/messages", {"model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": ASK}],
                                  "tools": [ANTHROPIC]}),
}
FIELDS = {f.name for f in dataclasses.fields(Decision)}


def app_deciding(replies: list[Any], decisions: Decisions | None = None, *, choices: Any = None,
                 **config: Any) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend(replies, choices=choices)
    model = Model(backend, family="qwen2.5", decisions=decisions)
    return create_app(model, ServerConfig(model_name="scripted-model", **config)), backend


def sse_data(text: str) -> list[tuple[str | None, Any]]:
    """The (event, data) records of a stream; ``[DONE]`` as a string."""
    out: list[tuple[str | None, Any]] = []
    for record in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in record.splitlines())
        data = lines["data"]
        out.append((lines.get("event"), data if data == "[DONE]" else json.loads(data)))
    return out


def calls_and_decisions(dialect: str, res: httpx.Response) -> tuple[list[str], list[dict[str, Any]]]:
    """The cities the reply called for and its ``decisions``, from a whole reply or its stream."""
    assert res.status_code == 200, res.text
    if not res.headers["content-type"].startswith("text/event-stream"):
        body = res.json()
        if dialect == "chat":
            calls = [json.loads(c["function"]["arguments"]) for c in body["choices"][0]["message"].get("tool_calls") or []]
        elif dialect == "responses":
            calls = [json.loads(i["arguments"]) for i in body["output"] if i["type"] == "function_call"]
        else:
            calls = [b["input"] for b in body["content"] if b["type"] == "tool_use"]
        return [c["city"] for c in calls], body["decisions"]
    records = sse_data(res.text)
    if dialect == "chat":
        chunks = [data for _, data in records if data != "[DONE]"]
        started = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", []) if "id" in d]
        arguments: dict[int, str] = {}
        for chunk in chunks:
            for delta in chunk["choices"][0]["delta"].get("tool_calls", []):
                arguments[delta["index"]] = arguments.get(delta["index"], "") + delta["function"]["arguments"]
        (finish,) = [c for c in chunks if c["choices"][0]["finish_reason"] is not None]
        # Only the chunk with the finish reason carries them.
        assert all("decisions" not in c for c in chunks if c is not finish) and len(started) == len(arguments)
        return [json.loads(a)["city"] for _, a in sorted(arguments.items())], finish["decisions"]
    if dialect == "responses":
        (completed,) = [data for event, data in records if event == "response.completed"]
        assert records[0][1]["response"]["decisions"] is None  # not known while in progress
        calls = [json.loads(i["arguments"]) for i in completed["response"]["output"] if i["type"] == "function_call"]
        return [c["city"] for c in calls], completed["response"]["decisions"]
    (delta,) = [data for event, data in records if event == "message_delta"]
    partial: dict[int, str] = {}
    for event, data in records:
        if event == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            partial[data["index"]] = partial.get(data["index"], "") + data["delta"]["partial_json"]
    assert "decisions" not in records[0][1]["message"]
    return [json.loads(p)["city"] for _, p in sorted(partial.items())], delta["delta"]["decisions"]


def ask(dialect: str, app: Any, stream: bool, **extra: Any) -> httpx.Response:
    path, body = DIALECTS[dialect]
    return post(app, {**body, "stream": stream, **extra}, path)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_every_reply_says_what_the_levers_decided_and_greedy_runs_none(dialect: str, stream: bool) -> None:
    app, _ = app_deciding([REPEATED] * 5, Decisions(distinct=True))
    # The model's own levers (absent or null): the repeat is left out, and the reply says so.
    for extra in ({}, {"decisions": None}):
        cities, decisions = calls_and_decisions(dialect, ask(dialect, app, stream, **extra))
        assert cities == ["Paris", "London"]
        (decision,) = decisions
        assert set(decision) == FIELDS  # every field of Decision, none left out
        assert decision["point"] == "distinct" and decision["taken"] is True and decision["calls"] == 2
        assert decision["share"] is None and decision["threshold"] is None
    # "greedy": no lever runs, the reply stands as written.
    cities, decisions = calls_and_decisions(dialect, ask(dialect, app, stream, decisions="greedy"))
    assert cities == ["Paris", "London", "Paris"] and decisions == []
    # An object is its own levers alone, not merged with the model's: ground leaves the repeat in.
    cities, decisions = calls_and_decisions(dialect, ask(dialect, app, stream, decisions={"ground": True}))
    assert len(cities) == 3 and decisions == []


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_an_object_turns_on_exactly_its_levers_on_a_greedy_model(dialect: str) -> None:
    app, _ = app_deciding([REPEATED] * 3)
    assert calls_and_decisions(dialect, ask(dialect, app, False))[1] == []
    cities, decisions = calls_and_decisions(dialect, ask(dialect, app, False, decisions={"distinct": True}))
    assert cities == ["Paris", "London"] and [d["point"] for d in decisions] == ["distinct"]
    assert calls_and_decisions(dialect, ask(dialect, app, False, decisions={}))[1] == []


#: After the first call the model's share for another (0.6 * 0.5) passes 0.25: a second call.
MORE_CHOICES = {PARIS: {"\n": 0.6, "": 0.4}, PARIS + "\n": {"<tool_call>": 0.5, "": 0.5},
                PARIS + "\n" + LONDON: {"": 1.0}}


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_the_same_request_streamed_or_not_gets_the_same_decisions(dialect: str) -> None:
    app, _ = app_deciding([PARIS, PARIS + "\n" + LONDON] * 2, choices=MORE_CHOICES)
    whole = calls_and_decisions(dialect, ask(dialect, app, False, decisions={"more": 0.25, "distinct": True}))
    streamed = calls_and_decisions(dialect, ask(dialect, app, True, decisions={"more": 0.25, "distinct": True}))
    assert whole == streamed and whole[0] == ["Paris", "London"]
    first, second = whole[1]
    assert (first["point"], first["taken"], first["threshold"]) == ("more", True, 0.25)
    assert first["share"] == pytest.approx(0.3) and first["reply"] == PARIS
    assert (second["point"], second["taken"], second["calls"]) == ("more", False, 2)


BAD = [("bogus-profile", "bogus-profile"), ({"nope": True}, "nope"), ({"distinct": 1}, "true or false"),
       ({"more": 2}, "share from 0 to 1"), ({"samples": 1.5}, "whole number"),
       ({"samples": COUNT_LIMITS["samples"] + 1}, f"up to {COUNT_LIMITS['samples']}"), (5, "got int"),
       (["greedy"], "got list"), ("", "''")]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("value", "said"), BAD)
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_bad_setting_is_a_400_naming_decisions_in_the_dialects_shape(dialect: str, value: Any, said: str,
                                                                         stream: bool) -> None:
    app, backend = app_deciding([REPEATED])
    res = ask(dialect, app, stream, decisions=value)
    assert res.status_code == 400 and res.headers["content-type"].startswith("application/json")
    error = res.json()["error"]
    assert "'decisions' must be a profile name" in error["message"] and said in error["message"]
    if dialect == "messages":
        assert res.json()["type"] == "error" and error["type"] == "invalid_request_error"
    else:
        assert (error["param"], error["code"], error["type"]) == ("decisions", "invalid_value", "invalid_request_error")
    assert backend.prompts == []  # refused before the model saw it


def test_a_profile_is_read_for_the_served_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import localtools.model._load as load_module

    monkeypatch.setattr(load_module, "calibration_path", lambda model: tmp_path / f"{Path(model).name}.json")
    # Not calibrated: a 400 that says how to calibrate it.
    app, _ = app_deciding([REPEATED] * 3, model_source="mine")
    res = ask("chat", app, False, decisions="calibrated")
    assert res.status_code == 400 and res.json()["error"]["param"] == "decisions"
    assert "localtools calibrate mine" in res.json()["error"]["message"]
    # The file calibrate writes, for the model the server was loaded from (not the name clients see).
    (tmp_path / "mine.json").write_text(json.dumps({"decisions": {"distinct": True}}))
    cities, decisions = calls_and_decisions("chat", ask("chat", app, False, decisions="calibrated"))
    assert cities == ["Paris", "London"] and [d["point"] for d in decisions] == ["distinct"]
    # Without a source, the model's name.
    (tmp_path / "scripted-model.json").write_text(json.dumps({"decisions": {"distinct": True}}))
    app, _ = app_deciding([REPEATED])
    assert [d["point"] for d in calls_and_decisions("chat", ask("chat", app, False, decisions="calibrated"))[1]] == [
        "distinct"]


def test_the_official_clients_send_the_setting_and_keep_the_decisions() -> None:
    app, _ = app_deciding([REPEATED] * 15, Decisions(distinct=True))
    messages: Any = [{"role": "user", "content": ASK}]
    with running(app) as port:
        sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        chat: Any = sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
        assert len(chat.choices[0].message.tool_calls) == 2
        assert [d["point"] for d in chat.model_extra["decisions"]] == ["distinct"]
        assert chat.to_dict()["decisions"] == chat.model_extra["decisions"]
        greedy: Any = sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER],
                                                  extra_body={"decisions": "greedy"})
        assert len(greedy.choices[0].message.tool_calls) == 3 and greedy.model_extra["decisions"] == []
        chunks: Any = list(sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER], stream=True))
        assert [c.model_extra.get("decisions") for c in chunks if c.choices and c.choices[0].finish_reason] == [
            chat.model_extra["decisions"]]

        response: Any = sdk.responses.create(model="m", input=ASK, tools=[FLAT])
        assert [d["point"] for d in response.model_extra["decisions"]] == ["distinct"]
        response = sdk.responses.create(model="m", input=ASK, tools=[FLAT], extra_body={"decisions": "greedy"})
        assert response.model_extra["decisions"] == [] and len(response.output) == 3
        events: Any = list(sdk.responses.create(model="m", input=ASK, tools=[FLAT], stream=True))
        assert events[-1].type == "response.completed"
        assert events[-1].response.model_extra["decisions"] == chat.model_extra["decisions"]
        # The SDKs' stream helpers take the field in their stride; Responses' final response keeps it.
        with sdk.responses.stream(model="m", input=ASK, tools=[FLAT]) as live:
            assert live.get_final_response().model_extra["decisions"] == chat.model_extra["decisions"]
        with sdk.chat.completions.stream(model="m", messages=messages, tools=[WEATHER]) as live_chat:
            assert len(live_chat.get_final_completion().choices[0].message.tool_calls or []) == 2
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.responses.create(model="m", input=ASK, tools=[FLAT], extra_body={"decisions": {"nope": 1}})
        assert refused.value.status_code == 400 and "decisions" in str(refused.value)

        claude = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="none", max_retries=0)
        tools: Any = [ANTHROPIC]
        message: Any = claude.messages.create(model="m", max_tokens=256, messages=messages, tools=tools)
        assert [b.type for b in message.content] == ["tool_use", "tool_use"]
        assert message.model_extra["decisions"] == chat.model_extra["decisions"]
        message = claude.messages.create(model="m", max_tokens=256, messages=messages, tools=tools,
                                         extra_body={"decisions": "greedy"})
        assert len(message.content) == 3 and message.model_extra["decisions"] == []
        streamed: Any = list(claude.messages.create(model="m", max_tokens=256, messages=messages, tools=tools,
                                                    stream=True))
        (delta,) = [e for e in streamed if e.type == "message_delta"]
        assert delta.delta.model_extra["decisions"] == chat.model_extra["decisions"]
        with claude.messages.stream(model="m", max_tokens=256, messages=messages, tools=tools) as live_message:
            assert len(live_message.get_final_message().content) == 2
        with pytest.raises(anthropic.BadRequestError) as bad:
            claude.messages.create(model="m", max_tokens=256, messages=messages, tools=tools,
                                   extra_body={"decisions": "bogus"})
        assert bad.value.status_code == 400 and "decisions" in str(bad.value)


@dataclass(frozen=True)
class _Wider(Decision):
    """A Decision with fields the library may add (before and after values, a nested record)."""

    before: Any = None
    after: Any = None


def test_the_reply_field_takes_every_field_of_a_decision_as_json() -> None:
    wider = _Wider(point=DecisionPoint.MORE, share=math.nan, threshold=0.25, taken=True, calls=1, reply="reply",
                   before=(DecisionPoint.CALL, math.inf),
                   after={"calls": [Decision(DecisionPoint.GROUND, None, None, True, argument="t.a")], 2: {1, 2}})
    (out,) = decisions_json(ChatResult(content="", decisions=(wider,)))
    assert set(out) == FIELDS | {"before", "after"}
    assert out["point"] == "more" and out["share"] is None and out["before"] == ["call", None]
    assert out["after"]["calls"][0]["point"] == "ground" and sorted(out["after"]["2"]) == [1, 2]
    json.dumps(out, allow_nan=False)  # JSON a strict reader takes


def test_serve_decisions_is_the_default_of_requests_that_set_none(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import localtools.model._load as load_module
    import localtools.serve as serve_module
    from localtools.cli._main import build_parser
    from localtools.cli._serve import main

    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--decisions PROFILE" in help_text and "unless it sets its own 'decisions' field" in help_text
    seen: dict[str, Any] = {}

    def fake_load(model: Any = None, **options: Any) -> Model:
        seen.update(options)
        return Model(ScriptedBackend([]), family="qwen2.5")

    def fake_serve(model: Model, config: ServerConfig, **kw: Any) -> None:
        seen["config"] = config

    monkeypatch.setattr(load_module, "load", fake_load)
    monkeypatch.setattr(serve_module, "serve", fake_serve)
    assert main(parser.parse_args(["serve", "--model", "mine.gguf", "--decisions", "greedy", "--family", "qwen2.5"])) == 0
    config = seen["config"]
    assert seen["decisions"] == "greedy"
    assert (config.model_source, config.family, config.template) == ("mine.gguf", "qwen2.5", None)
    with pytest.raises(UsageError, match="not both"):
        main(parser.parse_args(["serve", "--decisions", "greedy", "--calibrated"]))


def test_decisions_on_count_tokens_are_checked_too() -> None:
    app, _ = app_deciding([])
    _, body = DIALECTS["messages"]
    res = post(app, {**body, "decisions": "bogus"}, "/v1/messages/count_tokens")
    assert res.status_code == 400 and "decisions" in res.json()["error"]["message"]
    assert post(app, {**body, "decisions": "greedy"}, "/v1/messages/count_tokens").status_code == 200
