"""Every mask engine reads its rendering of our grammar with the same meaning as our own matcher.

The engines run over a byte-level vocabulary (one token per byte), so these tests need no model:
the Lark rendering through llguidance, the GBNF rendering through xgrammar, and the regex
rendering (what outlines_core gets) through llguidance's regex compiler, which shares its syntax.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_grammar import CASES, CUSTOMER, call, one_tool

from localtools import get_family
from localtools.grammar import Grammar, GrammarNotRegular, Lit, Repeat, Until, alt, build_grammar, matches, seq

llg = pytest.importorskip("llguidance")
xgr = pytest.importorskip("xgrammar")

EOS = 256
BYTES = [bytes([i]) for i in range(256)] + [b"<eos>"]


class _ByteTokenizer:
    eos_token_id = EOS
    bos_token_id = None
    tokens = BYTES
    special_token_ids = (EOS,)

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text if isinstance(text, bytes) else text.encode())


_LLG_TOKENIZER = llg.LLTokenizer(llg.TokenizerWrapper(_ByteTokenizer()))
# xgrammar would read "<eos>" as text that a grammar may match; an empty token is special to it.
_XGR_COMPILER = xgr.GrammarCompiler(xgr.TokenizerInfo([*BYTES[:EOS], b""], stop_token_ids=[EOS]))


def llguidance_accepts(spec: str, text: str) -> bool:
    matcher = llg.LLMatcher(_LLG_TOKENIZER, spec, log_level=0)
    return bool(matcher.consume_tokens(list(text.encode()))) and not matcher.is_error() and matcher.is_accepting()


def xgrammar_accepts(compiled: object, text: str) -> bool:
    matcher = xgr.GrammarMatcher(compiled)
    return all(matcher.accept_token(b) for b in text.encode()) and matcher.accept_token(EOS)


def engines(g: Grammar) -> dict[str, Callable[[str], bool]]:
    lark = llg.grammar_from("lark", g.to_lark())
    assert llg.LLMatcher.validate_grammar(lark) == ""
    out = {"llguidance": lambda t: llguidance_accepts(lark, t)}
    compiled = _XGR_COMPILER.compile_grammar(g.to_gbnf())
    out["xgrammar"] = lambda t: xgrammar_accepts(compiled, t)
    try:
        regex = llg.grammar_from("regex", g.to_regex())
    except GrammarNotRegular:
        pass
    else:
        out["regex"] = lambda t: llguidance_accepts(regex, t)
    return out


@pytest.mark.parametrize(("feature", "params", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_engines_agree_on_schema_features(feature: str, params: dict, good: list[str], bad: list[str]) -> None:
    g = build_grammar(get_family("qwen2.5"), one_tool(params), "required")
    for name, accepts in engines(g).items():
        for args in good:
            assert matches(g, call(args)) and accepts(call(args)), f"{name} should accept {args}"
        for args in bad:
            assert not accepts(call(args)), f"{name} should reject {args}"


@pytest.mark.parametrize("family", ["qwen2.5", "chatml", "llama3", "mistral", "gemma"])
@pytest.mark.parametrize("choice", ["auto", "required", "none", "get_customer"])
def test_engines_agree_on_every_family_and_choice(family: str, choice: str) -> None:
    fam = get_family(family)
    g = build_grammar(fam, [CUSTOMER, *one_tool({"type": "object", "properties": {}})], choice)
    body = '{"name": "get_customer", "' + fam.args_key + '": {"customer_id": "c1"}}'
    texts = [
        {"<tool_call>": f"<tool_call>\n{body}\n</tool_call>", "[TOOL_CALLS]": f"[TOOL_CALLS] [{body}]"}.get(fam.call_start, body),
        "The plan is pro.",
        f"Let me call {fam.call_start} now",
        f"Almost {fam.call_start[:-1]} but not quite\nand a second line",
        "",
        " leading space",
        "`code` first",
        '{"name": "Ada", "plan": "pro"}',
        '{\n  "name": "get_customer", "arguments": {}}',
        "{ x }",
        body[:-1],
        body[:20] + " and then prose",
    ]
    for name, accepts in engines(g).items():
        for text in texts:
            assert accepts(text) == matches(g, text), f"{name} disagrees with the grammar on {text!r}"


def test_lark_and_regex_snapshots() -> None:
    import dataclasses

    lists = ("call-tagged", "call-fenced", "call-bare", "list-fenced", "list-bare")
    g = build_grammar(dataclasses.replace(get_family("qwen2.5"), layout="natural", call_forms=lists), [CUSTOMER],
                      "required", parallel_tool_calls=False)
    # Free text is one llguidance terminal: & (and) and ~ (not) over regexes.
    singles = dataclasses.replace(get_family("qwen2.5"), call_forms=("call-tagged", "call-fenced", "call-bare"),
                                  layout="compact")
    assert build_grammar(singles, [CUSTOMER], "auto").to_lark().endswith(
        "TEXT_1: /(?s:.+)/ & ~/[\\x{0}-\\x{20}\\x{60}](?s:.*)/ & "
        # Nor the stop strings: an engine reading an end-of-turn token as its text could end it at once.
        "~/(?s:.*)(?:\\x{3C}tool\\x{5F}call\\x{3E}|\\x{3C}\\x{7C}endoftext\\x{7C}\\x{3E}|"
        "\\x{3C}\\x{7C}im\\x{5F}end\\x{7C}\\x{3E}|\\x{60}\\x{60}\\x{60}json\\x{A}\\x{7B})(?s:.*)/ & "
        "~/(?:\\x{7B}\\x{22}name\\x{22}\\x{3A}\\x{20}\\x{22}get\\x{5F}customer|\\x{7B}\\x{20}|\\x{7B}\\x{A}|\\x{7B}\\x{9}|"
        "\\x{7B}\\x{D})(?s:.*)/ & "
        # Nor a call object's opening, whatever the name in it.
        "~/\\x{7B}[\\x{20}\\x{9}\\x{A}\\x{D}]*\\x{22}name\\x{22}[\\x{20}\\x{9}\\x{A}\\x{D}]*\\x{3A}[\\x{20}\\x{9}\\x{A}\\x{D}]*"
        "\\x{22}(?:[^\\x{22}\\x{5C}]|\\x{5C}(?s:.))*\\x{22}[\\x{20}\\x{9}\\x{A}\\x{D}]*\\x{2C}[\\x{20}\\x{9}\\x{A}\\x{D}]*"
        "\\x{22}(?:arguments\\x{22}|parameters\\x{22})(?s:.*)/\n"
    )
    assert g.to_lark() == (
        "start: r_root\n"
        "r_root: r_calls\n"
        "r_calls: r_call r_calls_close | r_list_fenced r_calls_close | r_list_bare r_calls_close\n"
        'r_call: "<tool_call>\\n" r_tool_call "\\n</tool_call>" | "```json\\n" r_tool_call "\\n```" | r_tool_call\n'
        'r_calls_close: ("\\n")?\n'
        # One call allowed: a list holds one.
        'r_list_fenced: "```json\\n[" r_ws_in r_tool_call r_ws_in "]\\n```"\n'
        'r_list_bare: "[" r_ws_in r_tool_call r_ws_in "]"\n'
        "r_tool_call: r_call_get_customer\n"
        'r_ws_in: ("\\n" (/[\\x{20}\\x{9}]/){0,20})?\n'
        # The family's natural layout: a newline and indentation may follow "{" and ",", and precede "}".
        'r_call_get_customer: "{" r_ws_in "\\"name\\": \\"get_customer\\"," r_ws_sep "\\"arguments\\": " '
        'r_get_customer_args r_ws_in "}"\n'
        'r_ws_sep: " " | "\\n" (/[\\x{20}\\x{9}]/){0,20}\n'
        'r_get_customer_args: "{" r_ws_in "\\"customer_id\\": " r_get_customer_args_customer_id r_ws_in "}"\n'
        "r_get_customer_args_customer_id: r_json_string\n"
        'r_json_string: "\\"" (r_json_char)* "\\""\n'
        'r_json_char: /[^\\x{22}\\x{5C}\\x{0}-\\x{1F}]/ | "\\\\" (/[\\x{22}\\x{5C}\\x{2F}bfnrt]/ | "u" (/[0-9a-cA-Ce-fE-F]/ '
        '(/[0-9a-fA-F]/){3,3} | /[dD]/ /[0-7]/ (/[0-9a-fA-F]/){2,2} | /[dD]/ /[89abAB]/ (/[0-9a-fA-F]/){2,2} "\\\\u" /[dD]/ '
        '/[c-fC-F]/ (/[0-9a-fA-F]/){2,2}))\n'
    )
    g = build_grammar(get_family("llama3"), one_tool({"type": "object", "properties": {"n": {"enum": [1, 2]}}}), "required",
                      parallel_tool_calls=False)
    assert g.to_regex() == (
        r"(?:(?:(?:(?:(?:\x{7B}\x{22}name\x{22}\x{3A}\x{20}\x{22}f\x{22}\x{2C}\x{20}\x{22}parameters\x{22}\x{3A}\x{20}"
        r"(?:\x{7B}(?:(?:\x{22}n\x{22}\x{3A}\x{20}(?:(?:1|1\x{2E}0|2|2\x{2E}0)))?)\x{7D})\x{7D})))(?:(?:\x{A})?)))"
    )


def test_recursive_grammar_is_not_regular() -> None:
    g = build_grammar(get_family("qwen2.5"), one_tool({"type": "object", "properties": {"d": {"type": "object"}}}), "required")
    with pytest.raises(GrammarNotRegular, match="json-value"):
        g.to_regex()


def test_calls_after_a_preamble_per_engine() -> None:
    """GBNF engines and the regex take text, then a tagged or fenced call; llguidance's greedy
    lexer cannot end free text before a call, so its rendering admits text or calls, not both."""
    g = build_grammar(get_family("qwen2.5"), [CUSTOMER], "auto")
    body = '{"name": "get_customer", "arguments": {"customer_id": "c1"}}'
    both = [f"Let me check.\n```json\n{body}\n```", f"Checking. <tool_call>\n{body}\n</tool_call>"]
    alone = ["Let me check.", f"```json\n{body}\n```"]
    for name, accepts in engines(g).items():
        assert all(accepts(t) for t in alone), name
        assert all(accepts(t) for t in both) == (name != "llguidance"), name
        assert not accepts('Here:\n```json\n{"plan": "pro"}\n```'), name


def test_engines_agree_on_text_through_a_marker() -> None:
    # Reasoning up to its end tag, then an answer: the end tag's prefixes inside the reasoning,
    # and a second end tag, are where a wrong reading would show.
    g = Grammar({"root": seq(Lit("<think>"), Until("</think>"), Repeat(Lit("\n"), 0, 2), alt(Lit("ok"), Lit("<a>")))})
    texts = ["<think>x</think>\n\nok", "<think></think>ok", "<think>a </thin </think>\n<a>", "<think>a</think>b</think>ok",
             "<think>a</think>\n\n\nok", "<think>never closed", "<think><</think>ok", "<think>日本</think><a>"]
    for name, accepts in engines(g).items():
        for text in texts:
            assert accepts(text) == matches(g, text), f"{name} disagrees with the grammar on {text!r}"
    assert [matches(g, t) for t in texts] == [True, True, True, False, False, False, True, True]


@pytest.mark.parametrize("mode", ["may", "must", "open"])
def test_engines_agree_on_reasoning_then_the_answer(mode: str) -> None:
    # GBNF engines start at the rule named "root": the reasoning must be part of it.
    from localtools.families._reply import reply_format

    fmt = reply_format(get_family("qwen3"), [CUSTOMER], "auto", reasoning=mode)
    assert fmt.grammar is not None and fmt.grammar.to_gbnf().startswith("root ::= ")
    call = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "c1"}}\n</tool_call>'
    opening = "" if mode == "open" else "<think>"
    texts = [f"{opening}I should look.</think>\n\n{call}", f"{opening}x</think>\n\nThe plan is pro.", call,
             "The plan is pro.", f"{opening}x</think>\n\n\n\n\nnope", f"{opening}a <tool_call> draft</think>{call}",
             f"{opening}unfinished", f"{opening}x</think>\n\nThe plan <think> is pro."]
    for name, accepts in engines(fmt.grammar).items():
        for text in texts:
            assert accepts(text) == matches(fmt.grammar, text), f"{name} disagrees with the grammar on {text!r}"
    assert matches(fmt.grammar, texts[0]) and not matches(fmt.grammar, texts[6])


def xgrammar_accepts_prefix(compiled: object, text: str) -> bool:
    matcher = xgr.GrammarMatcher(compiled)
    return all(matcher.accept_token(b) for b in text.encode())


@pytest.mark.parametrize("family", ["qwen2.5", "llama3", "mistral-tekken", "qwen3.5", "lfm2", "gemma4", "functionary"])
@pytest.mark.parametrize("choice", ["auto", "required"])
def test_prefix_matching_agrees_with_xgrammar(family: str, choice: str) -> None:
    """What the engine backends' reply check accepts as a cut reply is what an engine decoding
    under the same GBNF could have written so far: every prefix of strings from the grammar, and
    those strings with a character slipped in."""
    import random

    from sampler import sample

    g = build_grammar(get_family(family), [CUSTOMER, *one_tool({"type": "object", "properties": {
        "n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}})], choice)
    compiled = _XGR_COMPILER.compile_grammar(g.to_gbnf())
    rng = random.Random(f"{family}/{choice}")
    checked = rejected = 0
    for _ in range(12):
        text = sample(g, rng)
        for cut in sorted({rng.randrange(len(text) + 1) for _ in range(6)} | {len(text)}):
            variants = [text[:cut]]
            if cut:
                at = rng.randrange(cut)
                variants.append(text[:at] + rng.choice('x{"<\n ]') + text[at:cut])
            for candidate in variants:
                ours = matches(g, candidate, prefix=True)
                assert ours == xgrammar_accepts_prefix(compiled, candidate), (family, choice, candidate)
                checked += 1
                rejected += not ours
    assert rejected > 0 and checked - rejected > 0  # both answers were exercised
