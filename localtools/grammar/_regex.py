"""A JSON Schema ``pattern`` (an ECMA-262 regular expression) as grammar rules for a JSON string.

The pattern speaks of the decoded string; the grammar writes its JSON spelling, so every character
it admits is written the one way ``json.dumps(..., ensure_ascii=False)`` writes it (``\\"``,
``\\\\``, ``\\n``, ``\\u001f``; anything else raw). A model cannot then spell a character the
pattern forbids as an escape. Unanchored patterns mean "contains", as in JSON Schema.

The subset: literals, escapes (``\\d \\w \\s`` and their negations, ``\\n \\t \\xHH \\uHHHH``),
classes with ranges and negation, ``.``, groups (capturing or ``(?:``), alternation, the
quantifiers ``* + ? {m} {m,} {m,n}`` (lazy or not: the language is the same) and ``^``/``$`` at
the ends of an alternative. Anything else (look-around, back-references, word boundaries,
Unicode properties) raises ``Untranslatable``, and the pattern is left to the check after decoding.
"""

from __future__ import annotations

from ._expr import Chars, Expr, Lit, Repeat, alt, seq

__all__ = ["Untranslatable", "canonical_char", "pattern_expr", "regex_expr"]

_MAX = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
#: The most repetitions a quantifier may ask for; more would spell out huge rules.
MAX_COUNT = 1000


class Untranslatable(ValueError):
    """The pattern uses something the grammar cannot say exactly."""


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
# ASCII whitespace only: Python's ``re`` (what the check uses) agrees on these, and a narrower
# class never admits what the check refuses.
_SPACE: Ranges = [(0x09, 0x0D), (0x20, 0x20)]
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


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def take(self) -> str:
        ch = self.peek()
        self.i += 1
        return ch

    # A node: ("lit", cp) | ("set", ranges) | ("seq", [nodes]) | ("alt", [nodes]) | ("rep", node, lo, hi)
    # | ("bol",) | ("eol",)
    def alternation(self) -> tuple:
        options = [self.sequence()]
        while self.peek() == "|":
            self.take()
            options.append(self.sequence())
        return ("alt", options) if len(options) > 1 else options[0]

    def sequence(self) -> tuple:
        items: list[tuple] = []
        while self.peek() not in ("", "|", ")"):
            atom = self.atom()
            items.append(self.quantified(atom))
        return ("seq", items)

    def quantified(self, atom: tuple) -> tuple:
        while True:
            ch = self.peek()
            if ch in ("*", "+", "?"):
                self.take()
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
            elif ch == "{" and (bounds := self.braces()) is not None:
                lo, hi = bounds
            else:
                return atom
            if atom[0] in ("bol", "eol"):
                raise Untranslatable("a quantified anchor")
            if self.peek() == "?":
                self.take()  # lazy: same language
            if lo > MAX_COUNT or (hi is not None and hi > MAX_COUNT):
                raise Untranslatable(f"a repetition count above {MAX_COUNT}")
            atom = ("rep", atom, lo, hi)

    def braces(self) -> tuple[int, int | None] | None:
        j = self.p.find("}", self.i)
        if j < 0:
            return None
        body = self.p[self.i + 1:j]
        parts = body.split(",")
        if len(parts) > 2 or not parts[0].isdigit() or (len(parts) == 2 and parts[1] and not parts[1].isdigit()):
            return None  # a literal "{" (Annex B)
        self.i = j + 1
        lo = int(parts[0])
        hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
        if hi is not None and hi < lo:
            raise Untranslatable(f"quantifier {{{body}}} out of order")
        return lo, hi

    def atom(self) -> tuple:
        ch = self.take()
        if ch == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.peek() == "?":
                raise Untranslatable("look-around or a named group")
            inner = self.alternation()
            if self.take() != ")":
                raise Untranslatable("an unclosed group")
            return inner
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
        if ch in ("*", "+", "?"):
            raise Untranslatable(f"nothing to repeat before {ch!r}")
        return ("lit", ord(ch))

    def escape(self, *, in_class: bool) -> tuple:
        ch = self.take()
        if ch == "":
            raise Untranslatable("a trailing backslash")
        sets = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
        if ch in sets:
            return ("set", sets[ch])
        if ch.lower() in sets:
            return ("set", _negate(sets[ch.lower()]))
        simple = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "0": 0x00}
        if ch in simple and not (ch == "0" and self.peek().isdigit()):
            return ("lit", simple[ch])
        if ch == "b" and in_class:
            return ("lit", 0x08)
        if ch == "x":
            return ("lit", self.hex(2))
        if ch == "u":
            if self.peek() == "{":
                j = self.p.find("}", self.i)
                if j < 0:
                    raise Untranslatable("an unclosed \\u{...}")
                cp = int(self.p[self.i + 1:j], 16)
                self.i = j + 1
                return ("lit", cp)
            return ("lit", self.hex(4))
        if ch == "c" and self.peek().isalpha():
            return ("lit", ord(self.take().upper()) - 64)
        if ch.isdigit() or ch in "bBpPk":
            raise Untranslatable(f"\\{ch} (a back-reference, word boundary or Unicode property)")
        return ("lit", ord(ch))

    def hex(self, n: int) -> int:
        digits = self.p[self.i:self.i + n]
        if len(digits) != n or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise Untranslatable("a malformed hexadecimal escape")
        self.i += n
        return int(digits, 16)

    def char_class(self) -> Ranges:
        negate = self.peek() == "^"
        if negate:
            self.take()
        ranges: Ranges = []
        first = True
        while True:
            ch = self.take()
            if ch == "":
                raise Untranslatable("an unclosed character class")
            if ch == "]" and not first:
                break
            first = False
            if ch == "\\":
                node = self.escape(in_class=True)
                if node[0] == "set":
                    ranges.extend(node[1])
                    continue
                lo = node[1]
            else:
                lo = ord(ch)
            if self.peek() == "-" and self.p[self.i + 1:self.i + 2] not in ("]", ""):
                self.take()
                end = self.take()
                if end == "\\":
                    node = self.escape(in_class=True)
                    if node[0] == "set":
                        raise Untranslatable("a class range ending in a class escape")
                    hi = node[1]
                else:
                    hi = ord(end)
                if hi < lo:
                    raise Untranslatable("a class range out of order")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        return _negate(ranges) if negate else _norm(ranges)


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
    raise Untranslatable("an anchor inside the pattern")


def regex_expr(pattern: str, *, search: bool = True) -> Expr:
    """The spelling of every string ``pattern`` matches: found anywhere in it when ``search``
    (JSON Schema's reading), or as the whole string otherwise. ``Untranslatable`` when it cannot."""
    parser = _Parser(pattern)
    tree = parser.alternation()
    if parser.i < len(pattern):
        raise Untranslatable(f"an unbalanced ')' at {parser.i}")
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
    """A JSON string (quotes included) that ``pattern`` matches."""
    return seq(Lit('"'), regex_expr(pattern), Lit('"'))
