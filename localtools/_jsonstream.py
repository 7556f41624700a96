"""JSON text read as it is written, rewritten as ``json.dumps`` writes it.

A call's arguments stream as the model writes them, but a client joins the pieces and must get
the same ``arguments`` string as the finished call (``json.dumps`` of the parsed value). This
reader is fed the written text and gives the canonical text of what is already certain: a
number once a delimiter ends it, a string's characters once their escapes are whole, a
separator as ``", "`` / ``": "``. Whitespace the model wrote is dropped.
"""

from __future__ import annotations

import json

__all__ = ["CanonicalJSON"]

_NUMBER = set("-+0123456789.eE")
_LITERALS = {"t": "true", "f": "false", "n": "null"}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class CanonicalJSON:
    """Feed the written text (``feed``); ``text`` is the canonical text so far, ``end`` where in
    the fed text the value ended (``None`` until it has). ``broken`` is set when the text is not
    one JSON value; nothing more is added then."""

    def __init__(self) -> None:
        self.text = ""
        self.end: int | None = None
        self.broken = False
        self._fed = ""
        self._pos = 0
        self._depth = 0
        self._in_string = False

    def feed(self, written: str) -> None:
        """``written``: the whole text so far (it only grows)."""
        self._fed = written
        while self.end is None and not self.broken and self._step():
            pass

    def _step(self) -> bool:
        """Read on from ``_pos``; False when what follows is not whole yet."""
        if self._in_string:
            return self._string()
        s, i = self._fed, self._pos
        while i < len(s) and s[i] in " \t\r\n":
            i += 1
        self._pos = i
        if i >= len(s):
            return False
        c = s[i]
        if c in "{[":
            self._emit(c, i + 1, depth=1)
        elif c in "}]":
            self._emit(c, i + 1, depth=-1)
        elif c == ",":
            self._emit(", ", i + 1)
        elif c == ":":
            self._emit(": ", i + 1)
        elif c == '"':
            self.text += '"'
            self._pos, self._in_string = i + 1, True
        elif c in _NUMBER:
            j = i
            while j < len(s) and s[j] in _NUMBER:
                j += 1
            if j == len(s):
                return False  # more digits may follow
            try:
                self._emit(json.dumps(json.loads(s[i:j])), j)
            except ValueError:
                self.broken = True
        elif c in _LITERALS:
            word = _LITERALS[c]
            if len(s) - i < len(word):
                return False
            if s[i:i + len(word)] != word:
                self.broken = True
            else:
                self._emit(word, i + len(word))
        else:
            self.broken = True
        return not self.broken

    def _emit(self, text: str, pos: int, depth: int = 0) -> None:
        self.text += text
        self._pos = pos
        self._depth += depth
        if self._depth == 0:
            self.end = pos

    def _string(self) -> bool:
        """A string's characters pass on as they become certain, its closing quote last."""
        s, i = self._fed, self._pos
        while i < len(s):
            c = s[i]
            if c == '"':
                self._in_string = False
                self._emit('"', i + 1)
                return True
            if c != "\\":
                char, used = c, 1
            elif i + 1 >= len(s):
                break
            elif s[i + 1] in _ESCAPES:
                char, used = _ESCAPES[s[i + 1]], 2
            elif s[i + 1] == "u":
                char, used = _unicode(s, i)
                if used <= 0:
                    self.broken = used < 0
                    break
            else:
                self.broken = True
                break
            self.text += json.dumps(char, ensure_ascii=False)[1:-1]
            i += used
        self._pos = i
        return False


def _unicode(s: str, i: int) -> tuple[str, int]:
    """The character of the ``\\uXXXX`` escape at ``i`` (a surrogate pair read whole) and how many
    characters it took: 0 while incomplete, -1 when it is no escape."""
    digits = s[i + 2:i + 6]
    if len(digits) < 4:
        return "", 0
    try:
        code = int(digits, 16)
    except ValueError:
        return "", -1
    if 0xD800 <= code < 0xDC00:  # a high surrogate: the escape after it may be its low half
        after = s[i + 6:i + 12]
        if len(after) < 6 and "\\u".startswith(after[:2]) and all(ch in "0123456789abcdefABCDEF" for ch in after[2:]):
            return "", 0
        if after[:2] == "\\u":
            try:
                low = int(after[2:6], 16)
            except ValueError:
                low = -1
            if 0xDC00 <= low < 0xE000:
                return json.loads(f'"{s[i:i + 12]}"'), 12
    return json.loads(f'"{s[i:i + 6]}"'), 6
