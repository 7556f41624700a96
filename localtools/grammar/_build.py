"""The grammar of a valid reply: a family's call syntax around the tools' argument schemas."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .._errors import TemplateError, UnsupportedSchema, UsageError
from .._types import CallStyle, Family
from ._expr import Alt, Chars, Expr, Grammar, Lit, Ref, Repeat, Seq, Text, _refs, alt, rewrite, seq
from ._gbnf import parse_gbnf
from ._schema import SchemaGrammar, layout_whitespace
from ._syntax import args_rule

__all__ = ["CallShape", "build_grammar", "call_openings", "call_shape"]

_NAME, _ARGS, _WS_IN, _WS_SEP, _CALLS = "\ue010name", "\ue010args", "\ue010ws-in", "\ue010ws-sep", "\ue010calls"
_NAME_RAW, _ID = "\ue010name-raw", "\ue010id"
#: How a model writes a call id, by the family's ``id`` style.
_IDS: dict[str, Expr] = {"alnum9": Repeat(Chars("a-zA-Z0-9"), 9, 9),
                         "call": seq(Lit("call_"), Repeat(Chars("a-zA-Z0-9"), 1, 40))}
#: Most calls in one reply. Small models otherwise repeat the same call until max_tokens.
MAX_PARALLEL_CALLS = 5


def _substitute(e: Expr, mapping: dict[str, Expr]) -> Expr:
    return rewrite(e, lambda x: mapping.get(x.name) if isinstance(x, Ref) else None)


def build_grammar(
    family: Family,
    tools: list[dict[str, Any]],
    tool_choice: str = "auto",
    parallel_tool_calls: bool = True,
    max_parallel_calls: int = MAX_PARALLEL_CALLS,
    answer_schema: Any = None,
    min_calls: int = 1,
) -> Grammar:
    """The grammar of a reply under ``tool_choice`` ("auto", "required", "none" or a tool name).

    ``tools`` are OpenAI-style specs. Under "auto" the reply is either plain text (which never
    contains the family's call marker) or calls; once a call starts, it is fully constrained.
    ``answer_schema`` (a JSON schema; structured output): the answer that is no call is a JSON
    value under it, built as a call's arguments are. ``min_calls``: a reply with calls holds at
    least that many (more than one needs parallel calls).
    """
    if not 1 <= min_calls <= max(max_parallel_calls, 1):
        raise UsageError(f"min_calls must be from 1 to max_parallel_calls ({max_parallel_calls}), got {min_calls}")
    # Rules added under fixed names once the tools' rules exist: no tool's rule may take one.
    g = Grammar(reserved=frozenset({"root", "text", "calls", "call", "marked-call", "list-sep",
                                    *_family_grammar(family).rules}))
    schemas: SchemaGrammar | None = None
    if answer_schema is not None:
        schemas = _schema_grammar(g, family)
        answer = _json_answer(family, schemas, answer_schema)
    if tool_choice not in ("auto", "required", "none"):
        chosen = [t for t in tools if t["function"]["name"] == tool_choice]
        if not chosen:
            names = ", ".join(t["function"]["name"] for t in tools) or "(none)"
            raise UsageError(f"tool_choice names {tool_choice!r}, which is not among the tools: {names}")
        tools, tool_choice = chosen, "required"
    if tool_choice == "none" or not tools:
        if tool_choice == "required":
            raise UsageError("tool_choice='required' needs at least one tool")
        # No call may follow, and none may hide in the answer either: the text opens like no call
        # to an offered tool and holds no call form's opening.
        g.add("root", answer if answer_schema is not None else _text(family, tools))
        return g
    fam = _family_grammar(family)
    schemas = schemas or _schema_grammar(g, family)
    ws_in, ws_sep = layout_whitespace(g, family.layout)
    per_tool: list[Expr] = []
    for spec in tools:
        fn = spec["function"]
        try:
            args = args_rule(family.args_syntax, schemas, fn.get("parameters"), f"{fn['name']}-args",
                             family.arg_tags, family.arg_values)
        except UnsupportedSchema as exc:
            raise UnsupportedSchema(f"tool {fn['name']!r}: cannot constrain its parameters: {exc}",
                                    keyword=exc.keyword, path=exc.path) from None
        body = _substitute(fam.rules["tool-call"], {_NAME: Lit(json.dumps(fn["name"])), _NAME_RAW: Lit(fn["name"]),
                                                    _ARGS: args, _ID: _IDS.get(family.id, _IDS["call"]),
                                                    _WS_IN: ws_in, _WS_SEP: ws_sep})
        per_tool.append(g.add(g.unique_name(f"call-{fn['name']}"), body))
    g.add("tool-call", alt(*per_tool))
    parallel = parallel_tool_calls and family.parallel and max_parallel_calls > 1
    if min_calls > 1 and not parallel:
        raise UsageError(f"min_calls={min_calls} needs parallel calls (parallel_tool_calls, and a family that writes "
                         "them)")
    singles, lists = _forms(family, fam)
    for name in ("call-sep", "calls-open", "calls-close"):
        g.add(name, fam.rules[name])
    more = Repeat(seq(Ref("call-sep"), Ref("call")), min_calls - 1, max_parallel_calls - 1) if parallel else Lit("")
    items: Expr = Ref("tool-call")
    if lists and parallel:
        g.add("list-sep", _with_layout(fam.rules["list-sep"], ws_in, ws_sep))
        items = seq(items, Repeat(seq(Ref("list-sep"), Ref("tool-call")), min_calls - 1, max_parallel_calls - 1))
    if singles:
        g.add("call", alt(*(_with_layout(fam.rules[r], ws_in, ws_sep) for r in singles)))
    for r in lists:
        g.add(r, _substitute(_with_layout(fam.rules[r], ws_in, ws_sep), {_CALLS: items}))

    def shapes(forms: list[str], call: str) -> list[Expr]:
        return [seq(Ref("calls-open"), Ref(call), more, Ref("calls-close"))] if forms else []

    marked = _marked_forms(family, fam)
    calls = g.add("calls", alt(*shapes(singles, "call"), *(seq(Ref(r), Ref("calls-close")) for r in lists)))
    if tool_choice == "required":
        g.add("root", calls)
    elif answer_schema is not None:
        # A JSON answer or calls: nothing follows the answer (it is one JSON value).
        g.add("root", alt(calls, g.add("text", answer)))
    else:
        text = g.add("text", _text(family, tools, calls=True))
        after: list[Expr] = []
        marked_singles = [r for r in singles if r in marked]
        if marked_singles:
            g.add("marked-call", alt(*(_with_layout(fam.rules[r], ws_in, ws_sep) for r in marked_singles)))
            after += shapes(marked_singles, "marked-call")
        after += [seq(Ref(r), Ref("calls-close")) for r in lists if r in marked]
        if after:
            # Text, then calls in a form whose opening text never holds (a tag, a fence): what
            # models write after a sentence of preamble is a call, constrained like any other.
            g.add("root", alt(calls, seq(text, Repeat(alt(*after), 0, 1))))
        else:
            g.add("root", alt(calls, text))
    # Rules that render as "" (calls-open for Hermes, say) are inlined away for readability.
    _inline_empty(g)
    return g


def _schema_grammar(g: Grammar, family: Family) -> SchemaGrammar:
    try:
        return SchemaGrammar(g, family.layout)
    except ValueError as exc:
        raise TemplateError(f"family {family.name!r}: {exc}") from None


def _json_answer(family: Family, schemas: SchemaGrammar, schema: Any) -> Expr:
    """A structured answer: a JSON value under ``schema``, after the family's text opening."""
    try:
        schemas.document(schema)
        value = schemas.rule(schemas.resolve(schema, "answer"), "answer")
    except UnsupportedSchema as exc:
        raise UnsupportedSchema(f"the answer's schema: cannot constrain it: {exc}", keyword=exc.keyword,
                                path=exc.path) from None
    opening = _family_grammar(family).rules.get("text-open")
    return seq(opening, value) if opening is not None else value


def _text(family: Family, tools: list[dict[str, Any]], *, calls: bool = False) -> Expr:
    """A text answer, after the family's ``text-open`` rule if it has one (functionary's "all\n");
    where ``calls`` may be made instead, one that never opens like a call object."""
    answer = Text(_markers(family), _text_avoid(family, tools), disguise=calls)
    opening = _family_grammar(family).rules.get("text-open")
    return seq(opening, answer) if opening is not None else answer


@lru_cache(maxsize=32)
def _markers(family: Family) -> tuple[str, ...]:
    """What text never holds: the call marker, the openings of the marked call forms, the
    reasoning tags (reasoning goes only where the grammar puts it, before the answer) and the stop
    strings. A mask engine that reads an end-of-turn token as its text ("<|im_end|>", which xgrammar
    does) would otherwise let a text answer end before its first character."""
    openings = {family.call_start, *_marked_forms(family, _family_grammar(family)).values(),
                *(t for t in (family.reasoning_start, family.reasoning_end) if t), *family.stop}
    # An opening that holds another (the tag and a newline after it) is found by that one.
    return tuple(sorted(m for m in openings if not any(o != m and o in m for o in openings)))


def _marked_forms(family: Family, fam: Grammar) -> dict[str, str]:
    """The forms whose opening can be told apart inside text (a tag, a fence, a marker; not a bare
    JSON object or list), each with that opening, e.g. ``{"call-fenced": "```json\\n{"}``."""
    singles, lists = _forms(family, fam)
    out: dict[str, str] = {}
    for r in (*singles, *lists):
        opening = _literal_opening(seq(fam.rules["calls-open"], fam.rules[r]) if r in singles else fam.rules[r], fam)
        if opening.lstrip("[").lstrip()[:1] not in ("", "{"):
            out[r] = opening
    return out


def _literal_opening(e: Expr, fam: Grammar) -> str:
    """The literal text every match of ``e`` opens with, following rule references of ``fam``."""
    items = e.items if isinstance(e, Seq) else (e,)
    text = ""
    for item in items:
        if isinstance(item, Ref) and item.name in fam.rules:
            item = fam.rules[item.name]
            inner = _literal_opening(item, fam)
            text += inner
            if not isinstance(item, Lit):
                return text
        elif isinstance(item, Lit):
            text += item.text
        else:
            return text
    return text


def _with_layout(e: Expr, ws_in: Expr, ws_sep: Expr) -> Expr:
    return _substitute(e, {_WS_IN: ws_in, _WS_SEP: ws_sep})


@lru_cache(maxsize=32)
def _family_grammar(family: Family) -> Grammar:
    try:
        fam = parse_gbnf(family.grammar_source(), placeholders={"NAME": Ref(_NAME), "NAME-RAW": Ref(_NAME_RAW),
                                                                "ID": Ref(_ID), "ARGS": Ref(_ARGS),
                                                                "WS-IN": Ref(_WS_IN), "WS-SEP": Ref(_WS_SEP),
                                                                "CALLS": Ref(_CALLS)})
    except ValueError as exc:
        raise TemplateError(f"grammars/{family.grammar}: {exc}") from None
    needed = {"tool-call", "call-sep", "calls-open", "calls-close"} | (set() if family.call_forms else {"call"})
    if needed - set(fam.rules):
        raise TemplateError(f"grammars/{family.grammar} must define {sorted(needed - set(fam.rules))}")
    if family.call_style is not CallStyle.PATTERN:
        # Only the pattern parser reads a bare name or a text opening (an ID inside JSON is read
        # from the call object).
        used = any(_NAME_RAW in _refs(e) for e in fam.rules.values())
        if used or "text-open" in fam.rules:
            raise TemplateError(f"grammars/{family.grammar} uses NAME-RAW or text-open, which need the family's "
                                "call_style to be 'pattern'")
    _forms(family, fam)
    return fam


def _forms(family: Family, fam: Grammar) -> tuple[list[str], list[str]]:
    """The rule names of the family's single-call forms and list forms (see ``Family.call_forms``)."""
    if not family.call_forms:
        return ["call"], []
    singles = [f for f in family.call_forms if f.startswith("call-") and f in fam.rules]
    lists = [f for f in family.call_forms if f.startswith("list-") and f in fam.rules]
    unknown = [f for f in family.call_forms if f not in singles and f not in lists]
    if unknown:
        raise TemplateError(f"family {family.name!r}: call_forms {unknown} are not call-* or list-* rules "
                            f"of grammars/{family.grammar}")
    if lists and "list-sep" not in fam.rules:
        raise TemplateError(f"grammars/{family.grammar} must define list-sep for the list forms {lists}")
    return singles, lists


def call_openings(family: Family, tools: list[dict[str, Any]]) -> tuple[str, ...]:
    """How a bare call to each tool opens under the family's grammar, e.g. ``{"name": "get_customer"``.

    Text under tool_choice "auto" never opens so; other text that opens with "{" stays text.
    """
    opening = _literal_before(_family_grammar(family).rules["tool-call"], _NAME)
    return tuple(opening + json.dumps(t["function"]["name"]) for t in tools) if opening else ()


def _text_avoid(family: Family, tools: list[dict[str, Any]]) -> tuple[str, ...]:
    """How a text answer under "auto" may not open: like a bare call to a given tool, or, when bare
    calls are JSON objects, "{" and whitespace; like a list form of calls ("[{", say).

    Small models pretty-print calls ('{\n  "name": "lawsuit_search", ...'); as text that would be
    a call no grammar checked. Barred from the text branch, the model writes the call in the
    grammar's form, where its name and arguments are constrained. Compact JSON that is not
    a call (a model echoing a tool result, '{"name": "Ada", "plan": "pro"}') stays text.
    """
    # Without the name's closing quote: a name that runs on past an offered one
    # ('{"name": "get_customer_plan"') is a call to that tool gone astray, not text.
    openings = tuple(o.removesuffix('"') for o in call_openings(family, tools))
    if any(o.startswith("{") for o in openings):
        openings += tuple("{" + ws for ws in " \n\t\r")
    fam = _family_grammar(family)
    for rule in _forms(family, fam)[1]:
        opening = _literal_before(fam.rules[rule], _CALLS)
        if opening:
            openings += tuple(opening + after for after in ("{", " ", "\n", "\t", "\r"))
    return openings


def _literal_before(e: Expr, placeholder: str) -> str:
    """The literal text of ``e`` before the ``placeholder`` reference ("" if not a plain prefix),
    with the layout's whitespace at its compact spelling."""
    items = e.items if isinstance(e, Seq) else (e,)
    text = ""
    compact = {_WS_IN: "", _WS_SEP: " "}
    for item in items:
        if isinstance(item, Lit):
            text += item.text
        elif isinstance(item, Ref) and item.name in compact:
            text += compact[item.name]
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


@dataclass(frozen=True)
class CallShape:
    """How a "pattern" family's call reads, from its grammar file: the parser's side of the rules."""

    #: Matches a call up to its arguments; groups ``name`` (bare) or ``qname`` (JSON-quoted), and ``id``.
    head: re.Pattern[str]
    #: Matches what follows the arguments.
    tail: re.Pattern[str]
    #: Literals found between and around calls (tags, separators, list brackets), longest first.
    glue: tuple[str, ...]
    #: What opens a text answer ("" for most families; functionary's "all\n").
    text_open: str


@lru_cache(maxsize=32)
def call_shape(family: Family) -> CallShape:
    """The family's ``tool-call`` rule as a head pattern, the arguments, and a tail pattern."""
    fam = _family_grammar(family)
    rule = fam.rules["tool-call"]
    items = rule.items if isinstance(rule, Seq) else (rule,)
    pieces: dict[str, str] = {_NAME_RAW: r"(?P<name>[A-Za-z0-9_.\-]{1,64})", _NAME: r'(?P<qname>"(?:[^"\\]|\\.)*")',
                              _ID: r"(?P<id>[A-Za-z0-9_]+)", _WS_IN: r"\s*", _WS_SEP: r"\s*"}
    head, tail, seen_args, seen_name = "", "", False, False
    for item in items:
        if isinstance(item, Ref) and item.name == _ARGS:
            seen_args = True
            continue
        if isinstance(item, Lit):
            piece = re.escape(item.text)
        elif isinstance(item, Ref) and item.name == _NAME_RAW and seen_name:
            piece = "(?P=name)"  # the name written a second time (a header, then an invoke tag)
        elif isinstance(item, Ref) and item.name in pieces:
            piece = pieces[item.name]
            seen_name = seen_name or item.name == _NAME_RAW
        else:
            raise TemplateError(f"grammars/{family.grammar}: a pattern family's tool-call rule is literals, NAME or "
                                f"NAME-RAW, ID and ARGS in sequence; got {item!r}")
        if seen_args:
            tail += piece
        else:
            head += piece
    if not seen_args:
        raise TemplateError(f"grammars/{family.grammar}: the tool-call rule has no ARGS")
    singles, lists = _forms(family, fam)
    glue: set[str] = set()
    for name in (*singles, *lists, "call-sep", "list-sep", "calls-open", "calls-close"):
        if name in fam.rules:
            glue.update(t.strip() for t in _literals(fam.rules[name]) if t.strip())
    # Stripped: the reader skips whitespace before each piece of glue.
    glue.update(t.strip() for t in (family.call_start, family.call_end) if t.strip())
    text_open = "".join(_literals(fam.rules["text-open"])) if "text-open" in fam.rules else ""
    return CallShape(re.compile(head), re.compile(tail), tuple(sorted(glue, key=len, reverse=True)), text_open)


def _literals(e: Expr) -> list[str]:
    if isinstance(e, Lit):
        return [e.text]
    if isinstance(e, Seq):
        return [t for i in e.items for t in _literals(i)]
    if isinstance(e, Repeat):
        return _literals(e.item)
    if isinstance(e, Alt):
        return [t for o in e.options for t in _literals(o)]
    return []
