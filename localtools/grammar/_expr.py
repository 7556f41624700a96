"""The grammar objects: expressions (``_nodes``), and ``Grammar``, named rules from a root.

Family grammar files (``grammars/*.gbnf``) and the rules built from tool schemas both become
``Grammar`` objects; each mask engine gets its rendering of the same object (``_render``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ._nodes import Alt, Any_, Chars, Expr, Lit, Ref, Repeat, Seq, Text, Until, _has_text, _refs, alt, rewrite, seq
from ._render import to_gbnf, to_lark, to_regex
from ._text import expand_text, expand_until

__all__ = ["Alt", "Any_", "Chars", "Expr", "Grammar", "Lit", "Ref", "Repeat", "Seq", "Text", "Until", "alt", "rewrite",
           "seq"]


@dataclass
class Grammar:
    """Named rules; ``root`` is where matching starts."""

    rules: dict[str, Expr] = field(default_factory=dict)
    root: str = "root"
    #: Names ``unique_name`` never gives: rules added later under fixed names.
    reserved: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    #: The last GBNF rendering and the rules it was made from (``to_gbnf``).
    _gbnf: tuple[str, tuple[tuple[str, Expr], ...], str] | None = field(default=None, init=False, compare=False,
                                                                          repr=False)

    def add(self, name: str, expr: Expr) -> Ref:
        self.rules[name] = expr
        return Ref(name)

    def unique_name(self, base: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", base).strip("-").lower() or "r"
        name, i = base, 1
        while name in self.rules or name in self.reserved:
            i += 1
            name = f"{base}-{i}"
        return name

    def reachable(self) -> list[str]:
        """Rule names reachable from the root, in first-visit order."""
        seen: list[str] = []
        stack = [self.root]
        while stack:
            name = stack.pop(0)
            if name in seen:
                continue
            if name not in self.rules:
                raise KeyError(f"grammar rule {name!r} is referenced but not defined")
            seen.append(name)
            stack.extend(_refs(self.rules[name]))
        return seen

    def with_rules(self, rules: dict[str, Expr]) -> Grammar:
        """A grammar of ``rules`` from the same root."""
        return Grammar(rules, self.root)

    def lowered(self) -> Grammar:
        """This grammar with every ``Text`` and ``Until`` node spelled out as plain rules."""
        if not any(_has_text(e) for e in self.rules.values()):
            return self
        g = Grammar(dict(self.rules), self.root)
        expansions: dict[Text | Until, Expr] = {}

        def lower(e: Expr) -> Expr | None:
            if isinstance(e, (Text, Until)):
                if e not in expansions:
                    expansions[e] = expand_text(g, e) if isinstance(e, Text) else expand_until(g, e)
                return expansions[e]
            return None

        for name in list(self.rules):
            g.rules[name] = rewrite(self.rules[name], lower)
        return g

    def literals(self) -> frozenset[str]:
        """Every string the grammar writes as it is, from its reachable rules: the ``Lit`` texts
        and the ``Until`` markers (a call's opening tag, a reasoning's end tag)."""
        found: set[str] = set()

        def walk(e: Expr) -> None:
            if isinstance(e, Lit):
                found.add(e.text)
            elif isinstance(e, Until):
                found.add(e.marker)
            elif isinstance(e, Seq):
                for item in e.items:
                    walk(item)
            elif isinstance(e, Alt):
                for option in e.options:
                    walk(option)
            elif isinstance(e, Repeat):
                walk(e.item)

        for name in self.reachable():
            walk(self.rules[name])
        return frozenset(found)

    def to_gbnf(self) -> str:
        """llama.cpp's GBNF, reachable rules only, root first."""
        # Every generation under a grammar hands llama.cpp its GBNF, and a turn generates several
        # times under one (a reply, its further calls, a refusal's answer): rendered once while
        # its rules stay the same objects (expressions are immutable; rules can be added).
        rules = tuple(self.rules.items())
        last = self._gbnf
        if last is None or last[0] != self.root or len(last[1]) != len(rules) or \
                any(a != b or x is not y for (a, x), (b, y) in zip(last[1], rules, strict=True)):
            last = self._gbnf = (self.root, rules, to_gbnf(self))
        return last[2]

    def to_lark(self) -> str:
        """Lark as llguidance reads it: ``start`` first, rule names made Lark-safe.

        llguidance lexes greedily: a free-text terminal never ends while the next character could
        extend it, so nothing can follow one. Whatever a grammar lets follow text (calls after a
        preamble) is left out here; the language is the same otherwise, and a subset of the GBNF's.
        """
        return to_lark(self)

    def to_regex(self) -> str:
        """One regular expression (Rust ``regex`` syntax) for the whole language.

        Raises ``GrammarNotRegular`` when a rule refers to itself (free-form JSON values, recursive
        ``$ref`` schemas): those need a CFG engine.
        """
        return to_regex(self)
