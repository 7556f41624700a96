"""JSON text read as it is written, rewritten as ``json.dumps`` writes it.

A call's arguments stream as the model writes them, but a client joins the pieces and must get
the same ``arguments`` string as the finished call (``json.dumps`` of the parsed value). This
reader is fed the written text and gives the canonical text of what is already certain: a
number once a delimiter ends it, a string's characters once their escapes are whole, a
separator as ``", "`` / ``": "``, a key once it is whole. Whitespace the model wrote is dropped.

An object inside the value comes whole, once it closes: a free-form object may repeat a key, and
parsing keeps the last value in the first one's place. The outer object's keys are checked as
they come: a repeated one sets ``broken`` before it is passed on.
"""

from __future__ import annotations

import json

__all__ = ["CanonicalJSON"]

_NUMBER = set("-+0123456789.eE")
_LITERALS = {"t": "true", "f": "false", "n": "null"}
_HEX = set("0123456789abcdefABCDEF")
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
        #: The outer object's keys; whether the next string is one, and the one being read.
        self._keys: set[str] = set()
        self._expect_key = False
        self._key: str | None = None
        #: Where a nested object began (it passes on whole), and the scan through it.
        self._nested: int | None = None
        self._skip = _Skip()

    def feed(self, written: str) -> None:
        """``written``: the whole text so far (it only grows)."""
        self._fed = written
        while self.end is None and not self.broken and self._step():
            pass

    def _step(self) -> bool:
        """Read on from ``_pos``; False when what follows is not whole yet."""
        if self._nested is not None:
            return self._whole_object()
        if self._in_string:
            return self._string()
        s, i = self._fed, self._pos
        while i < len(s) and s[i] in " \t\r\n":
            i += 1
        self._pos = i
        if i >= len(s):
            return False
        c = s[i]
        if c == "{" and self._depth > 0:
            self._nested, self._pos, self._skip = i, i, _Skip()
            return self._whole_object()
        if c in "{[":
            self._emit(c, i + 1, depth=1)
            self._expect_key = c == "{"
        elif c in "}]":
            self._emit(c, i + 1, depth=-1)
        elif c == ",":
            self._emit(", ", i + 1)
            self._expect_key = self._depth == 1 and self.text.startswith("{")
        elif c == ":":
            self._emit(": ", i + 1)
        elif c == '"':
            if self._expect_key:
                self._key, self._expect_key = "", False
            else:
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
                if self._key is None:
                    self._emit('"', i + 1)
                    return True
                key, self._key = self._key, None
                if key in self._keys:  # parsed, the last value would take the first one's place
                    self.broken = True
                    return False
                self._keys.add(key)
                self._emit(json.dumps(key, ensure_ascii=False), i + 1)
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
            if self._key is None:
                self.text += json.dumps(char, ensure_ascii=False)[1:-1]
            else:
                self._key += char
            i += used
        self._pos = i
        return False

    def _whole_object(self) -> bool:
        """A nested object: passed on whole, as its parse writes it, once it closes."""
        assert self._nested is not None
        end = self._skip.scan(self._fed, self._pos)
        if end is None:
            self._pos = len(self._fed)
            return False
        try:
            value = json.loads(self._fed[self._nested:end])
        except ValueError:
            self.broken = True
            return False
        self._nested = None
        self._emit(json.dumps(value, ensure_ascii=False), end)
        return True


class _Skip:
    """Finds where a JSON object ends, reading on from where it stopped last time."""

    def __init__(self) -> None:
        self.depth, self.in_string, self.escaped = 0, False, False

    def scan(self, s: str, i: int) -> int | None:
        """The end of the object, or ``None`` if it has not ended within ``s``."""
        while i < len(s):
            c = s[i]
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif c == "\\":
                    self.escaped = True
                elif c == '"':
                    self.in_string = False
            elif c == '"':
                self.in_string = True
            elif c in "{[":
                self.depth += 1
            elif c in "}]":
                self.depth -= 1
                if self.depth == 0:
                    return i + 1
            i += 1
        return None


def _unicode(s: str, i: int) -> tuple[str, int]:
    """The character of the ``\\uXXXX`` escape at ``i`` (a surrogate pair read whole) and how many
    characters it took: 0 while incomplete, -1 when it is no escape."""
    digits = s[i + 2:i + 6]
    if len(digits) < 4:
        return "", 0 if all(ch in _HEX for ch in digits) else -1
    if not all(ch in _HEX for ch in digits):  # int(..., 16) would also take "+041" or "0_41"
        return "", -1
    code = int(digits, 16)
    if 0xD800 <= code < 0xDC00:  # a high surrogate: the escape after it may be its low half
        after = s[i + 6:i + 12]
        if len(after) < 6 and "\\u".startswith(after[:2]) and all(ch in _HEX for ch in after[2:]):
            return "", 0
        if after[:2] == "\\u":
            low = int(after[2:6], 16) if all(ch in _HEX for ch in after[2:6]) else -1
            if 0xDC00 <= low < 0xE000:
                return json.loads(f'"{s[i:i + 12]}"'), 12
    return json.loads(f'"{s[i:i + 6]}"'), 6
