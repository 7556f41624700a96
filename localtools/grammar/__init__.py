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
"""

from .._errors import GrammarNotRegular, UnsupportedSchema
from ._admits import KeywordEnforcement, admits, schema_report, unsupported
from ._build import MAX_PARALLEL_CALLS, CallShape, build_grammar, call_openings, call_shape
from ._expr import Alt, Any_, Chars, Expr, Grammar, Lit, Ref, Repeat, Seq, Text, Until, alt, rewrite, seq
from ._gbnf import parse_gbnf
from ._match import continuation, matches
from ._schema import LAYOUTS, Enforcement, SchemaGrammar, layout_whitespace

__all__ = [
    "LAYOUTS",
    "MAX_PARALLEL_CALLS",
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
    "SchemaGrammar",
    "Seq",
    "Text",
    "UnsupportedSchema",
    "Until",
    "admits",
    "alt",
    "build_grammar",
    "call_openings",
    "call_shape",
    "continuation",
    "layout_whitespace",
    "matches",
    "parse_gbnf",
    "rewrite",
    "schema_report",
    "seq",
    "unsupported",
]
