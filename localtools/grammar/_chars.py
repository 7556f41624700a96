"""Character classes as GBNF writes them (``[^"\\\x00-\x1f]``): read, matched, rendered."""

from __future__ import annotations

from functools import lru_cache

__all__ = ["is_surrogate"]


@lru_cache(maxsize=1024)
def _class_items(body: str) -> tuple[bool, tuple[tuple[str, str], ...]]:
    """A GBNF class body as (negated, ((low, high), ...)). Cached: the matcher reads a grammar's
    few classes once for every character it matches."""
    negate = body.startswith("^")
    chars = _class_chars(body[1:] if negate else body)
    ranges: list[tuple[str, str]] = []
    j = 0
    while j < len(chars):
        if j + 2 < len(chars) and chars[j + 1] == "-":
            ranges.append((chars[j], chars[j + 2]))
            j += 3
        else:
            ranges.append((chars[j], chars[j]))
            j += 1
    return negate, tuple(ranges)

def _class_chars(body: str) -> list[str]:
    """The characters of a class body with escapes resolved (``-`` stays as written)."""
    items: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x":
                items.append(chr(int(body[i + 2 : i + 4], 16)))
                i += 4
                continue
            if nxt == "u":
                items.append(chr(int(body[i + 2 : i + 6], 16)))
                i += 6
                continue
            items.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
            i += 2
            continue
        items.append(c)
        i += 1
    return items

def _class_match(body: str, ch: str) -> bool:
    if is_surrogate(ch):
        return False
    negate, ranges = _class_items(body)
    return any(a <= ch <= b for a, b in ranges) != negate


def is_surrogate(ch: str) -> bool:
    """A lone surrogate code point: no UTF-8 text holds one, so no class of any engine (they all
    read UTF-8) matches it; a Python string can, and the matcher must agree with the engines."""
    return "\ud800" <= ch <= "\udfff"

def _regex_char(ch: str) -> str:
    # Alphanumerics stay as they are; everything else is a code-point escape, which means the same
    # inside and outside a class and never clashes with Lark's "/" delimiters.
    return ch if ch.isascii() and ch.isalnum() else f"\\x{{{ord(ch):X}}}"

def _regex_class(body: str) -> str:
    negate, ranges = _class_items(body)
    inner = "".join(_regex_char(a) if a == b else f"{_regex_char(a)}-{_regex_char(b)}" for a, b in ranges)
    return f"[{'^' if negate else ''}{inner}]"

_CONTROL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _class_escape(chars: str) -> str:
    # GBNF engines refuse a raw newline inside a class; control characters go escaped.
    return "".join("\\" + c if c in "]\\^-[" else _CONTROL_ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x20 else c)
                   for c in chars)
