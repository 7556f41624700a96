"""Integers within bounds as digit-level rules, and numbers narrowed by their integer part.

An integer range is exact: ``[lo, hi]`` split by digit count, each count by its leading digits,
as llama.cpp's json-schema-to-grammar does. A number's bounds are exact for an inclusive whole
lower bound alone; otherwise the grammar bounds the integer part and the check does the rest.
No rule admits leading zeros or ``-0``.

The cap: every number the grammar admits is below ``10**308`` in magnitude, so finite as a double
(``float(text)``, and any JSON client that reads numbers as doubles): at most ``MAX_DIGITS`` digits
before the point, and a positive exponent only in bands that keep the digits before the point
plus the exponent within 308 (``EXPONENT_BANDS``). Fractions and negative exponents are free.
"""

from __future__ import annotations

import math

from ._expr import Chars, Expr, Lit, Repeat, alt, seq

__all__ = ["EXPONENT_BANDS", "MAX_DIGITS", "int_range", "number", "number_range"]

#: Digits before the point: 10**308 and above is past what a double holds (1.8e308) or close to it.
MAX_DIGITS = 308
#: (exponent low, high, most digits before the point): a positive exponent in [low, high] follows
#: at most that many digits, so digits + exponent <= 308. Bands, not one rule per digit count:
#: five alternatives keep the rule small, at the price of a few finite numbers ("12e300").
EXPONENT_BANDS = ((0, 9, 299), (10, 99, 209), (100, 199, 108), (200, 299, 8), (300, 307, 1))
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
    if hi is not None and hi >= 10 ** MAX_DIGITS - 1:
        hi = None  # past the cap: the cap bounds it
    options: list[Expr] = []
    top = len(str(hi)) if hi is not None else MAX_DIGITS
    full: list[int] = []  # a run of digit counts every number of which is in range: one rule for all

    def flush() -> None:
        if full:
            options.append(seq(Chars("1-9"), Repeat(_D, full[0] - 1, full[-1] - 1)))
            full.clear()

    for width in range(len(str(lo)), min(top, MAX_DIGITS) + 1):
        a = max(lo, 10 ** (width - 1) if width > 1 else 0)
        b = min(hi, 10 ** width - 1) if hi is not None else 10 ** width - 1
        if a > b:
            continue
        if width > 1 and a == 10 ** (width - 1) and b == 10 ** width - 1:
            full.append(width)
            continue
        flush()
        options.append(_same_length(str(a), str(b)))
    flush()
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
    return Repeat(seq(Lit("."), Repeat(_D, 1, None)), 0, 1)


def _small() -> Expr:
    # d.ddd e-N, N >= 1: below 1 in magnitude, so its integer part is 0 (json.dumps writes 1e-05).
    # "-0*" then a non-zero digit: "e-0" would be no smaller.
    return seq(_D, _frac(), Chars("eE"), Lit("-"), Repeat(Lit("0")), Chars("1-9"), Repeat(_D))


def _lead(digits: int, zero: bool = True) -> Expr:
    """A magnitude's integer part of 1 to ``digits`` digits, no leading zero (nor "0" without ``zero``)."""
    nonzero = seq(Chars("1-9"), Repeat(_D, 0, digits - 1)) if digits > 1 else Chars("1-9")
    return alt(Lit("0"), nonzero) if zero else nonzero


def _exponent(lo: int, hi: int) -> Expr:
    """``e``/``E``, an optional ``+`` and a value in ``[lo, hi]`` (leading zeros allowed, as JSON does)."""
    value = int_range(lo, hi)
    assert value is not None
    return seq(Chars("eE"), Repeat(Lit("+"), 0, 1), Repeat(Lit("0")), value)


def _large(least: int, zero: bool = True) -> Expr:
    """A magnitude written with a positive exponent of at least ``least``, within the bands; without
    ``zero``, its integer part is not 0 (so it is at least ``10**least``)."""
    options = [seq(_lead(digits, zero), _frac(), _exponent(max(lo, least), hi))
               for lo, hi, digits in EXPONENT_BANDS if hi >= least]
    return alt(*options)


def _scientific(a: int, b: int | None) -> list[Expr]:
    """Magnitudes with integer part in ``[a, b]`` written with a positive exponent, as json.dumps
    writes 1e+16: one digit, then ``e+N`` for every N whose whole decade lies in the range."""
    if b is None and a <= 10:
        return [_large(1, zero=False)]
    least = max(1, len(str(a - 1)) if a > 1 else 1)  # 10**N >= a
    most = min(len(str(b + 1)) - 2 if b is not None else EXPONENT_BANDS[-1][1], EXPONENT_BANDS[-1][1])
    while most >= least and b is not None and 10 ** (most + 1) - 1 > b:
        most -= 1
    if most < least:
        return []
    return [seq(Chars("1-9"), _frac(), _exponent(least, most))]


def number() -> Expr:
    """Any JSON number below ``10**308`` in magnitude (finite as a double)."""
    magnitude = alt(seq(_lead(MAX_DIGITS), _frac(), Repeat(seq(Chars("eE"), Lit("-"), Repeat(_D, 1, None)), 0, 1)),
                    _large(0))
    return seq(Repeat(Lit("-"), 0, 1), magnitude)


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
            options.extend(_scientific(a, b))
    # x < 0: its magnitude m = -x has floor(m) in [floor(-hi), floor(-lo)].
    if lo is None or lo < 0:
        a = max(math.floor(-hi), 0) if hi is not None and hi < 0 else 0
        b = math.floor(-lo) if lo is not None else None
        mag = _natural(a, b)
        if mag is not None:
            options.append(seq(Lit("-"), mag, _frac()))
            if a == 0:
                options.append(seq(Lit("-"), _small()))
            options.extend(seq(Lit("-"), e) for e in _scientific(a, b))
    exact = hi is None and lo is not None and lo >= 0 and not lo_open and float(lo).is_integer()
    return (alt(*options) if options else None), exact
