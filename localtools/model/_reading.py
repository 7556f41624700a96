"""How the decisions read text, in any script.

Every lever that reads the conversation (is a value said, does a tool fit, is a list named, is a
number written) reads it through these functions, so that what works on spaced English works on
Chinese, Japanese or Thai written without spaces, on accents, and on full-width digits:

- text is compared in its NFKC form, lower case, runs of spaces as one ("５０％" is "50%");
- a word is a run of letters and digits in a spaced script, and one character in a script
  written without spaces (``UNSPACED``): "北京今天天气" is six words, not one;
- a value in such a script is said where the conversation holds it as it is written (a run of
  its characters in order), not where its characters occur apart.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["UNSPACED", "normal", "plain", "runs", "unspaced", "words"]

#: Scripts written without spaces between words: Han, Hiragana, Katakana (and their marks),
#: Thai, Lao, Khmer, Myanmar. A word boundary cannot be read off them without a dictionary.
UNSPACED = ("\u3005\u3006\u3007\u3021-\u3029\u3031-\u3035\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff"
            "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f"
            "\U00020000-\U0003134f")
_WORD = re.compile(rf"[{UNSPACED}]|(?:(?![{UNSPACED}])[^\W_])+")
_RUN = re.compile(rf"[{UNSPACED}]+")
_ANY_UNSPACED = re.compile(rf"[{UNSPACED}]")


@lru_cache(maxsize=1024)
def normal(text: str) -> str:
    """``text`` in NFKC form: full-width digits and letters as ASCII, "％" as "%", ligatures apart."""
    return unicodedata.normalize("NFKC", text)


def plain(text: str) -> str:
    """``text`` as values are compared: NFKC, lower case (``casefold``), runs of spaces as one."""
    return " ".join(normal(text).casefold().split())


def words(text: str) -> list[str]:
    """The words of ``text`` (``plain`` first): runs of letters and digits, each character of a
    script written without spaces one word."""
    return _WORD.findall(plain(text))


def unspaced(text: str) -> bool:
    """Whether ``text`` holds a character of a script written without spaces."""
    return _ANY_UNSPACED.search(text) is not None


def runs(text: str) -> list[str]:
    """The runs of ``text`` (``plain``) in scripts written without spaces: "北京" of "北京 Beijing"."""
    return _RUN.findall(plain(text))
