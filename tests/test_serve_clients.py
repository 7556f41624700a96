"""`localtools serve` in its own process on 127.0.0.1, on real weights, used by real clients:
the openai SDK (chat completions, Responses, structured output), the OpenAI Agents SDK, smolagents, the anthropic SDK, PydanticAI,
LangChain and LlamaIndex (in its own environment), with no change but ``base_url``."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from conftest import require_backend

from localtools.families._parse import disguised_calls

pytestmark = pytest.mark.model

_spec = importlib.util.spec_from_file_location("serve_load", Path(__file__).parents[1] / "benchmarks" / "serve_load.py")
assert _spec and _spec.loader
serve_load = importlib.util.module_from_spec(_spec)
sys.modules["serve_load"] = serve_load  # its dataclasses look their module up there
_spec.loader.exec_module(serve_load)

CUSTOMERS = {"cust-1001": {"name": "Ada Lovelace", "plan": "pro"}, "cust-1002": {"name": "Alan Turing", "plan": "free"}}
QUESTION = "What subscription plan is customer cust-1001 using?"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone.", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
CUSTOMER = {"type": "function", "function": {"name": "get_customer", "description": "Look up a customer record by id.",
                                             "parameters": {"type": "object", "properties": {
                                                 "customer_id": {"type": "string", "description": "e.g. cust-1001"}},
                                                 "required": ["customer_id"]}}}


def _server(model: str, *options: str) -> Iterator[str]:
    require_backend("llama-cpp")
    proc, url = serve_load.start_server(model, *options)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def smollm_url() -> Iterator[str]:
    yield from _server("smollm2-135m", "--queue", "8")


@pytest.fixture(scope="module")
def qwen_url() -> Iterator[str]:
    yield from _server("qwen2.5-coder-0.5b")


def client(url: str) -> Any:  # the SDK's TypedDict overloads do not take plain dict literals
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0)


def test_plain_answer(smollm_url: str) -> None:
    res = client(smollm_url).chat.completions.create(model="smollm2-135m", messages=[{"role": "user", "content": "Say hello."}],
                                                     max_tokens=32)
    choice = res.choices[0]
    assert choice.finish_reason in ("stop", "length") and choice.message.content and not choice.message.tool_calls
    assert res.usage is not None and res.usage.completion_tokens > 0 and res.model == "smollm2-135m"


def test_required_and_named_tool_choice_are_enforced(smollm_url: str) -> None:
    sdk = client(smollm_url)
    messages = [{"role": "user", "content": "What time is it in Tokyo?"}]
    required = sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER, TIME], tool_choice="required",
                                           parallel_tool_calls=False)
    (call,) = required.choices[0].message.tool_calls or []
    assert required.choices[0].finish_reason == "tool_calls" and call.function.name in ("get_weather", "get_time")
    assert isinstance(json.loads(call.function.arguments)[{"get_weather": "city", "get_time": "zone"}[call.function.name]], str)
    # The question is about time; naming the weather tool must still give a weather call.
    named = sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER, TIME],
                                        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    calls = named.choices[0].message.tool_calls or []
    assert calls and all(c.function.name == "get_weather" and set(json.loads(c.function.arguments)) == {"city"} for c in calls)


def test_streamed_calls_reassemble_to_the_non_streamed_ones(smollm_url: str) -> None:
    sdk = client(smollm_url)
    request: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris and in Oslo?"}],
                               "tools": [WEATHER], "tool_choice": "required"}
    # Once first, so both compared replies start from the prompt cached: a prompt evaluated cold
    # and one resumed from the cache differ in the last bits, enough to tip a near tie on a 135M model.
    sdk.chat.completions.create(**request)
    whole = sdk.chat.completions.create(**request)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in sdk.chat.completions.create(**request, stream=True):
        for delta in chunk.choices[0].delta.tool_calls or []:
            entry = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += delta.id or ""
            entry["name"] += (delta.function and delta.function.name) or ""
            entry["arguments"] += (delta.function and delta.function.arguments) or ""
        finish = chunk.choices[0].finish_reason or finish
    streamed = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]
    assert streamed == [(c.function.name, json.loads(c.function.arguments)) for c in whole.choices[0].message.tool_calls or []]
    assert finish == "tool_calls" and all(c["id"].startswith("call_") for c in calls.values())


def test_a_call_cut_by_max_tokens_is_not_a_server_error(smollm_url: str) -> None:
    res = client(smollm_url).chat.completions.create(model="m", messages=[{"role": "user", "content": "Weather in Paris?"}],
                                                     tools=[WEATHER], tool_choice="required", max_tokens=4)
    assert res.choices[0].finish_reason == "length" and not res.choices[0].message.tool_calls


ERRORS: list[tuple[str, dict[str, Any], str | None]] = [
    ("empty messages", {"messages": []}, "messages"),
    ("unknown role", {"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    ("tools not a list", {"messages": [{"role": "user", "content": "hi"}], "tools": {"get_weather": WEATHER}}, "tools"),
    ("invalid tool schema", {"messages": [{"role": "user", "content": "hi"}], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": 7}}}}}]},
     "tools[0].function.parameters"),
    ("tool_choice names a tool not in tools", {"messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER],
                                               "tool_choice": {"type": "function", "function": {"name": "get_time"}}}, "tool_choice"),
    ("unpaired tool_call_id", {"messages": [{"role": "user", "content": "hi"},
                                            {"role": "tool", "tool_call_id": "call_404", "content": "sunny"}]},
     "messages[1].tool_call_id"),
    ("malformed history arguments", {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{'city': Paris"}}]}]},
     "messages[1].tool_calls[0].function.arguments"),
]


@pytest.mark.parametrize(("case", "body", "param"), ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_requests_are_400_with_openai_error_json(smollm_url: str, case: str, body: dict[str, Any], param: str | None) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(smollm_url).chat.completions.create(model="m", **body)
    error = caught.value.body
    assert isinstance(error, dict) and error["type"] == "invalid_request_error" and error["param"] == param
    assert caught.value.status_code == 400


def test_concurrent_clients_each_get_their_own_call(smollm_url: str) -> None:
    # More clients than the queue holds: each answer is the call to its own request's tool, and
    # every refusal is a 503 the server counts. Latency and throughput under 32 clients are a
    # measurement: benchmarks/serve_load.py.
    report = asyncio.run(serve_load.run_load(smollm_url, clients=12, requests=2))
    assert report.errors == [] and report.mismatched == []
    assert report.answered == 24
    health = httpx.get(smollm_url.removesuffix("/v1") + "/health").json()
    assert health["status"] == "ok" and health["pending"] == 0 and health["rejected"] == report.busy


def _get_customer(customer_id: str) -> dict[str, str]:
    if customer_id not in CUSTOMERS:
        raise KeyError(f"no customer {customer_id!r}")
    return CUSTOMERS[customer_id]


def test_openai_sdk_full_round_trip(qwen_url: str) -> None:
    sdk = client(qwen_url)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    first = sdk.chat.completions.create(model="qwen", messages=messages, tools=[CUSTOMER])
    (call,) = first.choices[0].message.tool_calls or []
    assert call.function.name == "get_customer" and json.loads(call.function.arguments) == {"customer_id": "cust-1001"}
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps(_get_customer("cust-1001"))}]
    final = sdk.chat.completions.create(model="qwen", messages=messages, tools=[CUSTOMER])
    assert final.choices[0].finish_reason == "stop" and "pro" in (final.choices[0].message.content or "").lower()


_FUNCTIONS: list[Any] = [CUSTOMER["function"], WEATHER["function"]]
ANTHROPIC_TOOLS: list[Any] = [{"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
                              for f in _FUNCTIONS]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_anthropic_sdk_tool_use_loop(qwen_url: str, stream: bool) -> None:
    # The loop as Anthropic's tool-use docs write it: call, run each tool_use, send tool_result
    # blocks back, until the stop reason is no longer tool_use.
    anthropic = pytest.importorskip("anthropic")
    sdk = anthropic.Anthropic(base_url=qwen_url.removesuffix("/v1"), api_key="unused")
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    for _ in range(4):
        if stream:
            with sdk.messages.stream(model="qwen", max_tokens=256, messages=messages, tools=ANTHROPIC_TOOLS) as live:
                pieces = [event for event in live]
                reply = live.get_final_message()
            assert pieces and reply.id.startswith("msg_")
        else:
            reply = sdk.messages.create(model="qwen", max_tokens=256, messages=messages, tools=ANTHROPIC_TOOLS)
        if reply.stop_reason != "tool_use":
            break
        messages.append({"role": "assistant", "content": reply.content})
        results = [{"type": "tool_result", "tool_use_id": block.id, "content": json.dumps(_get_customer(**block.input))}
                   for block in reply.content if block.type == "tool_use"]
        assert [b.name for b in reply.content if b.type == "tool_use"] == ["get_customer"]
        messages.append({"role": "user", "content": results})
    assert len(messages) == 3 and reply.stop_reason == "end_turn"
    assert "pro" in "".join(b.text for b in reply.content if b.type == "text").lower()
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    counted = sdk.messages.count_tokens(model="qwen", messages=messages, tools=ANTHROPIC_TOOLS)
    assert counted.input_tokens > reply.usage.input_tokens // 2


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_sdk_responses_tool_loop(qwen_url: str, stream: bool) -> None:
    # The function-calling loop as OpenAI's Responses docs write it: run each function_call, send
    # its function_call_output back (here through previous_response_id), until a message comes.
    sdk = client(qwen_url)
    tools: list[Any] = [{"type": "function", **f} for f in _FUNCTIONS]
    request: dict[str, Any] = {"model": "qwen", "tools": tools, "input": QUESTION}
    for _ in range(4):
        if stream:
            with sdk.responses.stream(**request) as live:
                kinds = [event.type for event in live]
                response = live.get_final_response()
            assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        else:
            response = sdk.responses.create(**request)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            break
        assert [c.name for c in calls] == ["get_customer"]
        request = {"model": "qwen", "tools": tools, "previous_response_id": response.id, "input": [
            {"type": "function_call_output", "call_id": c.call_id,
             "output": json.dumps(_get_customer(**json.loads(c.arguments)))} for c in calls]}
    assert response.status == "completed" and "previous_response_id" in request
    assert "pro" in response.output_text.lower()
    assert response.usage is not None and response.usage.input_tokens > 0


@pytest.mark.parametrize("api", ["responses", "chat completions"])
def test_openai_agents_sdk_runs_its_loop(qwen_url: str, api: str) -> None:
    # The OpenAI Agents SDK as its docs write an agent with a function tool, on its Responses model
    # (the SDK's default API) and on its chat-completions model.
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # its traces go to OpenAI's servers
    sdk = openai.AsyncOpenAI(base_url=qwen_url, api_key="none", max_retries=0)

    @function_tool
    def get_customer(customer_id: str) -> str:
        """Look up a customer record by id.

        Args:
            customer_id: The customer's id, e.g. cust-1001.
        """
        return json.dumps(_get_customer(customer_id))

    model: Any = OpenAIResponsesModel("qwen", sdk) if api == "responses" else OpenAIChatCompletionsModel("qwen", sdk)
    agent = Agent(name="support", instructions="Answer from the tools' results.", tools=[get_customer], model=model)
    result = Runner.run_sync(agent, QUESTION, max_turns=4)
    assert "pro" in str(result.final_output).lower()


@pytest.mark.parametrize("unrelated", [False, True], ids=["one tool", "beside an unrelated tool"])
def test_smolagents_tool_calling_agent_answers_with_its_final_answer_tool(qwen_url: str, unrelated: bool) -> None:
    # smolagents' ToolCallingAgent asks for a call every step (tool_choice "required") and ends only
    # with its final_answer tool: the same get_customer call again would go on until max_steps. A
    # repeat the model still writes after the repairs ends in a call to another tool (its
    # final_answer), never in an error that kills the agent.
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def get_customer(customer_id: str) -> str:
        """Look up a customer record by id.

        Args:
            customer_id: The customer's id, e.g. cust-1001.
        """
        return json.dumps(_get_customer(customer_id))

    @tool
    def get_weather(city: str) -> str:
        """Current weather in a city.

        Args:
            city: The city's name.
        """
        return json.dumps({"city": city, "weather": "sunny"})

    model = OpenAIServerModel(model_id="qwen", api_base=qwen_url, api_key="none")
    tools = [get_customer, get_weather] if unrelated else [get_customer]
    agent = ToolCallingAgent(tools=tools, model=model, max_steps=4, verbosity_level=0)
    answer = agent.run(QUESTION)
    calls = [c for step in agent.memory.steps for c in getattr(step, "tool_calls", None) or []]
    # One lookup, then its final answer. smolagents writes the call into the prompt as text and the
    # result as a user message: a repeat of the lookup (which Qwen 0.5B writes on some call ids,
    # alone or before its final_answer) is read from that text and refused, never an error.
    assert [c.name for c in calls] == ["get_customer", "final_answer"]
    # What the final answer says is the model's own words, and llama.cpp's greedy text differs
    # between CPUs (beside the unrelated tool one machine answered from its own knowledge): the
    # guarantee is the agent's run, above, ending in a final answer.
    assert isinstance(answer, str) and answer.strip()


#: LlamaIndex pins an older openai SDK than the other clients: `make setup-test` gives it its own
#: environment inside the test one.
LLAMAINDEX_PYTHON = Path(sys.prefix) / "llamaindex" / "bin" / "python"


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_llamaindex_function_agent(qwen_url: str, stream: bool) -> None:
    import subprocess

    if not LLAMAINDEX_PYTHON.exists():
        pytest.skip(f"no LlamaIndex environment at {LLAMAINDEX_PYTHON}: `make setup-test` makes it")
    script = Path(__file__).parent / "clients" / "llamaindex_agent.py"
    run = subprocess.run([str(LLAMAINDEX_PYTHON), str(script), qwen_url, "stream" if stream else "whole"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["calls"] == ["cust-1001"] and "pro" in out["answer"].lower()


def test_openai_sdk_structured_output_parses_into_the_pydantic_model(qwen_url: str) -> None:
    # The SDK's own structured-output helpers, as its docs use them: chat.completions.parse sends the
    # model's strict json_schema and parses the reply; responses.parse does the same over text.format.
    from typing import Literal

    from pydantic import BaseModel

    class Customer(BaseModel):
        name: str
        plan: Literal["free", "pro", "enterprise"]

    sdk = client(qwen_url)
    record = json.dumps(CUSTOMERS["cust-1001"])
    messages: list[Any] = [{"role": "user", "content": f"Here is a customer record: {record}. Extract the name and plan."}]
    completion = sdk.chat.completions.parse(model="qwen", messages=messages, response_format=Customer, max_tokens=64)
    parsed = completion.choices[0].message.parsed
    assert isinstance(parsed, Customer) and parsed.plan == "pro" and "Ada" in parsed.name
    response = sdk.responses.parse(model="qwen", input=messages, text_format=Customer, max_output_tokens=64)
    assert isinstance(response.output_parsed, Customer) and response.output_parsed.plan == "pro"


def test_pydantic_ai_agent(qwen_url: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("qwen2.5-coder-0.5b", provider=OpenAIProvider(base_url=qwen_url, api_key="none"))
    agent = Agent(model)
    seen: list[str] = []

    @agent.tool_plain
    def get_customer(customer_id: str) -> dict[str, str]:
        """Look up a customer record (name, subscription plan) by customer id, e.g. cust-1001."""
        seen.append(customer_id)
        return _get_customer(customer_id)

    # An unrelated tool on offer too: the seeds' scenario where small models used to call it.
    @agent.tool_plain
    def convert_temperature(value: float, unit: str) -> str:
        """Convert a temperature between Celsius (C) and Fahrenheit (F)."""
        seen.append(f"convert_temperature({value}, {unit})")
        return str(value)

    result = agent.run_sync(QUESTION)
    assert seen == ["cust-1001"] and "pro" in result.output.lower()


def _langchain_tools() -> tuple[list[Any], list[str]]:
    """get_customer and an unrelated tool, and the calls made to either."""
    from langchain_core.tools import tool

    seen: list[str] = []

    @tool
    def get_customer(customer_id: str) -> dict[str, str]:
        """Look up a customer record (name, subscription plan) by customer id, e.g. cust-1001."""
        seen.append(customer_id)
        return _get_customer(customer_id)

    @tool
    def convert_temperature(value: float, unit: str) -> str:
        """Convert a temperature between Celsius (C) and Fahrenheit (F)."""
        seen.append(f"convert_temperature({value}, {unit})")
        return str(value)

    return [get_customer, convert_temperature], seen


def _chat_openai(url: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=url, api_key="none", model="qwen2.5-coder-0.5b", max_retries=0)


def test_langchain_bind_tools(qwen_url: str) -> None:
    from langchain_core.messages import HumanMessage

    tools, seen = _langchain_tools()
    get_customer = tools[0]
    llm = _chat_openai(qwen_url).bind_tools([get_customer])
    history: list[Any] = [HumanMessage(QUESTION)]
    reply = llm.invoke(history)
    assert [c["name"] for c in reply.tool_calls] == ["get_customer"]
    history += [reply, get_customer.invoke(reply.tool_calls[0])]
    final = llm.invoke(history)
    assert seen == ["cust-1001"] and "pro" in str(final.content).lower()


def test_langchain_create_agent(qwen_url: str) -> None:
    agents = pytest.importorskip("langchain.agents")
    create_agent: Callable[..., Any] | None = getattr(agents, "create_agent", None)
    if create_agent is None:
        pytest.skip("this langchain has no create_agent")
    # get_customer alone, here and in bind_tools: with the temperature tool beside it, LangChain's
    # prompt (its tool descriptions, no system message) is a near tie for the 0.5B model, which
    # picks the temperature tool from a cold prompt cache under free decoding as well as
    # constrained, and get_customer from a warm one. PydanticAI's prompt, above, offers both.
    tools, seen = _langchain_tools()
    agent = create_agent(_chat_openai(qwen_url), tools=tools[:1])
    out = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    assert seen == ["cust-1001"] and "pro" in str(out["messages"][-1].content).lower()


def test_streamed_text_reassembles_exactly_to_the_non_streamed_reply(smollm_url: str) -> None:
    sdk = client(smollm_url)
    for tools in ([], [WEATHER]):
        request: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Tell me about the sea."}],
                                   "max_tokens": 48, **({"tools": tools} if tools else {})}
        # Each request after the first finds its prompt cached, so both below evaluate it alike.
        sdk.chat.completions.create(**request)
        whole = sdk.chat.completions.create(**request)
        pieces, finish = [], None
        for chunk in sdk.chat.completions.create(**request, stream=True):
            if chunk.choices:
                pieces += [chunk.choices[0].delta.content] if chunk.choices[0].delta.content else []
                finish = chunk.choices[0].finish_reason or finish
        assert whole.choices[0].message.content and not whole.choices[0].message.tool_calls
        assert "".join(pieces) == whole.choices[0].message.content
        assert finish == whole.choices[0].finish_reason
        assert len(pieces) > 5, "the text came in one piece, not as it was generated"


def test_langchain_streaming_reassembles_to_invoke(qwen_url: str) -> None:
    from langchain_core.messages import HumanMessage

    tools, _ = _langchain_tools()
    for llm, question in ((_chat_openai(qwen_url).bind_tools(tools[:1]), QUESTION),
                          (_chat_openai(qwen_url), "Name three colours of the rainbow.")):
        history: list[Any] = [HumanMessage(question)]
        llm.invoke(history)  # the prompt cached, as it is for the two compared below
        whole = llm.invoke(history)
        chunks = list(llm.stream(history))
        streamed = chunks[0]
        for chunk in chunks[1:]:
            streamed = streamed + chunk
        assert streamed.content == whole.content
        assert [(c["name"], c["args"]) for c in streamed.tool_calls] == [(c["name"], c["args"]) for c in whole.tool_calls]
        assert whole.content or whole.tool_calls


def test_a_call_over_serve_fits_its_schema_beyond_its_shape(qwen_url: str) -> None:
    from localtools.grammar import admits

    booking: dict[str, Any] = {"type": "function", "function": {"name": "book", "description": "Book a table.", "parameters": {
        "type": "object", "properties": {"month": {"type": "integer", "minimum": 1, "maximum": 12},
                                         "zip": {"type": "string", "pattern": "^\\d{5}$"},
                                         "day": {"type": "string", "format": "date"},
                                         "seat": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                                                  "items": False, "minItems": 2}},
        "required": ["month", "zip", "day", "seat"]}}}
    ask = [{"role": "user", "content": "Book a table in month 14 at zip 1234 for tomorrow, seat 3 A."}]
    for stream in (False, True):
        if stream:
            parts = client(qwen_url).chat.completions.create(model="m", messages=ask, tools=[booking],
                                                             tool_choice="required", max_tokens=96, stream=True)
            arguments = "".join(c.function.arguments or "" for chunk in parts for d in [chunk.choices[0].delta]
                                for c in (d.tool_calls or []))
        else:
            reply = client(qwen_url).chat.completions.create(model="m", messages=ask, tools=[booking],
                                                             tool_choice="required", max_tokens=96)
            (call,) = reply.choices[0].message.tool_calls or []
            arguments = call.function.arguments
        assert admits(booking["function"]["parameters"], arguments), arguments


def test_the_seeds_question_with_a_system_message_and_an_unrelated_tool_gets_a_real_call(qwen_url: str) -> None:
    convert = {"type": "function", "function": {"name": "convert_temperature", "description": "Convert Celsius to "
               "Fahrenheit.", "parameters": {"type": "object", "properties": {"celsius": {"type": "number"}},
                                             "required": ["celsius"]}}}
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful support assistant."},
                                      {"role": "user", "content": QUESTION}]
    sdk = client(qwen_url)
    first = sdk.chat.completions.create(model="m", messages=messages, tools=[CUSTOMER, convert], max_tokens=96)
    choice = first.choices[0]
    # Once a call to an invented tool left as the answer; now the opening goes to the call branch.
    assert not (choice.message.content or "").lstrip().startswith('{"name"'), choice.message.content
    (call,) = choice.message.tool_calls or []
    assert choice.finish_reason == "tool_calls" and call.function.name == "get_customer"
    record = CUSTOMERS[json.loads(call.function.arguments)["customer_id"]]
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps(record)}]
    answer = sdk.chat.completions.create(model="m", messages=messages, tools=[CUSTOMER, convert], max_tokens=96)
    assert "pro" in (answer.choices[0].message.content or "").lower()


def test_langchain_create_agent_with_a_system_message_and_an_unrelated_tool(qwen_url: str) -> None:
    agents = pytest.importorskip("langchain.agents")
    create_agent: Callable[..., Any] | None = getattr(agents, "create_agent", None)
    if create_agent is None:
        pytest.skip("this langchain has no create_agent")
    tools, seen = _langchain_tools()
    agent = create_agent(_chat_openai(qwen_url), tools=tools, system_prompt="You are a helpful support assistant.")
    out = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    answer = str(out["messages"][-1].content)
    # Once this answer was call JSON with an invented name; now a text answer never opens like one.
    assert not answer.lstrip().startswith('{"name"'), answer
    assert seen == ["cust-1001"] and "pro" in answer.lower()


SYSTEM_MESSAGES = [
    "You are a helpful support assistant.",
    "You are a customer service agent for a subscription software company. Be concise.",
    "You are an AI assistant. Use the tools available to you when they help answer the user.",
    "Answer the user's questions accurately. Reply in English.",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    "You work on the billing team. Customers ask about their accounts; look things up before answering.",
]
UNRELATED = [
    {"type": "function", "function": {"name": "convert_temperature", "description": "Convert Celsius to Fahrenheit.",
                                      "parameters": {"type": "object", "properties": {"celsius": {"type": "number"}},
                                                     "required": ["celsius"]}}},
    WEATHER,
    {"type": "function", "function": {"name": "send_email", "description": "Send an email to an address.",
                                      "parameters": {"type": "object", "properties": {
                                          "to": {"type": "string"}, "subject": {"type": "string"},
                                          "body": {"type": "string"}}, "required": ["to", "subject", "body"]}}},
]


@pytest.mark.parametrize("system", SYSTEM_MESSAGES)
def test_the_seeds_question_gets_a_real_call_under_every_system_message_beside_three_unrelated_tools(
        qwen_url: str, system: str) -> None:
    # Whatever the model writes, a call never leaves as text: it is a real call, checked, or the turn
    # is decoded again; with these prompts the 0.5B model's answer is a get_customer call.
    for stream in (False, True):
        request: dict[str, Any] = {"model": "m", "messages": [{"role": "system", "content": system},
                                                             {"role": "user", "content": QUESTION}],
                                   "tools": [*UNRELATED, CUSTOMER], "max_tokens": 96}
        with httpx.Client(base_url=qwen_url, timeout=300) as http:
            if stream:
                text = ""
                calls: dict[int, dict[str, str]] = {}
                with http.stream("POST", "/chat/completions", json={**request, "stream": True}) as res:
                    for line in res.iter_lines():
                        if line.startswith("data: {"):
                            delta = json.loads(line[6:])["choices"][0]["delta"]
                            text += delta.get("content") or ""
                            for c in delta.get("tool_calls") or []:
                                entry = calls.setdefault(c["index"], {"name": "", "arguments": ""})
                                entry["name"] += c.get("function", {}).get("name") or ""
                                entry["arguments"] += c.get("function", {}).get("arguments") or ""
                found = list(calls.values())
            else:
                message = http.post("/chat/completions", json=request).json()["choices"][0]["message"]
                text = message.get("content") or ""
                found = [c["function"] for c in message.get("tool_calls") or []]
        assert not disguised_calls(text), text
        assert [c["name"] for c in found] == ["get_customer"], (system, stream, text, found)
        assert json.loads(found[0]["arguments"])["customer_id"] == "cust-1001"


def test_the_agents_sdk_over_serve_leaves_a_multi_turn_case_in_the_state_the_agent_in_process_does(qwen_url: str) -> None:
    """A BFCL multi-turn case, user turn by user turn, by the OpenAI Agents SDK over Responses
    against `serve`, its tools run on the case's own API instances; and the same case through
    `Agent` in process on the same model and decisions: the same calls in the same turns (greedy,
    one prompt: the server renders what the agent renders), and the same state."""
    import ast

    from agents import Agent, FunctionTool, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled
    from agents.exceptions import MaxTurnsExceeded
    from conftest import load_once

    from localtools.bench._bfcl import to_tool_spec
    from localtools.bench._multiturn import (
        MultiTurnMode,
        bfcl_instruction,
        call_text,
        instances,
        load_multi_turn,
        run_multi_turn_case,
        tools_for,
    )

    set_tracing_disabled(True)
    case = min(load_multi_turn("multi_turn_base"), key=lambda c: (len(c.turns), len(c.functions)))
    system, steps = bfcl_instruction(), 3
    model = load_once("qwen2.5-coder-0.5b")
    here = run_multi_turn_case(model, case, MultiTurnMode("default", True, model.decisions), max_steps=steps,
                               max_tokens=128, system=system)

    apis = instances(case)
    runnable = {t.name: t for t in tools_for(case.functions, apis)}
    made: list[list[str]] = []

    def sdk_tool(doc: dict[str, Any]) -> Any:
        spec = to_tool_spec(doc)["function"]

        async def invoke(_: Any, arguments: str) -> str:
            values = json.loads(arguments or "{}")
            made[-1].append(call_text(doc["name"], values))
            return str(runnable[doc["name"]].fn(**values))

        return FunctionTool(name=spec["name"], description=spec["description"], params_json_schema=spec["parameters"],
                            on_invoke_tool=invoke, strict_json_schema=False)

    sdk = openai.AsyncOpenAI(base_url=qwen_url, api_key="none", max_retries=0)
    agent = Agent(name="bfcl", instructions=system, tools=[sdk_tool(d) for d in case.functions],
                  model=OpenAIResponsesModel("qwen", sdk), model_settings=ModelSettings(temperature=0.0, max_tokens=128))
    history: list[Any] = []
    for turn in case.turns:
        made.append([])
        try:
            result = Runner.run_sync(agent, history + [dict(m) for m in turn], max_turns=steps)
        except MaxTurnsExceeded:
            break  # as the bench ends a case at a turn cut by the step limit
        history = result.to_input_list()
    offered = {d["name"] for d in case.functions}
    assert all(call.split("(")[0] in offered for turn in made for call in turn)
    assert made == [[c for s in t for c in s] for t in here.decoded]
    # The calls made in process, run on fresh instances, leave the state the SDK's calls left.
    fresh = instances(case)
    again = {t.name: t for t in tools_for(case.functions, fresh)}
    for turn_calls in here.decoded:
        for step in turn_calls:
            for call in step:
                node = ast.parse(call, mode="eval").body
                assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                again[node.func.id].fn(**{k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
    for name, api in apis.items():
        assert {k: v for k, v in vars(api).items() if not k.startswith("_")} == \
            {k: v for k, v in vars(fresh[name]).items() if not k.startswith("_")}, name
