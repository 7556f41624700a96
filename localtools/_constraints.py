"""The grammar of a valid reply: a family's call syntax around the tools' argument schemas."""

from __future__ import annotations

import json
from typing import Any

from ._errors import LocalToolsError, TemplateError
from ._families import Family
from ._grammar import Alt as _Alt
from ._grammar import Chars, Expr, Grammar, Lit, Ref, Repeat, Seq, alt, parse_gbnf, seq
from ._schema_grammar import SchemaGrammar, UnsupportedSchema

__all__ = ["build_grammar", "plain_text", "text_without"]

_NAME, _ARGS = "\ue010name", "\ue010args"
#: Most calls in one reply. Small models otherwise repeat the same call until max_tokens.
MAX_PARALLEL_CALLS = 5


def _substitute(e: Expr, mapping: dict[str, Expr]) -> Expr:
    if isinstance(e, Ref):
        return mapping.get(e.name, e)
    if isinstance(e, Seq):
        return seq(*(_substitute(i, mapping) for i in e.items))
    if isinstance(e, _Alt):
        return alt(*(_substitute(i, mapping) for i in e.options))
    if isinstance(e, Repeat):
        return Repeat(_substitute(e.item, mapping), e.min, e.max)
    return e


def _class_escape(chars: str) -> str:
    return "".join("\\" + c if c in "]\\^-[" else c for c in chars)


def text_without(g: Grammar, marker: str) -> Ref:
    """Rules for any text that does not contain ``marker`` (a KMP automaton, one rule per state)."""
    m = len(marker)
    fail = [0] * (m + 1)
    for i in range(1, m):
        k = fail[i]
        while k and marker[i] != marker[k]:
            k = fail[k]
        fail[i + 1] = k + 1 if marker[i] == marker[k] else 0

    def step(state: int, ch: str) -> int:
        while state and marker[state] != ch:
            state = fail[state]
        return state + 1 if marker[state] == ch else 0

    alphabet = sorted(set(marker))
    names = [f"text-{i}" for i in range(m)]
    for state in range(m):
        # Characters that lead back to state 0 share one negated class; the rest are spelled out.
        special = [ch for ch in alphabet if step(state, ch) != 0]
        options: list[Expr] = [seq(Chars("^" + _class_escape("".join(special))), Ref(names[0]))]
        for ch in special:
            nxt = step(state, ch)
            if nxt < m:
                options.append(seq(Lit(ch), Ref(names[nxt])))
        g.add(names[state], Repeat(alt(*options), 0, 1))
    return Ref(names[0])


def plain_text(g: Grammar, marker: str, avoid: list[str] | tuple[str, ...] = ()) -> Expr:
    """A non-empty text answer that can never be mistaken for a call.

    It never contains ``marker``, does not open with whitespace or a code fence, and does not
    open with any string in ``avoid`` (the opening of a bare JSON call to a known tool, such as
    ``{"name": "get_customer"``). Other text that opens with "{" (a model echoing a JSON tool
    result, say) stays text.
    """
    rest = text_without(g, marker)
    after_first = Ref(rest.name)
    openers = sorted({a[0] for a in avoid})
    first: list[Expr] = [seq(Chars("^" + _class_escape("".join(openers) + "`" + marker[:1]) + "\\x00-\\x20"), after_first)]
    if marker[:1] and marker[0] not in "`" and marker[0] not in openers:
        first.append(seq(Lit(marker[0]), Ref("text-1") if len(marker) > 1 else Lit("")))
    # A trie over the openings to avoid: leaving it early is free text; completing one is impossible.
    nodes: dict[str, Ref] = {}

    def node(prefix: str) -> Expr:
        if prefix in nodes:
            return nodes[prefix]
        ref = g.add(g.unique_name("text-open"), Lit(""))
        nodes[prefix] = ref
        children = sorted({a[len(prefix)] for a in avoid if a.startswith(prefix) and len(a) > len(prefix)})
        options: list[Expr] = [seq(Chars("^" + _class_escape("".join(children) + marker[:1])), after_first)]
        if marker[:1] and marker[0] not in children:
            options.append(seq(Lit(marker[0]), Ref("text-1") if len(marker) > 1 else Lit("")))
        for ch in children:
            if prefix + ch not in avoid:
                options.append(seq(Lit(ch), node(prefix + ch)))
        g.rules[ref.name] = Repeat(alt(*options), 0, 1)
        return ref

    for ch in openers:
        if ch not in avoid:
            first.append(seq(Lit(ch), node(ch)))
    return alt(*first)


def build_grammar(
    family: Family,
    tools: list[dict[str, Any]],
    tool_choice: str = "auto",
    parallel_tool_calls: bool = True,
    max_parallel_calls: int = MAX_PARALLEL_CALLS,
) -> Grammar:
    """The grammar of a reply under ``tool_choice`` ("auto", "required", "none" or a tool name).

    ``tools`` are OpenAI-style specs. Under "auto" the reply is either plain text (which never
    contains the family's call marker) or calls; once a call starts, it is fully constrained.
    """
    g = Grammar()
    if tool_choice not in ("auto", "required", "none"):
        chosen = [t for t in tools if t["function"]["name"] == tool_choice]
        if not chosen:
            names = ", ".join(t["function"]["name"] for t in tools) or "(none)"
            raise LocalToolsError(f"tool_choice names {tool_choice!r}, which is not among the tools: {names}")
        tools, tool_choice = chosen, "required"
    if tool_choice == "none" or not tools:
        if tool_choice == "required":
            raise LocalToolsError("tool_choice='required' needs at least one tool")
        g.add("root", plain_text(g, family.call_start))
        return g
    try:
        fam = parse_gbnf(family.grammar_source(), placeholders={"NAME": Ref(_NAME), "ARGS": Ref(_ARGS)})
    except ValueError as exc:
        raise TemplateError(f"grammars/{family.grammar}: {exc}") from None
    needed = {"tool-call", "call", "call-sep", "calls-open", "calls-close"}
    if needed - set(fam.rules):
        raise TemplateError(f"grammars/{family.grammar} must define {sorted(needed - set(fam.rules))}")
    schemas = SchemaGrammar(g)
    per_tool: list[Expr] = []
    for spec in tools:
        fn = spec["function"]
        try:
            args = schemas.rule(fn.get("parameters") or {"type": "object", "properties": {}}, f"{fn['name']}-args")
        except UnsupportedSchema as exc:
            raise LocalToolsError(f"tool {fn['name']!r}: cannot constrain its parameters: {exc}") from None
        body = _substitute(fam.rules["tool-call"], {_NAME: Lit(json.dumps(fn["name"])), _ARGS: args})
        per_tool.append(g.add(g.unique_name(f"call-{fn['name']}"), body))
    g.add("tool-call", alt(*per_tool))
    for name in ("call", "call-sep", "calls-open", "calls-close"):
        g.add(name, fam.rules[name])
    parallel = parallel_tool_calls and family.parallel and max_parallel_calls > 1
    more = Repeat(seq(Ref("call-sep"), Ref("call")), 0, max_parallel_calls - 1) if parallel else Lit("")
    calls = g.add("calls", seq(Ref("calls-open"), Ref("call"), more, Ref("calls-close")))
    if tool_choice == "required":
        g.add("root", calls)
    else:
        opening = _literal_before(fam.rules["tool-call"], _NAME)
        avoid = [opening + json.dumps(t["function"]["name"]) for t in tools] if opening else []
        g.add("root", alt(calls, plain_text(g, family.call_start, avoid)))
    # Rules that render as "" (calls-open for Hermes, say) are inlined away for readability.
    _inline_empty(g)
    return g


def _literal_before(e: Expr, placeholder: str) -> str:
    """The literal text of ``e`` before the ``placeholder`` reference ("" if not a plain prefix)."""
    items = e.items if isinstance(e, Seq) else (e,)
    text = ""
    for item in items:
        if isinstance(item, Lit):
            text += item.text
        elif isinstance(item, Ref) and item.name == placeholder:
            return text
        else:
            return ""
    return ""


def _inline_empty(g: Grammar) -> None:
    empty = {n for n, e in g.rules.items() if e == Lit("")}
    if not empty:
        return
    mapping: dict[str, Expr] = {n: Lit("") for n in empty}
    for name in list(g.rules):
        if name in empty:
            del g.rules[name]
        else:
            g.rules[name] = _substitute(g.rules[name], mapping)
