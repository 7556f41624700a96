"""Integers within bounds as digit-level rules, and numbers narrowed by their integer part.

An integer range is exact: ``[lo, hi]`` split by digit count, each count by its leading digits,
as llama.cpp's json-schema-to-grammar does. A number's bounds are exact for an inclusive whole
lower bound alone; otherwise the grammar bounds the integer part and the check does the rest.
No rule admits leading zeros or ``-0``; an unbounded side stops at 16 digits, as elsewhere.
"""

from __future__ import annotations

import math

from ._expr import Chars, Expr, Lit, Repeat, alt, seq

__all__ = ["MAX_DIGITS", "int_range", "number_range"]

MAX_DIGITS = 16
_D = Chars("0-9")


def _digits(n: int) -> Expr:
    return Repeat(_D, n, n) if n > 1 else (_D if n == 1 else Lit(""))


def _same_length(x: str, y: str) -> Expr:
    """Decimal strings of ``len(x)`` digits from ``x`` to ``y`` (both that long, ``x <= y``)."""
    if not x:
        return Lit("")
    if x[0] == y[0]:
        return seq(Lit(x[0]), _same_length(x[1:], y[1:]))
    rest = len(x) - 1
    if x[1:] == "0" * rest and y[1:] == "9" * rest:
        return seq(Chars(f"{x[0]}-{y[0]}"), _digits(rest))
    options: list[Expr] = []
    lo, hi = int(x[0]), int(y[0])
    if x[1:] == "0" * rest:
        start = lo
    else:
        options.append(seq(Lit(x[0]), _same_length(x[1:], "9" * rest)))
        start = lo + 1
    if y[1:] == "9" * rest:
        end = hi
        tail: list[Expr] = []
    else:
        end = hi - 1
        tail = [seq(Lit(y[0]), _same_length("0" * rest, y[1:]))]
    if start <= end:
        options.append(seq(Lit(str(start)) if start == end else Chars(f"{start}-{end}"), _digits(rest)))
    return alt(*options, *tail)


def _natural(lo: int, hi: int | None) -> Expr | None:
    """Non-negative integers in ``[lo, hi]`` (``hi`` None: no upper bound but the digit cap)."""
    if hi is not None and hi < lo:
        return None
    options: list[Expr] = []
    top = len(str(hi)) if hi is not None else MAX_DIGITS
    for width in range(len(str(lo)), min(top, MAX_DIGITS) + 1):
        a = max(lo, 10 ** (width - 1) if width > 1 else 0)
        b = min(hi, 10 ** width - 1) if hi is not None else 10 ** width - 1
        if a > b:
            continue
        if hi is None and a == 10 ** (width - 1) and width > 1:
            # Every wider count is free: one rule for all of them.
            options.append(seq(Chars("1-9"), Repeat(_D, width - 1, MAX_DIGITS - 1)))
            break
        options.append(_same_length(str(a), str(b)))
    return alt(*options) if options else None


def int_range(lo: int | None, hi: int | None) -> Expr | None:
    """Integers in ``[lo, hi]`` (either may be None); None when the range is empty."""
    options: list[Expr] = []
    if lo is None or lo < 0:
        # Negatives: "-" and a magnitude in [max(1, -hi), -lo].
        mag = _natural(max(1, -hi) if hi is not None and hi < 0 else 1, None if lo is None else -lo)
        if mag is not None:
            options.append(seq(Lit("-"), mag))
    if hi is None or hi >= 0:
        nat = _natural(max(lo, 0) if lo is not None else 0, hi)
        if nat is not None:
            options.insert(0, nat)
    return alt(*options) if options else None


def _frac() -> Expr:
    return Repeat(seq(Lit("."), Repeat(_D, 1, 16)), 0, 1)


def _small() -> Expr:
    # d.ddd e-N, N >= 1: below 1 in magnitude, so its integer part is 0 (json.dumps writes 1e-05).
    return seq(_D, _frac(), Chars("eE"), Lit("-"), Repeat(_D, 1, 3))


def number_range(lo: float | None, lo_open: bool, hi: float | None, hi_open: bool) -> tuple[Expr | None, bool]:
    """Numbers between the bounds, narrowed by their integer part: (rule, exact)."""
    options: list[Expr] = []
    # x >= 0: its integer part floor(x) lies in [floor(lo), floor(hi)].
    if hi is None or hi >= 0:
        a = max(math.floor(lo), 0) if lo is not None else 0
        b = math.floor(hi) if hi is not None else None
        nat = _natural(a, b)
        if nat is not None:
            options.append(seq(nat, _frac()))
            if a == 0:
                options.append(_small())
    # x < 0: its magnitude m = -x has floor(m) in [floor(-hi), floor(-lo)].
    if lo is None or lo < 0:
        a = max(math.floor(-hi), 0) if hi is not None and hi < 0 else 0
        b = math.floor(-lo) if lo is not None else None
        mag = _natural(a, b)
        if mag is not None:
            options.append(seq(Lit("-"), mag, _frac()))
            if a == 0:
                options.append(seq(Lit("-"), _small()))
    exact = hi is None and lo is not None and lo >= 0 and not lo_open and float(lo).is_integer()
    return (alt(*options) if options else None), exact
