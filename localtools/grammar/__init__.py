"""Grammars: the objects, one module per job.

- ``_expr``: expressions and ``Grammar`` (named rules from a root);
- ``_build``: the grammar of a valid reply, from a family record, the tools and tool_choice;
- ``_schema``: the rules for a JSON Schema;
- ``_text``: the text-answer and through-a-marker nodes (as rules, as a Lark terminal, read in one pass);
- ``_render``: GBNF, Lark and regex for the mask engines;
- ``_gbnf``: reading the family grammar files;
- ``_match``: whether a text is in a grammar's language, and what the grammar forces after a prefix;
- ``_regex``, ``_ranges``, ``_formats``: patterns, numeric bounds and string formats as rules;
- ``_admits``: ``admits`` (could the constrained path return these arguments?) and ``schema_report``
  (who enforces each keyword: the grammar, the check after decoding, or nobody).

The entry points below read a schema as draft 2020-12, an older draft's converted first
(``localtools.grammar._drafts``), as the check does.
"""

from typing import Any

from .._errors import GrammarNotRegular, UnsupportedSchema
from . import _admits, _build
from ._admits import KeywordEnforcement
from ._build import MAX_PARALLEL_CALLS, CallShape, call_openings, call_shape
from ._drafts import to_2020_12
from ._expr import Alt, Any_, Chars, Expr, Grammar, Lit, Ref, Repeat, Seq, Text, Until, alt, rewrite, seq
from ._gbnf import parse_gbnf
from ._match import Ahead, Resume, continuation, lookahead, matches
from ._schema import LAYOUTS, MAX_VALUE_DEPTH, Enforcement, SchemaGrammar, build_budget, layout_whitespace

__all__ = [
    "LAYOUTS",
    "MAX_PARALLEL_CALLS",
    "MAX_VALUE_DEPTH",
    "Ahead",
    "Alt",
    "Any_",
    "CallShape",
    "Chars",
    "Enforcement",
    "Expr",
    "Grammar",
    "GrammarNotRegular",
    "KeywordEnforcement",
    "Lit",
    "Ref",
    "Repeat",
    "Resume",
    "SchemaGrammar",
    "Seq",
    "Text",
    "UnsupportedSchema",
    "Until",
    "admits",
    "alt",
    "build_budget",
    "build_grammar",
    "call_openings",
    "call_shape",
    "continuation",
    "layout_whitespace",
    "lookahead",
    "matches",
    "parse_gbnf",
    "rewrite",
    "schema_report",
    "seq",
    "unsupported",
]


def _tool_2020_12(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or "parameters" not in fn:
        return tool
    converted = to_2020_12(fn["parameters"])
    return tool if converted is fn["parameters"] else {**tool, "function": {**fn, "parameters": converted}}


def build_grammar(family: Any, tools: list[dict[str, Any]], tool_choice: str = "auto", parallel_tool_calls: bool = True,
                  max_parallel_calls: int = MAX_PARALLEL_CALLS, answer_schema: Any = None, min_calls: int = 1) -> Grammar:
    """``_build.build_grammar`` with each tool's parameters and the answer's schema read as draft 2020-12."""
    return _build.build_grammar(family, [_tool_2020_12(t) for t in tools], tool_choice, parallel_tool_calls,
                                max_parallel_calls,
                                answer_schema=None if answer_schema is None else to_2020_12(answer_schema),
                                min_calls=min_calls)


def admits(parameters: dict[str, Any], arguments: str, *, check: bool = True) -> bool:
    """``_admits.admits`` with ``parameters`` read as draft 2020-12."""
    return _admits.admits(to_2020_12(parameters), arguments, check=check)


def schema_report(parameters: dict[str, Any]) -> list[KeywordEnforcement]:
    """``_admits.schema_report`` of ``parameters`` read as draft 2020-12 (paths into the converted schema)."""
    return _admits.schema_report(to_2020_12(parameters))


def unsupported(parameters: dict[str, Any]) -> list[KeywordEnforcement]:
    """``_admits.unsupported`` of ``parameters`` read as draft 2020-12."""
    try:
        converted = to_2020_12(parameters)
    except UnsupportedSchema as exc:
        return [KeywordEnforcement(exc.path, exc.keyword or "(schema)", Enforcement.UNSUPPORTED)]
    return _admits.unsupported(converted)
