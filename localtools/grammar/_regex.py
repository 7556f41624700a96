"""A JSON Schema ``pattern`` (an ECMA-262 regular expression) as grammar rules, and as a Python regex.

One reader (``_Parser``) for both: the grammar's rules and the check's Python regex come from the
same tree, so they cannot read a pattern two ways. ECMA's classes are spelled out as code-point
ranges (``\\d`` is ``[0-9]``, ``\\w`` ASCII, ``\\s`` ECMA's WhiteSpace and LineTerminator, ``.``
anything but a line terminator, ``$`` the end of input), never Python's Unicode-aware ones.

The grammar's side speaks of the decoded string and writes its JSON spelling, so every character
it admits is written the one way ``json.dumps(..., ensure_ascii=False)`` writes it (``\\"``,
``\\\\``, ``\\n``, ``\\u001f``; anything else raw). A model cannot then spell a character the
pattern forbids as an escape. Unanchored patterns mean "contains", as in JSON Schema. It says
literals, escapes, classes, ``.``, groups, alternation, quantifiers (lazy or not: the language is
the same) and ``^``/``$`` at the ends of an alternative; look-around, back-references, word
boundaries and Unicode properties raise ``Untranslatable`` and are left to the check, and so is a
quantifier over ``MAX_COUNT`` or a pattern whose rules would pass ``MAX_SIZE``.

``search`` is every test of a string against a pattern (the grammar's, the check's, an agent's):
a regular pattern runs on a linear-time automaton (``_Matcher``), never a backtracking engine; one
with look-around or back-references (or past ``MAX_STATES``) on Python's engine through
``python_regex``, unless a repetition in it holds another or alternatives (``_backtracks``), which
could take that engine exponential time. What none can say (a variable-width look-behind, a
back-reference into a repetition, such a shape) raises ``Untranslatable``, and ``pattern_expr``
then raises ``UnsupportedSchema``.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from bisect import bisect_right
from functools import lru_cache

from .._errors import UnsupportedSchema
from ._expr import Chars, Expr, Lit, Repeat, alt, seq

__all__ = ["MAX_COUNT", "MAX_SIZE", "MAX_STATES", "InvalidPattern", "Untranslatable", "canonical_char", "linear",
           "pattern_expr", "python_regex", "read", "regex_expr", "search"]

_MAX = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
#: The most repetitions one quantifier may spell out in the grammar (``a{0,100000}`` is the check's).
MAX_COUNT = 256
#: The most atoms a pattern's rules may hold once every quantifier is spelled out.
MAX_SIZE = 4096
#: How deep groups may nest: deeper is refused before Python's recursion limit is.
_MAX_DEPTH = 100


class Untranslatable(ValueError):
    """The pattern uses something the grammar (or, from ``python_regex``, the check) cannot say exactly."""


class InvalidPattern(Untranslatable):
    """The pattern is not an ECMA-262 regular expression at all."""


Ranges = list[tuple[int, int]]


def _norm(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _negate(ranges: Ranges) -> Ranges:
    out: Ranges = []
    nxt = 0
    for a, b in _norm(ranges):
        if a > nxt:
            out.append((nxt, a - 1))
        nxt = b + 1
    if nxt <= _MAX:
        out.append((nxt, _MAX))
    return out


def _minus(ranges: Ranges, remove: Ranges) -> Ranges:
    keep = _negate(remove)
    out: Ranges = []
    for a, b in _norm(ranges):
        for c, d in keep:
            lo, hi = max(a, c), min(b, d)
            if lo <= hi:
                out.append((lo, hi))
    return out


_DIGIT: Ranges = [(0x30, 0x39)]
_WORD: Ranges = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
# ECMA-262's WhiteSpace and LineTerminator (Zs as of Unicode 15): what \s means there.
_SPACE: Ranges = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                  (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
_LINE_ENDS: Ranges = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_SPECIAL: Ranges = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]


def _class_body_char(cp: int) -> str:
    ch = chr(cp)
    if ch in "]\\^-[":
        return "\\" + ch
    if cp < 0x20 or 0x7F <= cp <= 0xA0:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF and not ch.isprintable():
        return f"\\u{cp:04x}"
    return ch


def _spelled(cp: int) -> str:
    ch = chr(cp)
    return _SHORT_ESCAPES.get(ch) or f"\\u{cp:04x}"


def chars_expr(ranges: Ranges) -> Expr:
    """A JSON string's spelling of one character out of ``ranges``."""
    ranges = _minus(ranges, [_SURROGATES])
    plain = _minus(ranges, _SPECIAL)
    options: list[Expr] = []
    if len(plain) == 1 and plain[0][0] == plain[0][1] and plain == _norm(ranges):
        return Lit(chr(plain[0][0]))
    if plain:
        body = "".join(_class_body_char(a) if a == b else f"{_class_body_char(a)}-{_class_body_char(b)}"
                       for a, b in plain)
        options.append(Chars(body))
    for a, b in _norm(ranges):
        for cp in range(max(a, 0), min(b, 0x5C) + 1):
            if cp < 0x20 or cp in (0x22, 0x5C):
                options.append(Lit(_spelled(cp)))
    if not options:
        raise Untranslatable("a character class that admits no character")
    return alt(*options)


def canonical_char() -> Expr:
    """Any character, spelled canonically."""
    return chars_expr([(0, _MAX)])


_HEX = frozenset("0123456789abcdefABCDEF")

# A node: ("lit", cp) | ("set", ranges) | ("seq", [nodes]) | ("alt", [nodes]) | ("rep", node, lo, hi, lazy)
# | ("group", node, index or None) | ("look", "=" | "!" | "<=" | "<!", node) | ("bound", negated)
# | ("backref", index, forward) | ("bol",) | ("eol",)


class _Parser:
    """ECMA-262's pattern grammar with Annex B's leniencies where they are unambiguous (a lone
    ``]``, ``{`` or ``}``, ``\\c`` before a non-letter, ``[\\d-z]``); code points, not UTF-16 units."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.depth = 0
        names = _group_names(pattern)
        self.groups = len(names)
        self.names = {name: n for n, name in enumerate(names, 1) if name is not None}
        if len(self.names) < sum(name is not None for name in names):
            raise InvalidPattern("a group name used twice")
        self.opened = 0
        self.closed: set[int] = set()
        #: Groups inside a repetition (their captures reset on each pass in ECMA, never in Python).
        self.repeated: set[int] = set()
        self.refs: list[int] = []
        #: Whether a \\p{...} was read: its classes are the check's (hundreds of ranges each).
        self.properties = False

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def take(self) -> str:
        ch = self.peek()
        self.i += 1
        return ch

    def parse(self) -> tuple:
        tree = self.alternation()
        if self.i < len(self.p):
            raise InvalidPattern(f"an unbalanced ')' at {self.i}")
        # A group inside a repetition: ECMA resets its capture on each pass, Python keeps the last one.
        if any(n in self.repeated for n in self.refs):
            raise Untranslatable("a back-reference to a group inside a repetition")
        return tree

    def alternation(self) -> tuple:
        options = [self.sequence()]
        while self.peek() == "|":
            self.take()
            options.append(self.sequence())
        return ("alt", options) if len(options) > 1 else options[0]

    def sequence(self) -> tuple:
        items: list[tuple] = []
        while self.peek() not in ("", "|", ")"):
            first_group = self.opened + 1
            atom = self.atom()
            items.append(self.quantified(atom, first_group))
        return ("seq", items)

    def quantifier(self) -> tuple[int, int | None] | None:
        ch = self.peek()
        if ch in ("*", "+", "?"):
            self.take()
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        return self.braces() if ch == "{" else None

    def quantified(self, atom: tuple, first_group: int) -> tuple:
        bounds = self.quantifier()
        if bounds is None:
            return atom
        lo, hi = bounds
        if atom[0] in ("bol", "eol", "bound", "look"):
            raise InvalidPattern("a quantified assertion")
        lazy = self.peek() == "?"
        if lazy:
            self.take()
        if self.quantifier() is not None:
            raise InvalidPattern(f"a quantifier with nothing to repeat at {self.i}")
        if hi is None or hi > 1:
            self.repeated.update(range(first_group, self.opened + 1))
        return ("rep", atom, lo, hi, lazy)

    def braces(self) -> tuple[int, int | None] | None:
        j = self.p.find("}", self.i)
        if j < 0:
            return None
        body = self.p[self.i + 1:j]
        parts = body.split(",")
        if len(parts) > 2 or not parts[0].isascii() or not parts[0].isdigit() or (
                len(parts) == 2 and parts[1] and not (parts[1].isascii() and parts[1].isdigit())):
            return None  # a literal "{" (Annex B)
        if max(len(part) for part in parts) > 9:
            raise Untranslatable(f"a repetition count of {max(len(part) for part in parts)} digits")
        self.i = j + 1
        lo = int(parts[0])
        hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
        if hi is not None and hi < lo:
            raise InvalidPattern(f"quantifier {{{body}}} out of order")
        return lo, hi

    def atom(self) -> tuple:
        start = self.i
        ch = self.take()
        if ch == "(":
            return self.group()
        if ch == "[":
            return ("set", self.char_class())
        if ch == ".":
            return ("set", _negate(_LINE_ENDS))
        if ch == "^":
            return ("bol",)
        if ch == "$":
            return ("eol",)
        if ch == "\\":
            return self.escape(in_class=False)
        if ch == "{":
            self.i = start
            if self.braces() is not None:
                raise InvalidPattern(f"nothing to repeat at {start}")
            self.i = start + 1
        if ch in ("*", "+", "?"):
            raise InvalidPattern(f"nothing to repeat at {start}")
        return ("lit", ord(ch))

    def group(self) -> tuple:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise Untranslatable(f"groups nested deeper than {_MAX_DEPTH}")
        index: int | None = None
        kind = ""
        if self.p.startswith("?:", self.i):
            self.i += 2
        elif self.p.startswith(("?=", "?!"), self.i):
            kind = self.p[self.i + 1]
            self.i += 2
        elif self.p.startswith(("?<=", "?<!"), self.i):
            kind = self.p[self.i + 1:self.i + 3]
            self.i += 3
        elif self.p.startswith("?<", self.i):
            j = self.p.find(">", self.i)
            self.i = j + 1  # the name was read by _group_names
            self.opened += 1
            index = self.opened
        elif self.peek() == "?":
            form = self.p[self.i + 1:self.i + 2]
            if form and form in "imsx-":
                raise Untranslatable(f"a modifier group '(?{form}' at {self.i - 1}")
            raise InvalidPattern(f"'(?{form}' at {self.i - 1} opens no ECMA-262 group")
        else:
            self.opened += 1
            index = self.opened
        inner = self.alternation()
        if self.take() != ")":
            raise InvalidPattern("an unclosed group")
        self.depth -= 1
        if index is not None:
            self.closed.add(index)
        if kind:
            return ("look", kind, inner)
        return ("group", inner, index)

    def escape(self, *, in_class: bool) -> tuple:
        ch = self.take()
        if ch == "":
            raise InvalidPattern("a trailing backslash")
        sets = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
        if ch in sets:
            return ("set", sets[ch])
        if ch.lower() in sets:
            return ("set", _negate(sets[ch.lower()]))
        simple = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B}
        if ch in simple:
            return ("lit", simple[ch])
        if ch == "0" and not self.peek().isdigit():
            return ("lit", 0)
        if ch == "b":
            return ("lit", 0x08) if in_class else ("bound", False)
        if ch == "B":
            if in_class:
                raise Untranslatable("\\B inside a class")
            return ("bound", True)
        if ch == "x":
            digits = self.p[self.i:self.i + 2]
            if len(digits) == 2 and set(digits) <= _HEX:
                self.i += 2
                return ("lit", int(digits, 16))
            return ("lit", ord("x"))  # Annex B: a lone \x is "x"
        if ch == "u":
            return ("lit", self.unicode_escape())
        if ch == "c":
            letter = self.peek()
            if letter.isascii() and letter.isalpha():
                self.take()
                return ("lit", ord(letter) % 32)
            if in_class and letter.isascii() and (letter.isdigit() or letter == "_"):
                self.take()
                return ("lit", ord(letter) % 32)
            self.i -= 1  # Annex B: "\c" is a backslash, then the "c"
            return ("lit", ord("\\"))
        if ch in "pP":
            ranges = self.property()
            self.properties = True
            return ("set", _negate(ranges) if ch == "P" else ranges)
        if ch == "k" and self.names and not in_class:
            j = self.p.find(">", self.i)
            name = self.p[self.i + 1:j] if self.peek() == "<" and j > 0 else ""
            if name not in self.names:
                raise InvalidPattern("\\k without the name of a group")
            self.i = j + 1
            return self.backref(self.names[name])
        if ch.isdigit():
            j = self.i
            while j < len(self.p) and self.p[j].isdigit():
                j += 1
            if j - self.i >= 9:
                raise Untranslatable("a back-reference number too large")
            n = int(self.p[self.i - 1:j])
            if not in_class and 1 <= n <= self.groups:
                self.i = j
                return self.backref(n)
            raise Untranslatable(f"\\{ch}: a legacy octal escape")
        return ("lit", ord(ch))

    def property(self) -> Ranges:
        j = self.p.find("}", self.i)
        if self.peek() != "{" or j < 0:
            raise Untranslatable("\\p without {...}")
        name = self.p[self.i + 1:j]
        self.i = j + 1
        key, _, value = name.rpartition("=")
        if key not in ("", "gc", "General_Category"):
            raise Untranslatable(f"\\p{{{name}}}: only General_Category properties are read")
        if value in ("Any", "ASCII", "Assigned") and not key:
            return {"Any": [(0, _MAX)], "ASCII": [(0, 0x7F)], "Assigned": _negate(_category_ranges("Cn"))}[value]
        short = _CATEGORY_NAMES.get(value, value)
        if short not in _CATEGORIES:
            raise Untranslatable(f"\\p{{{name}}}: not a General_Category this reader knows")
        return _norm([r for cat in _CATEGORIES[short] for r in _category_ranges(cat)])

    def backref(self, n: int) -> tuple:
        # A reference to a group not closed yet is always empty in ECMA (captures are set on close).
        if n in self.closed:
            self.refs.append(n)
        return ("backref", n, n not in self.closed)

    def unicode_escape(self) -> int:
        if self.peek() == "{":
            j = self.p.find("}", self.i)
            digits = self.p[self.i + 1:j] if j > 0 else ""
            if not digits or not set(digits) <= _HEX or int(digits, 16) > _MAX:
                raise Untranslatable("a \\u{...} that names no code point")
            self.i = j + 1
            return int(digits, 16)
        digits = self.p[self.i:self.i + 4]
        if len(digits) != 4 or not set(digits) <= _HEX:
            return ord("u")  # Annex B: a lone \u is "u"
        self.i += 4
        cp = int(digits, 16)
        trail = self.p[self.i + 2:self.i + 6]
        if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i) and len(trail) == 4 and set(trail) <= _HEX \
                and 0xDC00 <= int(trail, 16) <= 0xDFFF:
            self.i += 6  # a surrogate pair written as two escapes is one code point
            return 0x10000 + ((cp - 0xD800) << 10) + (int(trail, 16) - 0xDC00)
        return cp

    def class_atom(self) -> tuple:
        ch = self.take()
        if ch == "\\":
            return self.escape(in_class=True)
        return ("lit", ord(ch))

    def char_class(self) -> Ranges:
        negate = self.peek() == "^"
        if negate:
            self.take()
        ranges: Ranges = []
        while True:
            if self.peek() == "":
                raise InvalidPattern("an unclosed character class")
            if self.peek() == "]":  # ECMA: "[]" admits nothing, "[^]" anything
                self.take()
                break
            node = self.class_atom()
            if self.peek() == "-" and self.p[self.i + 1:self.i + 2] not in ("]", ""):
                self.take()
                end = self.class_atom()
                if node[0] == "set" or end[0] == "set":
                    # Annex B: a range with a class at either end is the two and a "-".
                    ranges += [*_node_ranges(node), (0x2D, 0x2D), *_node_ranges(end)]
                    continue
                if end[1] < node[1]:
                    raise InvalidPattern("a class range out of order")
                ranges.append((node[1], end[1]))
            else:
                ranges += _node_ranges(node)
        return _negate(ranges) if negate else _norm(ranges)


_CATEGORIES: dict[str, tuple[str, ...]] = {c: (c, ) for c in (
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
    "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn")}
for _group in "LMNPSZC":
    _CATEGORIES[_group] = tuple(c for c in list(_CATEGORIES) if c[0] == _group and len(c) == 2)
_CATEGORIES["LC"] = ("Lu", "Ll", "Lt")
_CATEGORY_NAMES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll", "Titlecase_Letter": "Lt",
    "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M", "Combining_Mark": "M", "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc", "Enclosing_Mark": "Me", "Number": "N", "Decimal_Number": "Nd", "digit": "Nd",
    "Letter_Number": "Nl", "Other_Number": "No", "Punctuation": "P", "punct": "P", "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd", "Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf", "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm", "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z", "Space_Separator": "Zs", "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp", "Other": "C", "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs",
    "Private_Use": "Co", "Unassigned": "Cn",
}


@lru_cache(maxsize=64)
def _category_ranges(category: str) -> Ranges:
    """The code points of one General_Category, by this Python's Unicode tables."""
    return [r for cat, r in _all_categories() if cat == category]


@lru_cache(maxsize=1)
def _all_categories() -> tuple[tuple[str, tuple[int, int]], ...]:
    out: list[tuple[str, tuple[int, int]]] = []
    start, current = 0, unicodedata.category(chr(0))
    for cp in range(1, _MAX + 2):
        cat = unicodedata.category(chr(cp)) if cp <= _MAX else ""
        if cat != current:
            out.append((current, (start, cp - 1)))
            start, current = cp, cat
    return tuple(out)


def _node_ranges(node: tuple) -> Ranges:
    return list(node[1]) if node[0] == "set" else [(node[1], node[1])]


def _group_names(pattern: str) -> list[str | None]:
    """Each capturing group's name (None when it has none), in order: what ``\\1`` and ``\\k<x>``
    may refer to, read before the pattern is parsed (a reference may come before its group)."""
    names: list[str | None] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern.startswith("^]", i + 1) or pattern.startswith("]", i + 1):
                i += 3 if pattern[i + 1] == "^" else 2
                in_class = False
                continue
        elif ch == "(":
            if not pattern.startswith("?", i + 1):
                names.append(None)
            elif pattern.startswith("?<", i + 1) and not pattern.startswith(("?<=", "?<!"), i + 1):
                end = pattern.find(">", i + 3)
                name = pattern[i + 3:end] if end > 0 else ""
                if not name.replace("$", "_").isidentifier():
                    raise InvalidPattern(f"a group name at {i} that is not an identifier")
                names.append(name)
        i += 1
    return names


@lru_cache(maxsize=1024)
def _parse(pattern: str) -> tuple[tuple, _Parser]:
    """The pattern's tree, read once for the front door, the grammar and the check alike."""
    parser = _Parser(pattern)
    try:
        return parser.parse(), parser
    except RecursionError:
        raise Untranslatable("a pattern nested too deeply") from None


# -- the grammar's side ---------------------------------------------------------------------------

def _size(node: tuple) -> int:
    """How many atoms the rules hold once each quantifier is spelled out (``Untranslatable`` past a bound)."""
    kind = node[0]
    if kind in ("seq", "alt"):
        total = sum(_size(n) for n in node[1])
    elif kind == "rep":
        count = node[3] if node[3] is not None else node[2] + 1
        if max(node[2], node[3] or 0) > MAX_COUNT:
            raise Untranslatable(f"a repetition count above {MAX_COUNT}")
        total = _size(node[1]) * max(count, 1)
    elif kind == "group":
        total = _size(node[1])
    else:
        total = 1
    if total > MAX_SIZE:
        raise Untranslatable(f"a pattern whose rules would hold more than {MAX_SIZE} atoms")
    return total


def _expr(node: tuple) -> Expr:
    kind = node[0]
    if kind == "lit":
        return chars_expr([(node[1], node[1])]) if node[1] < 0x20 or node[1] in (0x22, 0x5C) else Lit(chr(node[1]))
    if kind == "set":
        return chars_expr(node[1])
    if kind == "seq":
        return seq(*(_expr(n) for n in node[1]))
    if kind == "alt":
        return alt(*(_expr(n) for n in node[1]))
    if kind == "rep":
        return Repeat(_expr(node[1]), node[2], node[3])
    if kind == "group":
        return _expr(node[1])
    if kind in ("bol", "eol"):
        raise Untranslatable("an anchor inside the pattern")
    raise Untranslatable(f"a {'look-around' if kind == 'look' else 'word boundary' if kind == 'bound' else 'back-reference'}")


@lru_cache(maxsize=512)
def _tree(pattern: str) -> tuple:
    tree, parser = _parse(pattern)
    if parser.properties:
        raise Untranslatable("a Unicode property escape (left to the check)")
    _size(tree)
    return tree


def regex_expr(pattern: str, *, search: bool = True) -> Expr:
    """The spelling of every string ``pattern`` matches: found anywhere in it when ``search``
    (JSON Schema's reading), or as the whole string otherwise. ``Untranslatable`` when it cannot."""
    tree = _tree(pattern)
    options = tree[1] if tree[0] == "alt" else [tree]
    anything = Repeat(canonical_char())
    out: list[Expr] = []
    for option in options:
        items = list(option[1]) if option[0] == "seq" else [option]
        head = bool(items) and items[0] == ("bol",)
        tail = bool(items) and items[-1] == ("eol",) and (len(items) > 1 or not head)
        body = items[int(head):len(items) - int(tail)]
        core = _expr(("seq", body))
        out.append(seq(Lit("") if head or not search else anything, core, Lit("") if tail or not search else anything))
    return alt(*out)


def pattern_expr(pattern: str) -> Expr:
    """A JSON string (quotes included) that ``pattern`` matches. ``Untranslatable`` leaves the
    pattern to the check; ``UnsupportedSchema`` when the check cannot read it either."""
    try:
        return seq(Lit('"'), regex_expr(pattern), Lit('"'))
    except Untranslatable as exc:
        try:
            # As the check will read it: its linear matcher, or Python's engine behind the guard.
            _matcher(pattern)
        except Untranslatable as why:
            raise UnsupportedSchema(f"pattern {pattern!r}: {exc}, and the check cannot read it either: {why}",
                                    keyword="pattern") from None
        raise exc from None


def _backtracks(node: tuple, repeated: bool = False) -> bool:
    """Whether a repetition of a varying count holds another one or alternatives: the shapes
    (``(a+)+``, ``(a|a)*``) on which a backtracking engine takes exponential time."""
    kind = node[0]
    if kind == "rep":
        many = node[3] is None or node[3] > node[2]
        if repeated and many:
            return True
        return _backtracks(node[1], repeated or many)
    if kind == "alt":
        return (repeated and len(node[1]) > 1) or any(_backtracks(n, repeated) for n in node[1])
    if kind == "seq":
        return any(_backtracks(n, repeated) for n in node[1])
    if kind in ("group", "look"):
        return _backtracks(node[1] if kind == "group" else node[2], repeated)
    return False


# -- the check's side -----------------------------------------------------------------------------

def _py_char(cp: int) -> str:
    if cp < 0x80 and chr(cp).isalnum():
        return chr(cp)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _py_set(ranges: Ranges) -> str:
    if not ranges:
        return "(?!)"
    return "[" + "".join(_py_char(a) if a == b else f"{_py_char(a)}-{_py_char(b)}" for a, b in _norm(ranges)) + "]"


_PY_WORD = _py_set(_WORD)
_PY_BOUNDS = {False: f"(?:(?<={_PY_WORD})(?!{_PY_WORD})|(?<!{_PY_WORD})(?={_PY_WORD}))",
              True: f"(?:(?<={_PY_WORD})(?={_PY_WORD})|(?<!{_PY_WORD})(?!{_PY_WORD}))"}


def _py(node: tuple, tag: str) -> str:
    kind = node[0]
    if kind == "lit":
        return _py_char(node[1])
    if kind == "set":
        return _py_set(node[1])
    if kind == "seq":
        return "".join(_py(n, tag) for n in node[1])
    if kind == "alt":
        return "(?:" + "|".join(_py(n, tag) for n in node[1]) + ")"
    if kind == "rep":
        _, item, lo, hi, lazy = node
        count = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi)) or (
            f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}")
        return f"(?:{_py(item, tag)}){count}{'?' if lazy else ''}"
    if kind == "group":
        # Groups are named by the pattern's hash: jsonschema joins patternProperties with "|".
        return f"(?P<{tag}{node[2]}>{_py(node[1], tag)})" if node[2] else f"(?:{_py(node[1], tag)})"
    if kind == "look":
        return f"(?{node[1]}{_py(node[2], tag)})"
    if kind == "bound":
        return _PY_BOUNDS[node[1]]
    if kind == "backref":
        # ECMA: a group that took no part (or is not closed yet) matches the empty string.
        return "(?:)" if node[2] else f"(?({tag}{node[1]})(?P={tag}{node[1]}))"
    return r"\A" if kind == "bol" else r"\Z"


@lru_cache(maxsize=1024)
def python_regex(pattern: str) -> str:
    """``pattern`` as a Python regex with the same ``re.search`` matches (flags and all inside it).
    ``InvalidPattern`` for no ECMA-262 regex, ``Untranslatable`` for one Python cannot say."""
    tree, _ = _parse(pattern)
    digest = hashlib.sha1(pattern.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    # The comment keeps two patterns' translations apart (``\\d`` and ``[0-9]`` as keys of one
    # patternProperties) and says which pattern a translation came from.
    out = f"(?#{digest})(?:{_py(tree, f'g{digest}_')})"
    try:
        re.compile(out)
    except (re.error, OverflowError, RecursionError) as exc:
        raise Untranslatable(f"Python's re cannot say it ({exc})") from None
    return out


# -- the linear matcher: every test of a string against a pattern ---------------------------------

#: The most states one pattern's matcher may hold once every quantifier is spelled out.
MAX_STATES = 100_000
#: Cached steps of one pattern's matcher (its lazily built automaton); past it they are dropped.
_MAX_STEPS = 50_000

_SET, _SPLIT, _BOL, _EOL, _BOUND, _NOT_BOUND, _MATCH = range(7)


class _Matcher:
    """A regular pattern tree as a Thompson automaton, run over a string once (each character
    moves a set of states, found again in a cache of the steps taken): time linear in the string
    whatever the pattern, where a backtracking engine can take exponential time. ECMA's ``^`` and
    ``$`` hold at the ends of the input, ``\\b`` between a word character and a non-word one."""

    def __init__(self, tree: tuple) -> None:
        self.kind: list[int] = []
        self.arg: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        self.out: list[tuple[int, ...]] = []
        match = self._state(_MATCH, ())
        self.start = self._compile(tree, match)
        self.match = match
        self.bounds = any(k in (_BOUND, _NOT_BOUND) for k in self.kind)
        self._sets: dict[frozenset[int], int] = {}
        self._members: list[frozenset[int]] = []
        self._steps: dict[tuple[int, str, int], int] = {}
        # One matcher serves every thread (a server checks requests on several): its caches are shared.
        self._lock = threading.Lock()

    def _state(self, kind: int, out: tuple[int, ...], ranges: Ranges | None = None) -> int:
        self.kind.append(kind)
        self.out.append(out)
        self.arg.append((tuple(a for a, _ in ranges or ()), tuple(b for _, b in ranges or ())))
        return len(self.kind) - 1

    def _compile(self, node: tuple, after: int) -> int:
        """The state that matches ``node`` and then goes on to ``after`` (built back to front)."""
        kind = node[0]
        if kind == "lit":
            return self._state(_SET, (after,), [(node[1], node[1])])
        if kind == "set":
            return self._state(_SET, (after,), _norm(node[1]))
        if kind == "seq":
            for item in reversed(node[1]):
                after = self._compile(item, after)
            return after
        if kind == "alt":
            return self._state(_SPLIT, tuple(self._compile(option, after) for option in node[1]))
        if kind == "group":
            return self._compile(node[1], after)
        if kind == "rep":
            _, item, lo, hi, _lazy = node
            if hi is None:
                loop = self._state(_SPLIT, ())
                self.out[loop] = (self._compile(item, loop), after)
                start = loop
            else:
                start = after
                for _ in range(hi - lo):
                    start = self._state(_SPLIT, (self._compile(item, start), after))
            for _ in range(lo):
                start = self._compile(item, start)
            return start
        if kind in ("bol", "eol"):
            return self._state(_BOL if kind == "bol" else _EOL, (after,))
        if kind == "bound":
            return self._state(_NOT_BOUND if node[1] else _BOUND, (after,))
        raise Untranslatable(f"a {'look-around' if kind == 'look' else 'back-reference'} (not a regular pattern)")

    def _closure(self, states: set[int], where: int) -> int:
        """The states reached from ``states`` without reading (``where``: 1 at the start, 2 at the
        end, 4 when the characters either side differ in being word characters), as one id."""
        seen: set[int] = set()
        stack = list(states)
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            kind = self.kind[s]
            if kind == _SPLIT or (kind == _BOL and where & 1) or (kind == _EOL and where & 2) \
                    or (kind == _BOUND and where & 4) or (kind == _NOT_BOUND and not where & 4):
                stack.extend(self.out[s])
        kept = frozenset(s for s in seen if self.kind[s] in (_SET, _MATCH))
        if kept not in self._sets:
            self._sets[kept] = len(self._members)
            self._members.append(kept)
        return self._sets[kept]

    def _where(self, text: str, i: int) -> int:
        where = (i == 0) | (i == len(text)) << 1
        if self.bounds:
            before = i > 0 and _is_word(text[i - 1])
            after = i < len(text) and _is_word(text[i])
            where |= (before != after) << 2
        return where

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in ``text`` (``re.search``'s question)."""
        with self._lock:
            if len(self._members) > _MAX_STEPS:  # the sets of states seen grow with the texts read
                self._sets.clear()
                self._members.clear()
                self._steps.clear()
            return self._search(text)

    def _search(self, text: str) -> bool:
        current = self._closure({self.start}, self._where(text, 0))
        if self.match in self._members[current]:
            return True
        for i, ch in enumerate(text):
            where = self._where(text, i + 1)
            key = (current, ch, where)
            step = self._steps.get(key)
            if step is None:
                cp = ord(ch)
                moved = {self.start}  # a match may begin at any character
                for s in self._members[current]:
                    if self.kind[s] == _SET:
                        starts, ends = self.arg[s]
                        j = bisect_right(starts, cp) - 1
                        if j >= 0 and cp <= ends[j]:
                            moved.add(self.out[s][0])
                step = self._closure(moved, where)
                if len(self._steps) > _MAX_STEPS:
                    self._steps.clear()
                self._steps[key] = step
            current = step
            if self.match in self._members[current]:
                return True
        return False


def _is_word(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def _states(node: tuple) -> int:
    """How many states ``_Matcher`` builds for ``node`` (``Untranslatable`` past ``MAX_STATES``)."""
    kind = node[0]
    if kind in ("seq", "alt"):
        total = sum(_states(n) for n in node[1]) + 1
    elif kind == "rep":
        total = (_states(node[1]) + 1) * max(node[3] if node[3] is not None else node[2] + 1, 1)
    elif kind == "group":
        total = _states(node[1])
    elif kind == "look":
        total = _states(node[2])
    else:
        total = 1
    if total > MAX_STATES:
        raise Untranslatable(f"a pattern whose matcher would hold more than {MAX_STATES} states")
    return total


@lru_cache(maxsize=256)
def _matcher(pattern: str) -> _Matcher | str:
    """The linear matcher of a regular pattern, or the Python regex of one it cannot hold (a
    look-around, a back-reference, past ``MAX_STATES``) whose shape a backtracking engine reads in time."""
    tree, _ = _parse(pattern)
    try:
        _states(tree)
        return _Matcher(tree)
    except Untranslatable as exc:
        if _backtracks(tree):
            # The grammar would admit strings Python's engine then takes exponential time to refuse.
            raise Untranslatable(f"{exc}, with a repetition holding a repetition or alternatives: a backtracking "
                                 "engine could take exponential time on it") from None
        return python_regex(pattern)


def read(pattern: str) -> None:
    """``InvalidPattern`` unless ``pattern`` is an ECMA-262 regular expression (JSON Schema's
    ``format: regex``); one this reader cannot translate still is one."""
    try:
        _parse(pattern)
    except InvalidPattern:
        raise
    except Untranslatable:
        pass


def linear(pattern: str) -> bool:
    """Whether ``search`` reads ``pattern`` in time linear in the string (a regular pattern).
    ``Untranslatable`` (``InvalidPattern``) as ``search`` would raise it."""
    return isinstance(_matcher(pattern), _Matcher)


def search(pattern: str, text: str) -> bool:
    """Whether the ECMA-262 ``pattern`` matches somewhere in ``text``, as JSON Schema asks. A
    regular pattern (most) runs on the linear matcher; one with look-around or back-references on
    Python's engine, unless its shape could make that take exponential time: then ``Untranslatable``,
    as for a pattern Python cannot say (``InvalidPattern`` for no ECMA-262 pattern at all)."""
    matcher = _matcher(pattern)
    if isinstance(matcher, str):
        return re.search(matcher, text) is not None
    return matcher.search(text)
