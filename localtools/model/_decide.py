"""Decisions from the model's own distribution where the grammar allows a choice.

Greedy decoding settles "call or answer in text" and "another call or the end of the turn" by
one token, the most probable one the grammar allows. Here the choice is made on probability
mass instead: the model's next-token distribution (``NextTokens``) is split between the
branches the grammar allows, each token counted for the branch its text can still lead to (a
token that fits several, a newline before either another call or the end, is followed one
token further), and the branch is taken when its share passes a threshold calibrated on data
(``localtools calibrate``). The turn is then decoded under the chosen branch's grammar.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from .._errors import UsageError
from .._types import Prompt
from ..backends._base import NextTokens
from ..grammar import Ahead, Grammar, lookahead, matches
from ._reading import UNSPACED, normal, plain, runs, unspaced, words

__all__ = [
    "CALIBRATED",
    "SWITCHES",
    "CopyBias",
    "Decision",
    "DecisionPoint",
    "Decisions",
    "Grounds",
    "adds_option",
    "as_fraction",
    "asked",
    "asking",
    "biased",
    "branch_shares",
    "content_text",
    "conversation_text",
    "covers",
    "cut_word",
    "english",
    "fork",
    "grammar_branch",
    "grounded",
    "guessed",
    "made_of",
    "number_ahead",
    "numbers_in",
    "open_string",
    "readable_numbers",
    "refusing",
    "said",
    "shaped",
    "spoken_options",
    "stated_shape",
    "telling",
    "uncovered",
    "unfit",
    "ungrounded",
    "ungrounded_items",
    "unheld",
]


class DecisionPoint(StrEnum):
    """Where a decision was made."""

    #: Under tool_choice "auto": call a tool, or answer in text.
    CALL = "call"
    #: After a reply's calls: another call, or the end of the turn.
    MORE = "more"
    #: Where the family has a parallel form: the calls as one list, or as single calls.
    FORM = "form"
    #: A repeated call in one reply (same name and arguments) left out.
    DISTINCT = "distinct"
    #: An optional argument whose value the conversation never mentions, left out.
    GROUND = "ground"
    #: Self-consistency: the calls most of ``samples`` replies agree on.
    VOTE = "vote"
    #: Under tool_choice "auto": calls whose required values the conversation does not hold,
    #: made on a share under the ``guess`` threshold, answered in text instead.
    GUESS = "guess"
    #: After a refused guess, the text the model wrote was a call again: the model is told to ask
    #: for the values it would have guessed (``asking``), or that its tools do not do what was asked
    #: (``refusing``, after a refused ``FIT``), and writes its answer again in its own words; taken
    #: when that answer is text (``before``: the call it wrote, ``after``: its answer), else the calls stand.
    ASK = "ask"
    #: Under tool_choice "auto": calls only to tools nothing in the conversation speaks of (``unfit``),
    #: made on a share under the ``fit`` threshold, answered in text instead.
    FIT = "fit"
    #: After a reply's calls, under the ``more`` threshold: values the user listed beside one the
    #: calls used that no call used (``uncovered``), so another call is written for them; not
    #: taken when the call written used none of them.
    COVER = "cover"
    #: A number argument the user wrote as a percentage, written whole for a tool that does not
    #: take percentages: given as its fraction (``as_fraction``: "a rate of 5%" as 0.05).
    PERCENT = "percent"
    #: An optional argument the conversation names (``spoken_options``) that a call left out: the
    #: reply decoded again with it required, taken when the value the model writes is grounded.
    OPTION = "option"
    #: Under tool_choice "auto", a text answer to the user's request: the turn decoded again as a
    #: call, taken when the call is the request in its own words (``Grounds.holds``).
    HELD = "held"
    #: A call already made and answered (its result is in the conversation), still written after
    #: the repairs: left out, the turn ends in the reply's other calls or, under "auto", in the
    #: model's answer under the text branch (``calls``: how many were left out).
    REPEAT = "repeat"
    #: A string argument whose description states its form (``stated_shape``: a date format, a
    #: city and its state) written under that form as its pattern (``after``: the value written).
    SHAPE = "shape"
    #: Inside a string, the rest of a word of the conversation the string stopped inside got the
    #: ``word`` bonus and changed the greedy pick (``CopyBias``): the reply decoded again without
    #: the bonuses gives ``before``.
    WORD = "word"
    #: A number the reply was writing went on as one of the conversation's (or stopped there) under
    #: the ``number`` bonus, which changed the greedy pick; ``before`` as for ``WORD``.
    NUMBER = "number"
    #: Inside a string, a span of the conversation went on under the ``copy`` bonus, which changed
    #: the greedy pick; ``before`` as for ``WORD``.
    COPY = "copy"
    #: Under tool_choice "auto", a text answer that writes a user's message or the model's own
    #: earlier answer back (``echoed``): the turn decoded again as a call, taken unless it repeats a
    #: call already answered or ``guess`` or ``fit`` refuse it (``argument``: the message echoed;
    #: ``before``: the echo, ``after``: the reply with the call).
    ECHO = "echo"
    #: Under tool_choice "auto", a text answer that writes an offered tool as code (``told``: how
    #: to call it, instead of calling it): the turn decoded again as a call to the tools it wrote,
    #: taken as an ``ECHO`` is (``argument``: the tools named).
    TOLD = "told"


@dataclass(frozen=True)
class Decisions:
    """How ``Model.chat`` decides where the grammar allows a choice.

    ``call``: under tool_choice "auto", the share of the model's probability (call against text)
    at which it calls; ``None`` leaves it to the greedy token. ``more``: after each call, the share
    (another call against the end of the turn) at which it writes another, up to ``max_calls``;
    ``None``: greedy. ``form``: where the family has a parallel form (``Family.parallel_forms``,
    one list holding every call), the share at which the calls are written as that list rather
    than as single calls; the grammar then admits both. ``distinct``: a reply's repeat of one of
    its own calls (same name and arguments) is left out. ``ground``: an optional argument is kept
    only when its value is grounded: written in the conversation (the user's words, a tool's
    result), or the schema's default; required arguments are never left out; ``closed``: booleans
    (by the words of their key) and ``enum`` values are judged too (English requests to English
    tools: elsewhere the user says them in words of their own). ``k`` tokens of the
    distribution are read at each step, a token that fits both branches followed up to ``depth``
    tokens deep. ``guess``: under tool_choice "auto", a reply whose calls are a guess (at most half
    of their required values are in the conversation, ``guessed``) and whose call share is under
    this threshold is answered in text instead; a call the model is surer of stands; a further call
    ``more`` added is left out when it is a guess made on a share (another call against the end) under
    this threshold. ``copy``: inside
    a string the reply is writing, the tokens that go on with a span of the conversation the string
    so far matches (the user's words, a tool's result) get this bonus on their logits, greedy
    and drawn picks (``CopyBias``; backends with ``Capabilities.biases``). ``fit``: under tool_choice "auto", a
    reply calling only tools that nothing in the conversation speaks of (``unfit``: no word of their name
    or description, and a value the model chose: ``made_of``) and whose call share is under this
    threshold is answered in text, as a refused guess is
    (a further call, on the share that added it, is left out). ``word``: inside a string, where the
    string so far stops inside a word of the conversation wherever it starts one there ("C" of "C#",
    "Christian" of "Christianity"), the rest of that word gets this bonus (``cut_word``; the
    same picks and backends with ``Capabilities.biases``). ``number``: where a number the reply writes so far
    starts one the conversation writes ("50 million" as 50000000, "5%" as 5 or 0.05), its next
    digit gets this bonus, and where it is whole its digits lose it (``number_ahead``; the same
    picks and backends).
    ``cover``: where ``more`` would end the turn but the user listed values beside one the calls
    used that no call used (``uncovered``: "seasons 2017, 2018 and 2019" after a call for 2017),
    another call is written, and kept only when it uses one of them (``covers``) and ``more``'s
    own judgement of a further call keeps it. ``percent``: a number argument the user wrote as a
    percentage and the reply wrote whole is given as its fraction where the tool does not take
    percentages ("a discount rate of 5%" as 0.05; ``as_fraction``). ``option``: an optional
    argument a call left out whose name the conversation speaks of ("the unit of measurement",
    "details of a record": ``spoken_options``) is asked of the model: the reply is decoded again
    from where that call could take one more argument, with it required, and taken when the value
    written is grounded (as ``ground`` reads it), is not the argument's default, and nothing else
    in the reply changed. ``shape``: a string argument whose description states the date format
    it takes ("in the format mm-dd-yyyy") is written in it: the grammar takes that format as the
    argument's ``pattern`` (``stated_shape``; a city and its state as "Denver, CO" too); on every
    backend. ``held``: under tool_choice "auto", a text answer to the user's request (no tool
    result since) is decoded again as a call, taken when the call is the request in its own words
    (``Grounds.holds``: its values and its tool's name and description hold every word that says
    what the request is about, and the conversation every required value): the mirror of
    ``guess`` and ``fit``.
    Backends that cannot give their distribution (``Capabilities.next_tokens``)
    decide greedily, and say so in the result. ``other``: on a request written in a language the
    word readings do not read (not English: ``Grounds.english``), ``guess`` and ``fit`` have no
    words to weigh, and refuse only on a share under the lower of their threshold and this one:
    where the model's own distribution leans to text. ``samples``: self-consistency, the reply decided so
    far and ``samples - 1`` more drawn at ``temperature`` / ``top_p`` under the same grammar; the
    calls most of them agree on (name and arguments, in any order; "no call" is one answer) win,
    the first reply breaking ties. It works on every backend, on turns that are not streamed.
    """

    call: float | None = None
    more: float | None = None
    form: float | None = None
    guess: float | None = None
    copy: float | None = None
    fit: float | None = None
    word: float | None = None
    number: float | None = None
    cover: bool = False
    percent: bool = False
    option: bool = False
    shape: bool = False
    held: bool = False
    echo: bool = False
    told: bool = False
    distinct: bool = False
    ground: bool = False
    closed: bool = False
    other: float = 0.3
    samples: int = 1
    temperature: float = 0.7
    top_p: float = 0.95
    max_calls: int = 5
    k: int = 20
    depth: int = 3

    def __post_init__(self) -> None:
        for name in ("call", "more", "form", "guess", "fit", "other"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise UsageError(f"Decisions.{name} must be a share from 0 to 1 (or None for greedy), got {value!r}")
        for name in ("copy", "word", "number"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 100.0:
                raise UsageError(f"Decisions.{name} must be a logit bonus from 0 to 100 (or None), got {value!r}")
        if self.samples < 1 or not self.temperature > 0 or not 0 < self.top_p <= 1:
            raise UsageError(f"Decisions needs samples of at least 1, a temperature above 0 and top_p in (0, 1], got "
                             f"{self.samples}, {self.temperature}, {self.top_p}")
        if self.max_calls < 1 or self.k < 1 or self.depth < 1:
            raise UsageError(f"Decisions needs max_calls, k and depth of at least 1, got {self.max_calls}, {self.k}, "
                             f"{self.depth}")

    @property
    def active(self) -> bool:
        return self.call is not None or self.more is not None or self.form is not None or self.guess is not None or \
            self.copy is not None or self.fit is not None or self.word is not None or \
            self.number is not None or any(getattr(self, k) for k in SWITCHES) or self.samples > 1

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decisions:
        """From a calibration file's ``decisions`` object (unknown keys are refused)."""
        known = set(cls.__dataclass_fields__)
        if unknown := sorted(set(data) - known):
            raise UsageError(f"unknown decision setting {', '.join(unknown)}; expected {', '.join(sorted(known))}")
        for key, value in data.items():
            switch = key in SWITCHES
            if switch != isinstance(value, bool) or not isinstance(value, bool | int | float):
                raise UsageError(f"decision setting {key} takes {'true or false' if switch else 'a number'}, got "
                                 f"{value!r}")
        return cls(**dict(data))


#: The settings ``localtools calibrate`` chooses (the ones its probes replay); a calibration
#: file holds these and nothing else.
CALIBRATED = ("call", "more", "form", "guess", "fit", "distinct")


#: The settings that are on or off (the rest are shares, bonuses and counts), in the order a
#: summary names them.
SWITCHES = ("cover", "percent", "option", "shape", "held", "echo", "told", "distinct", "ground", "closed")


@dataclass(frozen=True)
class Decision:
    """One decision of a turn, for the trace and the bench."""

    point: DecisionPoint
    #: The model's share for the first branch (call; another call); ``None`` when it could not be read.
    share: float | None
    threshold: float | None
    #: Whether the first branch was taken (it called; it wrote another call; the repeat was left out;
    #: the guess was answered in text).
    taken: bool
    #: Calls in the reply when it was made (``MORE``), or the repeated call's position (``DISTINCT``).
    calls: int = 0
    #: The reply's text when it was made (``MORE``, ``FORM``): the reply the turn ends with if it is not
    #: taken; for ``FORM``, only its opening where the reply stopped as it began a single call.
    reply: str = ""
    #: The argument it is about (``GROUND``, ``PERCENT``, ``OPTION``...): ``tool.argument``.
    argument: str = ""
    #: What the decision changed, as JSON text: the value (or the reply's text) before and after;
    #: ``None`` where there was none (an argument left out has no ``after``, one added no ``before``).
    before: str | None = None
    after: str | None = None


#: Whether a branch can still follow: (the reply's text so far, a token's text after it, whether the
#: token ends the reply; an ending token's text is not part of the reply).
Branch = Callable[[str, str, bool], bool]


def grammar_branch(grammar: Grammar | None) -> Branch:
    """A branch that holds while the text is a prefix of ``grammar``'s language (whole, at an end)."""
    # The model's best tokens are asked about after one text: it is walked once, and a token
    # whose first characters nothing there can take is refused without walking the text again.
    aheads: dict[str, Ahead] = {}

    def fits(text: str, added: str, ended: bool) -> bool:
        if grammar is None:
            return False
        ahead = aheads.get(text)
        if ahead is None:
            ahead = aheads[text] = lookahead(grammar, text)
        if ended:
            return ahead.whole
        if not added:
            return ahead.open
        return not ahead.refuses(added) and matches(grammar, text + added, prefix=True)

    return fits


def branch_shares(source: NextTokens, prompt: Prompt, reply: Sequence[int], text: str, branches: Mapping[str, Branch],
                  *, k: int, depth: int, floor: float = 0.01) -> dict[str, float]:
    """The probability mass of each branch after ``prompt`` + ``reply`` (whose text is ``text``),
    normalised over the mass that fits some branch. A token that fits several branches is followed
    one token further (to ``depth``) when it carries at least ``floor``; mass no branch takes
    (tokens the grammar refuses, the tail past the top ``k``) is left out. Empty when no mass fits."""
    mass = dict.fromkeys(branches, 0.0)

    def walk(ids: list[int], so_far: str, weight: float, level: int) -> None:
        for choice in source.next_tokens(prompt, ids, k=k):
            p = weight * math.exp(choice.logprob)
            added = "" if choice.end else choice.text
            fits = [name for name, branch in branches.items() if branch(so_far, added, choice.end)]
            if len(fits) == 1:
                mass[fits[0]] += p
            elif fits and not choice.end and level < depth and p >= floor:
                walk([*ids, choice.token], so_far + added, p, level + 1)

    walk(list(reply), text, 1.0, 1)
    total = sum(mass.values())
    return {name: m / total for name, m in mass.items()} if total > 0 else {}


def decide(source: NextTokens, prompt: Prompt, point: DecisionPoint, threshold: float, first: Grammar | None,
           second: Grammar | None, decisions: Decisions, *, reply: Sequence[int] = (), text: str = "",
           calls: int = 0, whole: str = "") -> Decision:
    """Whether to take the ``first`` branch (its grammar) over the ``second`` after ``prompt`` and
    ``reply`` (whose text is ``text``): when its share of the model's probability reaches
    ``threshold``. When no mass fits either branch, the share is ``None`` and the first branch is
    not taken. ``whole``: the finished reply the decision was made in, kept in the ``Decision``."""
    shares = branch_shares(source, prompt, reply, text, {"first": grammar_branch(first), "second": grammar_branch(second)},
                           k=decisions.k, depth=decisions.depth)
    share = shares.get("first")
    return Decision(point, share, threshold, share is not None and share >= threshold, calls, whole)


#: A fork found this many characters before the branches part is too far back to decide on.
_FORK_SLACK = 24


def fork(source: NextTokens, reply: Sequence[int], text: str, grammar: Grammar) -> tuple[list[int], str] | None:
    """Where a finished reply could still have gone on into ``grammar`` (one more call): the last
    token boundary at or before the end of the longest prefix of ``text`` that ``grammar`` can
    continue, as (the reply's tokens there, their text). One form of calls parts there at the end
    of the reply (a tag after the last closing one), a list form before its closing bracket.
    ``None`` when no token boundary lies near it."""
    lo, hi = 0, len(text)
    while lo < hi:  # a prefix-closed language: the longest prefix it continues, by bisection
        mid = (lo + hi + 1) // 2
        if matches(grammar, text[:mid], prefix=True):
            lo = mid
        else:
            hi = mid - 1
    # The last boundary whose text is no longer than that prefix, by bisection too (over an
    # engine, each reading of a reply's text is a request): a token's text only lengthens it.
    first, last = 0, len(reply)
    while first < last:
        mid = (first + last + 1) // 2
        if len(source.reply_text(reply[:mid])) <= lo:
            first = mid
        else:
            last = mid - 1
    for i in range(first, -1, -1):
        so_far = source.reply_text(reply[:i])
        if len(so_far) <= lo and text.startswith(so_far):
            return (list(reply[:i]), so_far) if lo - len(so_far) <= _FORK_SLACK else None
    return None


def distinct(keys: Sequence[str]) -> tuple[list[int], list[Decision]]:
    """Of a reply's calls (by ``call_key``), the positions kept (each call's first occurrence) and
    a decision for each repeat left out."""
    seen: set[str] = set()
    kept, dropped = [], []
    for index, key in enumerate(keys):
        if key in seen:
            dropped.append(Decision(DecisionPoint.DISTINCT, None, None, True, index))
        else:
            seen.add(key)
            kept.append(index)
    return kept, dropped


def _plain(text: str) -> str:
    return plain(text)


def grounded(value: Any, conversation: str, schema: Mapping[str, Any]) -> bool:
    """Whether an argument's ``value`` is grounded: one of its ``defaults`` (as ``_same`` compares:
    ``true`` is not ``1``, a string case-blind), or written in
    ``conversation`` (``_plain`` text; strings case- and spacing-blind, numbers as written or as
    ``numbers_in`` reads them: "$400,000", "50 million", "4%" as 0.04; every item of a list or
    object). A boolean has no words of its own: only its default grounds it."""
    if isinstance(schema, Mapping) and _same(value, defaults(schema)):
        return True
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip()) and _plain(value) in conversation
    if isinstance(value, int | float):
        forms = {repr(value), f"{value:g}"} | ({str(int(value))} if float(value).is_integer() else set())
        # A whole number as written: 3 is not in "35.5", nor 5 in "2.5"; or in words ("two tickets").
        return any(re.search(rf"(?<![\d.]){re.escape(form)}(?!\.?\d)", conversation) for form in forms) or \
            (float(value).is_integer() and any(_NUMBER_WORDS.get(w) == value for w in _words(conversation))) or \
            _plain_number(float(value)) in numbers_in(conversation)
    items = schema.get("items", {}) if isinstance(schema, Mapping) else {}
    if isinstance(value, list):
        return bool(value) and all(grounded(v, conversation, items if isinstance(items, Mapping) else {}) for v in value)
    if isinstance(value, dict):
        props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
        return bool(value) and all(grounded(v, conversation, props.get(k, {})) for k, v in value.items())
    return False


#: "Default is 52", "Defaults to false", "default value is 'high'", "(default to 'fasta')": the
#: default a description states in words, quoted or one bare word or number.
_STATED_DEFAULT = re.compile(
    r"\bdefaults?(?:\s+value)?(?:\s+(?:is|to|of))?\s*[:=]?\s*(?:'([^']*)'|\"([^\"]*)\"|(-?\d+(?:\.\d+)?(?![\w.]\w)|[\w+-]+))",
    re.IGNORECASE)


@lru_cache(maxsize=256)
def _stated(description: str) -> tuple[str, ...]:
    return tuple(next(g for g in m.groups() if g is not None) for m in _STATED_DEFAULT.finditer(description))


def stated_default(description: Any) -> tuple[Any, ...]:
    """The defaults a ``description`` states in words (tools written for prompts say "Default is
    52" rather than ``"default": 52``), each read as JSON reads it where it can (52, false, null),
    else as the text it is."""
    if not isinstance(description, str):
        return ()
    out: list[Any] = []
    for text in _stated(description):
        try:
            out.append(json.loads(text.lower() if text.lower() in ("true", "false", "null") else text))
        except ValueError:
            out.append(text)
    return tuple(out)


#: A date (and time) format a description states: "in the format mm-dd-yyyy", "formatted as
#: 'YYYY-MM-DD HH:MM:SS'".
_DATE_FORMAT = re.compile(r"(?<![\w])(yyyy|mm|dd)([-/.])(yyyy|mm|dd)\2(yyyy|mm|dd)((?:[ T]hh:mm(?::ss)?)?)(?![\w:])",
                          re.IGNORECASE)
_DATE_PARTS = {"yyyy": r"\d{4}", "mm": r"(?:0[1-9]|1[0-2])", "dd": r"(?:0[1-9]|[12]\d|3[01])"}


def stated_shape(schema: Any) -> str | None:
    """The pattern of the form a string's description states it takes: the one date (or date and
    time) format it names ("in the format mm-dd-yyyy": two digits, a dash, two, a dash, four;
    months and days in range), or a place in two parts it names and shows ("The city and state,
    e.g. Denver, CO": words, a comma, words); with the literals the description quotes besides
    ('dontcare', 'null') and the schema's default as the other values it takes. ``None`` for a
    description that states no form, several formats ("such as", "or"), a format that is its
    stated default (a property that names a format), or a schema that already says its form
    (``pattern``, ``format``, ``enum``, ``const``)."""
    if not isinstance(schema, Mapping) or schema.get("type") != "string" or \
            any(k in schema for k in ("pattern", "format", "enum", "const")):
        return None
    description = schema.get("description")
    if not isinstance(description, str):
        return None
    found = _date_shape(description) or _place_shape(description)
    if found is None:
        return None
    shape, rest = found
    others = [re.escape(x) for x in re.findall(r"'([^']+)'", rest) if x.strip()]
    if isinstance(schema.get("default"), str) and schema["default"]:
        others.append(re.escape(schema["default"]))
    return "^(?:" + "|".join([shape, *dict.fromkeys(others)]) + ")$"


def _date_shape(description: str) -> tuple[str, str] | None:
    """The pattern of the date format ``description`` states, and the description without it."""
    if "format" not in description.lower():
        return None
    found = list(_DATE_FORMAT.finditer(description))
    if len(found) != 1:
        return None
    m = found[0]
    parts = [m.group(i).lower() for i in (1, 3, 4)]
    # The description less the format, quoted or not: its other quoted words are values it takes.
    rest = _DATE_FORMAT.sub("", re.sub(r"'[^']*'", lambda q: "" if _DATE_FORMAT.search(q.group(0)) else q.group(0),
                                       description))
    if sorted(parts) != ["dd", "mm", "yyyy"] or re.search(r"such as|\bor\b|hh:mm", rest, re.IGNORECASE) or \
            any(isinstance(d, str) and d.lower() == m.group(0).lower() for d in stated_default(description)):
        return None
    shape = re.escape(m.group(2)).join(_DATE_PARTS[p] for p in parts)
    if m.group(5):
        shape += re.escape(m.group(5)[0]) + r"\d{2}:\d{2}" + (r":\d{2}" if m.group(5).lower().endswith(":ss") else "")
    return shape, rest


#: "The city and state, e.g. Denver, CO": a place the description names in two parts and shows
#: with a comma between them.
_PLACE = re.compile(r"\bcity\s+and\s+(?:the\s+)?(?:state|country|province|region)\b", re.IGNORECASE)
_PLACE_EXAMPLE = re.compile(r"\be\.g\.?,?\s*'?([^,'.;]+, ?[^,'.;]+)", re.IGNORECASE)


def _place_shape(description: str) -> tuple[str, str] | None:
    """Words, a comma and words where ``description`` names a city and its state (or country)
    and shows one so; and the description without the example."""
    example = _PLACE_EXAMPLE.search(description)
    if not _PLACE.search(description) or example is None:
        return None
    return r"[^,]+, ?[^,]+", description[:example.start()] + description[example.end():]


def shaped(specs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool specs (``{"type": "function", "function": {...}}``) with each top-level string
    argument whose description states its form (``stated_shape``: a date format, a city and its
    state) given that ``pattern``: the grammar then writes the value in the form the tool asked for."""
    out = []
    for spec in specs:
        function = spec.get("function") if isinstance(spec, Mapping) else None
        params = function.get("parameters") if isinstance(function, Mapping) else None
        props = params.get("properties") if isinstance(params, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(params, Mapping) or not isinstance(props, Mapping):
            out.append(dict(spec))
            continue
        patterns = {k: p for k, v in props.items() if (p := stated_shape(v)) is not None}
        if not patterns:
            out.append(dict(spec))
            continue
        props = {k: ({**v, "pattern": patterns[k]} if k in patterns else v) for k, v in props.items()}
        out.append({**spec, "function": {**function, "parameters": {**params, "properties": props}}})
    return out


def defaults(prop: Mapping[str, Any]) -> tuple[Any, ...]:
    """An argument's defaults: its schema's ``default`` and the one its description states in words
    (``stated_default``)."""
    return (*((prop["default"],) if "default" in prop else ()), *stated_default(prop.get("description")))


def _same(value: Any, candidates: Sequence[Any]) -> bool:
    """Whether ``value`` is one of ``candidates``, a boolean only as a boolean (True is not 1) and
    a string case- and spacing-blind."""
    for other in candidates:
        if isinstance(value, bool) or isinstance(other, bool):
            if isinstance(value, bool) and isinstance(other, bool) and value == other:
                return True
        elif isinstance(value, str) and isinstance(other, str):
            if value.strip() and _plain(value) == _plain(other):
                return True
        elif isinstance(value, int | float) and isinstance(other, int | float) and value == other:
            return True
    return False


_NUMBER_WORDS = {w: i for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                              "nine", "ten", "eleven", "twelve"])}

#: Words compared by their first this-many characters: "vaporization" is grounded by "vaporizing".
_STEM = 5


def _words(text: str) -> list[str]:
    return words(text)


def _stem(word: str) -> str:
    """``word``'s first ``_STEM`` characters, a plural's "s" left off first ("tolls" as "toll")."""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:_STEM]


@lru_cache(maxsize=32)
def _stems(text: str) -> frozenset[str]:
    # Cached: ground, guess and their asking read the same conversation's stems per call and per argument.
    return frozenset(_stem(w) for w in _words(text))


def _mentioned(value: Any, conversation: str, stems: frozenset[str], schema: Mapping[str, Any], *,
               own_words: bool = False) -> bool:
    """``grounded``, a string every word of which begins (``_stem``) like a word of the
    conversation, a code (``_CODE``) that abbreviates words of it, or a list or object every
    item of which is mentioned. ``own_words``: only as the conversation says it, never by a
    default alone nor found inside a longer word (a number still as ``grounded`` reads numbers)."""
    if own_words:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return grounded(value, conversation, {})
    elif grounded(value, conversation, schema):
        return True
    if isinstance(value, list):
        items = schema.get("items", {}) if isinstance(schema, Mapping) else {}
        return bool(value) and all(_mentioned(v, conversation, stems, items if isinstance(items, Mapping) else {},
                                              own_words=own_words) for v in value)
    if isinstance(value, dict):
        props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
        props = props if isinstance(props, Mapping) else {}
        return bool(value) and all(_mentioned(v, conversation, stems, props.get(k, {}), own_words=own_words)
                                   for k, v in value.items())
    if isinstance(value, str) and _CODE.fullmatch(value.strip()):
        return _abbreviated(value.strip().lower(), _words(conversation))
    if isinstance(value, str) and unspaced(value):
        # A script without spaces has no word boundaries to stem at: each of the value's runs in
        # it is said where the conversation writes that run as it is ("北京", not "京" and "北" apart).
        spaced = _words(re.sub("|".join(map(re.escape, runs(value))), " ", _plain(value)))
        return all(run in conversation for run in runs(value)) and all(_stem(w) in stems for w in spaced)
    found = _words(value) if isinstance(value, str) else []
    return bool(found) and all(_stem(w) in stems for w in found)


#: Words of an argument's name that say nothing of what it is about ("include_history").
_FILLER = frozenset(["include", "includes", "is", "use", "with", "get", "show", "has", "enable", "allow", "should",
                     "return", "add", "want", "need", "do", "flag"])


def _said_of(key: str, stems: frozenset[str]) -> bool:
    """Whether the conversation speaks of what a boolean argument named ``key`` is about: every
    word of its name but the filler ("include_human_impact": "human", "impact")."""
    words = _key_words(key)
    # A short word may be a clipped one: "stats" is said by "statistics".
    return bool(words) and all(_stem(w) in stems or (len(_stem(w)) >= 4 and any(s.startswith(_stem(w)) for s in stems))
                               for w in words)


#: A code that may stand for words: "USD", "JPY", "NYC".
_CODE = re.compile(r"[A-Z]{2,5}")


def _abbreviated(code: str, words: Sequence[str]) -> bool:
    """Whether ``code`` abbreviates a run of ``words``: each word gives the code its initial and
    then any of its later letters, in order ("jpy": "japanese yen"; "usd": "us dollars")."""

    def taken(part: str, rest: str) -> bool:  # ``part`` a subsequence of ``rest``
        it = iter(rest)
        return all(ch in it for ch in part)

    def from_word(at: int, j: int) -> bool:
        if at == len(code):
            return True
        if j >= len(words) or not words[j].startswith(code[at]):
            return False
        return any(taken(code[at + 1:end], words[j][1:]) and from_word(end, j + 1)
                   for end in range(len(code), at, -1))

    return any(from_word(0, j) for j, word in enumerate(words) if word.startswith(code[0]))


def guessed(calls: Sequence[tuple[str, Mapping[str, Any]]], schemas: Mapping[str, Any], conversation: str) -> bool:
    """Whether ``calls`` (name, arguments) are a guess: at most half of their required values are
    in ``conversation`` (``conversation_text``), a string counted when each of its words begins as
    one of the conversation's does (a paraphrase: "total_points" for "total points"), or when it is
    a code the conversation spells out ("JPY" for "Japanese Yen"). Values with no words of their
    own (a boolean, one of an ``enum``) count neither way; calls with none of the rest are no guess."""
    verdicts = _required_values(calls, schemas, conversation)
    held = sum(1 for *_, ok in verdicts if ok)
    return bool(verdicts) and 2 * held <= len(verdicts)


def unheld(calls: Sequence[tuple[str, Mapping[str, Any]]], schemas: Mapping[str, Any], conversation: str
           ) -> list[tuple[str, str]]:
    """The required arguments of ``calls`` (tool, argument) whose values ``guessed`` finds nowhere
    in ``conversation``, in order, each once."""
    out: list[tuple[str, str]] = []
    for name, key, ok in _required_values(calls, schemas, conversation):
        if not ok and (name, key) not in out:
            out.append((name, key))
    return out


def _required_values(calls: Sequence[tuple[str, Mapping[str, Any]]], schemas: Mapping[str, Any], conversation: str
                     ) -> list[tuple[str, str, bool]]:
    """Each required value of ``calls`` that has words of its own: (tool, argument, mentioned)."""
    stems = _stems(conversation)
    out = []
    for name, arguments in calls:
        schema = schemas.get(name)
        if not isinstance(schema, Mapping):
            continue
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            value = arguments.get(key)
            prop = props.get(key, {}) if isinstance(props, Mapping) else {}
            if key not in arguments or isinstance(value, bool) or value is None or \
                    (isinstance(prop, Mapping) and "enum" in prop):
                continue
            out.append((name, key, _mentioned(value, conversation, stems, prop if isinstance(prop, Mapping) else {})))
    return out


#: Words that say nothing of what a tool is for: function words, and the verbs and nouns any
#: tool's name or description and any request may use ("get", "calculate", "details"), with their
#: inflections (a stem would also take "species" for "specific", "computer" for "compute").
_GENERIC = frozenset({
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "based", "be", "been", "being",
    "by", "calculate", "calculated", "calculates", "calculating", "calculation", "can", "check", "checked",
    "checking", "checks", "compute", "computed", "computes", "computing", "could", "current", "data", "day",
    "detail", "details", "determine", "determined", "determines", "determining", "do", "does", "done", "each",
    "etc", "every", "fetch", "fetched", "fetches", "fetching", "find", "finding", "finds", "for", "from",
    "function", "get", "gets", "getting", "give", "given", "gives", "giving", "how", "i", "if", "in", "info",
    "information", "into", "is", "it", "its", "just", "let", "list", "listed", "listing", "lists", "me", "my",
    "no", "not", "of", "on", "or", "our", "out", "over", "please", "provide", "provided", "provides",
    "providing", "retrieve", "retrieved", "retrieves", "retrieving", "return", "returned", "returning",
    "returns", "search", "searched", "searches", "searching", "show", "showed", "showing", "shows", "some",
    "specific", "such", "tell", "telling", "tells", "than", "that", "the", "their", "them", "then", "there",
    "these", "this", "those", "to", "tool", "up", "us", "use", "used", "uses", "using", "value", "values",
    "want", "wanted", "wants", "was", "way", "we", "what", "when", "where", "which", "who", "whom", "whose",
    "why", "will", "with", "would", "you", "your"
})


def _content(text: str) -> frozenset[str]:
    """The stems (``_stem``) of ``text``'s words that say what it is about (``_GENERIC`` and
    numbers aside); a name's parts count as words ("calculate_ROI", "getWeather")."""
    spaced = _words(re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text))
    # In a script without spaces a word is read as each pair of characters in a row ("天气" of
    # "北京今天天气"): one character says too little, and no dictionary says where words end.
    pairs = {run[i:i + 2] for run in runs(text) for i in range(len(run) - 1)}
    return frozenset({_stem(w) for w in spaced if len(w) > 2 and w not in _GENERIC and not w.isdigit()
                      and not unspaced(w)} | pairs)


def _tool_content(name: str, description: str) -> frozenset[str]:
    """What a tool says it is about (``_content``): the words of its name (split at ``.``, ``_`` and
    capitals) and of its description."""
    return _content(f"{name.replace('.', ' ').replace('_', ' ')} {description}")


def unfit(calls: Sequence[tuple[str, Mapping[str, Any]]], described: Mapping[str, str], conversation: str,
          schemas: Mapping[str, Any] | None = None, earlier: Sequence[tuple[str, Mapping[str, Any]]] = (), *,
          closed: bool = True) -> list[str]:
    """The tools ``calls`` name (in order, each once) when nothing in ``conversation`` speaks of
    any of them: no word of a tool's name or of its description (``described``) begins
    (``_stem``) as a word the conversation uses, generic words aside ("sunset" is not "sunrise";
    "perimeter of a rectangle" is not ``solve_quadratic_equation``). Empty when one of them is
    spoken of: that call answers the conversation. With ``schemas``, empty too when the calls are
    made whole of what the conversation says (``made_of``; further calls after ``earlier`` ones each
    with a value those did not use): a word check cannot see that "raining" speaks of
    ``get_weather``, but a call with nothing of the model's own in it is no guess at a tool that
    does something else. Calls with a value the model chose stay unfit, and so does a further call
    that only uses again what the reply's calls already did (``get_time(zone="Paris")`` beside
    ``get_weather(city="Paris")``)."""
    stems = _content(conversation)
    names = list(dict.fromkeys(name for name, _ in calls))
    if any(_tool_content(name, described.get(name, "")) & stems for name in names):
        return []
    if schemas is not None and made_of(calls, schemas, conversation, earlier, closed=closed):
        return []
    return names


def _own_values(arguments: Mapping[str, Any]) -> set[Any]:
    """A call's values that have words of their own (not booleans), each as ``_normal`` compares it."""
    return {_normal(v) for v in arguments.values() if not isinstance(v, bool) and v is not None}


def _normal(value: Any) -> Any:
    """``value`` compared as said: strings case- and spacing-blind, 100 as 100.0, every item alike."""
    if isinstance(value, str):
        return _plain(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _plain_number(float(value))
    if isinstance(value, list):
        return tuple(_normal(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, repr(_normal(v))) for k, v in value.items()))
    return repr(value)


def made_of(calls: Sequence[tuple[str, Mapping[str, Any]]], schemas: Mapping[str, Any], conversation: str,
            earlier: Sequence[tuple[str, Mapping[str, Any]]] = (), *, closed: bool = True) -> bool:
    """Whether every value ``calls`` write, required or optional, is said in the conversation
    (``conversation_text``: every message but the model's own) in its own words (``_mentioned``,
    ``own_words``: no default the tool states, no piece of a longer word; a boolean only where the
    words of its key are said), each call to an offered tool with its required arguments, with at least one value
    that is not a boolean and that no call before it in the reply used (``earlier``, then the
    ones before it in ``calls``): ``get_weather(city="Oslo")`` for "Is it raining in Oslo right
    now?", and then ``get_weather(city="Bergen")`` for "... and in Bergen?"; not
    ``draw_circle(radius=5, unit="m")`` for "a width of 5m" (the "m" is a piece of "5m"), nor
    ``get_time(zone="Oslo")`` beside ``get_weather(city="Oslo")``."""
    used = set().union(*(_own_values(arguments) for _, arguments in earlier))
    stems = _stems(conversation)
    for name, arguments in calls:
        schema = schemas.get(name)
        if not isinstance(schema, Mapping) or any(key not in arguments for key in schema.get("required", ())):
            return False
        props = schema.get("properties", {})
        props = props if isinstance(props, Mapping) else {}
        own = _own_values(arguments)
        if not own - used:
            return False
        used |= own
        for key, value in arguments.items():
            prop = props.get(key, {})
            prop = prop if isinstance(prop, Mapping) else {}
            if not closed and (isinstance(value, bool) or "enum" in prop or "const" in prop):
                continue  # said in words of the user's own ("in Fahrenheit": "fahrenheit"), or not at all
            said = _said_of(key, stems) if isinstance(value, bool) else \
                _mentioned(value, conversation, stems, prop, own_words=True)
            if not said:
                return False
    return bool(calls)


@dataclass(frozen=True)
class Grounds:
    """What a turn's calls are judged against (``guessed``, ``unheld``, ``unfit``): the
    conversation's text and the offered tools' schemas and descriptions, read once."""

    conversation: str
    schemas: Mapping[str, Any]
    described: Mapping[str, str]
    #: What the last message asks (``_content`` of its text) when it is the user's; empty otherwise.
    asked: frozenset[str] = frozenset()
    #: Whether the request is written in English, the language the word readings read (``english``).
    english: bool = True
    #: ``made_of`` reads booleans and enum values too (``Decisions.closed``).
    closed: bool = True

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, Any]], specs: Sequence[Mapping[str, Any]], *,
           closed: bool = True) -> Grounds:
        """From a conversation and its tools (``{"type": "function", "function": {...}}``)."""
        fns = [spec["function"] for spec in specs]
        last = messages[-1] if messages else {}
        request = content_text(last.get("content")) if last.get("role") == "user" else None
        return cls(conversation_text(messages), {fn["name"]: fn.get("parameters") or {} for fn in fns},
                   {fn["name"]: str(fn.get("description") or "") for fn in fns}, _content(request or ""),
                   english(asked(messages)), closed)

    def threshold(self, threshold: float, decisions: Decisions) -> float:
        """The share under which ``guess`` or ``fit`` refuses: ``threshold`` on an English request,
        the lower of it and ``decisions.other`` on any other (no words to weigh: the model's lean)."""
        return threshold if self.english else min(threshold, decisions.other)

    def guessed(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
        return guessed(calls, self.schemas, self.conversation)

    def unheld(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, str]]:
        return unheld(calls, self.schemas, self.conversation)

    def unfit(self, calls: Sequence[tuple[str, Mapping[str, Any]]],
              earlier: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> list[str]:
        return unfit(calls, self.described, self.conversation, self.schemas, earlier, closed=self.closed)

    def holds(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
        """Whether ``calls`` answer the user's request (``asked``) in its own words: every word of
        it that says what it is about is in a call's values or its tool's name or description, and
        the conversation holds every required value that has words of its own (as ``guessed`` reads
        them; at least one): a call made of what the user said, not of a guess or beside the point."""
        values = _required_values(calls, self.schemas, self.conversation)
        if not calls or not self.asked or not values or not all(ok for _, _, ok in values):
            return False
        written = frozenset().union(*(_tool_content(name, self.described.get(name, "")) |
                                      _content(json.dumps(list(arguments.values()), ensure_ascii=False))
                                      for name, arguments in calls))
        return self.asked <= written


#: Function words of English that other languages written in Latin letters do not use as words:
#: a request holding one is read as English, the language the word readings read.
_ENGLISH = frozenset({"the", "is", "are", "was", "were", "what", "which", "how", "and", "of", "for", "with",
                      "please", "you", "your", "this", "that", "it", "can", "could", "would", "should", "there",
                      "my", "who", "where", "when", "why", "any", "by", "to", "at", "from", "get", "show", "find",
                      "give", "some", "about", "than", "into", "if", "or", "not", "has", "have", "had", "does",
                      "did", "will", "all", "its", "our", "their", "whose", "each", "every"})


def english(text: str) -> bool:
    """Whether ``text`` is read as English: no character of a script written without spaces, and a
    function word of English (``_ENGLISH``). A request the word readings cannot read leaves
    ``guess`` and ``fit`` to the model's distribution (``Decisions.other``); an empty one is English."""
    if not text.strip():
        return True
    return not unspaced(text) and any(w in _ENGLISH for w in _words(text))


def refusing(tools: Sequence[str]) -> str:
    """The note a model is given for a turn whose only calls were to ``tools`` that do not do what
    was asked (``unfit``): to answer in text, in its own words and the user's language."""
    names = _listed([f"`{name}`" for name in tools])
    return (f"Your tools cannot do what the user's last message asks ({names} "
            f"{'does' if len(tools) == 1 else 'do'} something else). Do not call a tool: tell the user so in "
            "plain text, in the language of their message.")


def asking(missing: Sequence[tuple[str, str]]) -> str:
    """The note a model is given to ask for the ``missing`` values (``unheld``) instead of guessing
    them: in its own words and the user's language."""
    by_tool: dict[str, list[str]] = {}
    for name, key in missing:
        by_tool.setdefault(name, []).append(f"`{key}`")
    needs = "; ".join(f"`{name}` needs {_listed(keys)}" for name, keys in by_tool.items())
    return (f"The conversation does not give the values a call would need ({needs}). Do not call a tool and "
            "do not guess them: ask the user for them in plain text, in the language of their message.")


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def ungrounded(name: str, arguments: Mapping[str, Any], schema: Mapping[str, Any], conversation: str, *,
               closed: bool = True, numbers: bool = True) -> list[str]:
    """The optional arguments of a call to ``name`` the conversation does not speak of, in order:
    a value not ``_mentioned`` (as ``guessed`` reads values: word stems, codes, numbers as words),
    a boolean that is not its default and whose own name's words the conversation never uses.
    ``closed=False``: a boolean and a value of an ``enum`` or ``const`` are never judged (the user
    says them in words of their own, in their language: "newest first" for ``"desc"``).
    ``numbers=False``: a number is never judged either (a request not in English may write it in
    words no reading here knows: "两位" for 2)."""
    required = set(schema.get("required", ())) if isinstance(schema, Mapping) else set()
    props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    props = props if isinstance(props, Mapping) else {}
    stems = _stems(conversation)
    out = []
    for key, value in arguments.items():
        if key in required:
            continue
        prop = props.get(key, {})
        prop = prop if isinstance(prop, Mapping) else {}
        if not closed and (isinstance(value, bool) or "enum" in prop or "const" in prop):
            continue
        if not numbers and isinstance(value, int | float) and not isinstance(value, bool):
            continue
        if isinstance(value, str) and _formatted(prop):
            continue  # the tool asks for a form ("HH:MM"); the user says the value in theirs ("at 10")
        if isinstance(value, bool):
            said = grounded(value, conversation, prop) or _said_of(key, stems)
        else:
            said = _mentioned(value, conversation, stems, prop)
        if not said:
            out.append(key)
    return out


#: A description that states the form a string takes: "in HH:MM", "format: YYYY-MM-DD", "ISO 8601".
_FORM = re.compile(r"\bformat(?:ted)?\b|\b(?:hh|yyyy|yy|mm|dd)\b|iso[ -]?8601", re.IGNORECASE)


def _formatted(prop: Mapping[str, Any]) -> bool:
    """Whether a string's schema asks for a form of its own (``format``, ``pattern``, or a
    description that states one): the value is the user's in the tool's form, never written so."""
    return "format" in prop or "pattern" in prop or bool(_FORM.search(str(prop.get("description") or "")))


def readable_numbers(text: str) -> bool:
    """Whether the numbers ``text`` writes are all read here: English (number words up to twelve,
    digits), or a script without spaces that writes its numbers in digits only (no character with a
    numeric value that is not a digit: "两", "十", "百"). Elsewhere a number may be a word no
    reading here knows ("dos", "zwei")."""
    if english(text):
        return True
    return unspaced(text) and not any(ch in _NUMERALS or (not ch.isdigit() and unicodedata.numeric(ch, None) is not None)
                                      for ch in normal(text))


#: Numerals Unicode gives no value: the simplified 两 (its traditional form 兩 has one) and 俩.
_NUMERALS = frozenset("两俩")


def spoken_options(calls: Sequence[tuple[str, Mapping[str, Any]]], schemas: Mapping[str, Any], conversation: str
                   ) -> list[tuple[str, str]]:
    """The optional arguments ``calls`` (name, arguments) left out whose own name the conversation
    (``conversation_text``) speaks of, every word of it but the filler ("unit" in "the unit of
    measurement", "details" in "details of a felony record"), as (tool, argument), each once."""
    stems = _stems(conversation)
    out: list[tuple[str, str]] = []
    for name, arguments in calls:
        schema = schemas.get(name)
        if not isinstance(schema, Mapping) or not isinstance(props := schema.get("properties"), Mapping):
            continue
        required = set(schema.get("required", ()))
        for key in props:
            if key not in required and key not in arguments and (name, key) not in out and _said_of(key, stems):
                out.append((name, key))
    return out


def adds_option(before: Sequence[tuple[str, Mapping[str, Any]]], after: Sequence[tuple[str, Mapping[str, Any]]],
                name: str, key: str, schema: Mapping[str, Any], conversation: str) -> bool:
    """Whether ``after`` is ``before`` with ``key`` added to each call to ``name`` and nothing else
    changed, every value of it grounded (``ungrounded`` does not leave it out) and none of them the
    argument's default (schema's or stated): an argument worth writing."""
    if len(before) != len(after):
        return False
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    prop = props.get(key) if isinstance(props, Mapping) else None
    given = defaults(prop if isinstance(prop, Mapping) else {})
    for (was, old), (now, new) in zip(before, after, strict=True):
        if was != now:
            return False
        if now != name:
            if dict(new) != dict(old):
                return False
            continue
        if key not in new or {k: v for k, v in new.items() if k != key} != dict(old):
            return False
        value = new[key]
        if _same(value, given) or ungrounded(name, {key: value}, schema, conversation):
            return False
    return True


def telling(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, set[str]]:
    """For each tool, the arguments whose values tell its calls in one reply apart ("with and
    without transfers": ``allow_transfer`` true in one, false in the other; written in every call of
    it): what ``ground`` must not leave out, or the calls would be one call twice."""
    out: dict[str, set[str]] = {name: set() for name, _ in calls}
    for name in out:
        same = [args for n, args in calls if n == name]
        for key in {k for args in same for k in args}:
            if all(key in args for args in same) and \
                    len({json.dumps(args[key], sort_keys=True, default=str) for args in same}) > 1:
                out[name].add(key)
    return out


def ungrounded_items(arguments: Mapping[str, Any], schema: Mapping[str, Any], conversation: str) -> dict[str, list[int]]:
    """Of each list of strings in ``arguments`` (required or not) that the conversation holds
    some items of (``guessed``'s reading: words by their stems, codes), the positions of the items
    it does not hold: a list the model ran on past what was asked ("annual plants": ``["Annual",
    "Perennial", "Shrub"]``). A list none of whose items are held, or one that would fall under
    its ``minItems``, is not touched."""
    stems = _stems(conversation)
    props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    out: dict[str, list[int]] = {}
    for key, value in arguments.items():
        if not isinstance(value, list) or len(value) < 2 or not all(isinstance(v, str) for v in value):
            continue
        prop = props.get(key, {}) if isinstance(props, Mapping) else {}
        items = prop.get("items", {}) if isinstance(prop, Mapping) else {}
        held = [_mentioned(v, conversation, stems, items if isinstance(items, Mapping) else {}) for v in value]
        least = prop.get("minItems", 0) if isinstance(prop, Mapping) else 0
        if any(held) and not all(held) and sum(held) >= (least if isinstance(least, int) else 0):
            out[key] = [i for i, ok in enumerate(held) if not ok]
    return out


def said(messages: Sequence[Mapping[str, Any]], roles: Sequence[str] | None = None) -> str:
    """What the conversation said, as written: the text of every message but the assistant's own
    (a value the model wrote itself grounds nothing), one message a line; ``roles``: only theirs
    (``("user", "system")``: what was asked, not what a tool answered)."""
    parts = []
    for message in messages:
        if message.get("role") == "assistant" or (roles is not None and message.get("role") not in roles):
            continue
        text = content_text(message.get("content"))
        if text is not None:
            parts.append(text)
    return "\n".join(parts)


def asked(messages: Sequence[Mapping[str, Any]]) -> str:
    """The request the turn answers, as written: the last user message's text ("" without one);
    a list an earlier request named is not this one's."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return content_text(message.get("content")) or ""
    return ""


#: How much of a message an answer must open with, as written (``plain``: any case and spacing), to
#: be read as its echo: a restatement of a short request's subject ("富士山の高さは約…") is shorter.
ECHO_CHARS = 24


def echoed(text: str, messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The message a text answer writes back: the answer opens with the first ``ECHO_CHARS``
    characters (or more) of a user's message or of one of the model's own earlier answers, as a
    small model does when it copies the request, or its last answer, instead of acting on it;
    ``None`` where it does not."""
    said = plain(text)
    if len(said) < ECHO_CHARS:
        return None
    for message in messages:
        if message.get("role") not in ("user", "assistant"):
            continue
        written = content_text(message.get("content")) or ""
        if len(opening := plain(written)[:ECHO_CHARS]) == ECHO_CHARS and said.startswith(opening):
            return written
    return None


#: Code in a text answer: a span in backticks (a fence's language line skipped), and a name
#: followed by its parenthesis.
_CODE_NAME = re.compile(r"`+[ \t]*(?:[A-Za-z]+[ \t]*\n)?\s*([A-Za-z_][\w.-]*)")
_CALLED_NAME = re.compile(r"(?<![\w.])([A-Za-z_][\w.-]*)\s*\(")


def told(text: str, tool_names: Sequence[str]) -> list[str]:
    """The offered tools a text answer writes as code (in backticks, or a name and its
    parenthesis), in the order written: the model telling how to call a tool it could call."""
    offered = set(tool_names)
    found = [m.group(1) for pattern in (_CODE_NAME, _CALLED_NAME) for m in pattern.finditer(text)]
    return list(dict.fromkeys(sorted((n for n in found if n in offered), key=text.find)))


def content_text(content: Any) -> str | None:
    """A message's ``content`` as text: a string as it is, a list of parts their texts one a line;
    ``None`` for anything else (no content)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return None


def conversation_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """``said``, as ``grounded`` reads it: lower case, runs of spaces as one."""
    return _plain(said(messages))


def open_string(text: str) -> str | None:
    """The JSON string ``text`` ends inside, so far (escapes as written); ``None`` outside one."""
    inside, start, i = False, 0, 0
    while i < len(text):
        ch = text[i]
        if inside and ch == "\\":
            i += 2
            continue
        if ch == '"':
            inside, start = not inside, i + 1
        i += 1
    return text[start:] if inside else None


#: A string so far shorter than this matches too much of a conversation to copy from.
_COPY_FROM = 2
_WORD_NEXT = re.compile(r"\s?[^\W_]")
#: At most this many places in the conversation are copied from; this many characters of each.
_COPY_PLACES, _COPY_AHEAD = 4, 32


@dataclass(frozen=True)
class CopyBias:
    """The copy and word decisions as a ``Bias``: inside a string, where what the string holds so
    far is written in ``conversation`` (exactly), the text that follows it there gets ``bonus``:
    "Louvre" goes on to "Louvre Museum" when the user wrote that, where the model would have closed
    it. ``word``: where every place the string so far starts a word at ends inside that word, the
    rest of the word gets this bonus: "C" goes on to "C#", "Christian" to "Christianity".
    ``number``: outside a string, where the number the reply is writing so far starts one the
    conversation writes (``numbers_in``), that number's next character gets this bonus; where it
    is whole and none goes on, a digit or point loses it: "50 million" is written 50000000, not
    500000000."""

    conversation: str
    bonus: float | None
    word: float | None = None
    number: float | None = None
    #: The offered tools' own text (names, descriptions, enums): a value it writes whole is not cut.
    tools: str = ""

    def point(self, text: str) -> DecisionPoint:
        """Which of the levers gave the bonuses after the reply's ``text``."""
        value = open_string(text)
        if value is None:
            return DecisionPoint.NUMBER
        return DecisionPoint.WORD if self.word is not None and value.strip() and \
            cut_word(value, self.conversation, self.tools) else DecisionPoint.COPY

    def __call__(self, text: str) -> dict[str, float]:
        value = open_string(text)
        if value is None:
            if self.number is None:
                return {}
            return {ahead: sign * self.number for ahead, sign in number_ahead(text, self.conversation).items()}
        if not value.strip():
            return {}
        out: dict[str, float] = {}
        if self.word is not None:
            out.update(dict.fromkeys(cut_word(value, self.conversation, self.tools), self.word))
        if self.bonus is None or len(value.strip()) < _COPY_FROM:
            return out
        at = self.conversation.find(value)
        places = 0
        while at >= 0 and places < _COPY_PLACES:
            ahead = self.conversation[at + len(value): at + len(value) + _COPY_AHEAD]
            if _WORD_NEXT.match(ahead):  # a word goes on; punctuation would end the span's sentence
                out[ahead] = max(out.get(ahead, self.bonus), self.bonus)
                places += 1
            at = self.conversation.find(value, at + 1)
        return out


def biased(points: Sequence[DecisionPoint], before: Sequence[tuple[str, Mapping[str, Any]]] | None,
           after: Sequence[tuple[str, Mapping[str, Any]]], before_text: str, after_text: str) -> list[Decision]:
    """The records of a reply the bonuses changed (``points``: the levers whose bonus changed a
    pick, in order): each argument whose value differs from the reply decoded without them
    (``before``: its calls, ``None`` where they did not parse), its value before and after; the
    whole reply's text where the calls themselves differ."""
    def point(value: Any) -> DecisionPoint:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and DecisionPoint.NUMBER in points:
            return DecisionPoint.NUMBER
        return next((p for p in points if p is not DecisionPoint.NUMBER), points[0])

    if before is None or [n for n, _ in before] != [n for n, _ in after]:
        return [Decision(points[0], None, None, True, len(after), after_text,
                         before=json.dumps(before_text, ensure_ascii=False), after=json.dumps(after_text, ensure_ascii=False))]
    made: list[Decision] = []
    for (name, old), (_, new) in zip(before, after, strict=True):
        for key in dict.fromkeys([*old, *new]):
            if key in old and key in new and old[key] == new[key] and type(old[key]) is type(new[key]):
                continue
            value = new[key] if key in new else old[key]
            made.append(Decision(point(value), None, None, True, len(after), after_text, f"{name}.{key}",
                                 before=json.dumps(old[key], ensure_ascii=False) if key in old else None,
                                 after=json.dumps(new[key], ensure_ascii=False) if key in new else None))
    return made


#: A word's plural ending: the singular the model wrote is its own choice, not a cut word.
_PLURALS = frozenset({"s", "es"})
#: What may close a sentence after a word; not part of the word.
_CLOSERS = ".,;:!?\"')]}"


def _unclosed(word: str) -> str:
    """``word`` without the marks that close a sentence or a quote after it: ``_CLOSERS`` (in
    their full-width forms too, "！"), "。", "、", and any closing or final quote or bracket ("»",
    "」"); not a mark that is part of a word ("#" of "C#")."""
    end = len(word)
    while end and (normal(word[end - 1]) in _CLOSERS or word[end - 1] in "。、…" or
                   unicodedata.category(word[end - 1]) in ("Pe", "Pf")):
        end -= 1
    return word[:end]


#: A letter of a spaced script: a number written against one is part of a code ("A5"); against a
#: character of a script without spaces ("增长5%") it is a number.
_LETTER = rf"(?![{UNSPACED}])[^\W\d]"
_SCALES = {"thousand": 10**3, "k": 10**3, "million": 10**6, "m": 10**6, "mn": 10**6, "billion": 10**9,
           "bn": 10**9, "trillion": 10**12}
_NUMBER = re.compile(rf"(?<!{_LETTER}|[\d.])(\d{{1,3}}(?:,\d{{3}})+|\d+)(\.\d+)?(?:(%)|\s?(thousand|million|billion|trillion)\b|"
                     r"(k|m|mn|bn)\b)?", re.IGNORECASE)
#: A number the reply is writing, at its end, where a value starts (JSON or a call's keywords).
_WRITING = re.compile(r"(?:^|[:=\[(,])\s*(-?\d+(?:\.\d*)?)$")
#: A number so far shorter than this starts too many of the conversation's to go on with.
_NUMBER_FROM = 2
#: What goes on with a number: a digit, its point.
_GOES_ON = tuple("0123456789.")


@lru_cache(maxsize=32)
def numbers_in(conversation: str) -> frozenset[str]:
    """The numbers a conversation writes, as a call would: digits without their thousands'
    commas ("$400,000" is 400000), times their scale word ("50 million" is 50000000, and 50 as
    written), a percentage also as its fraction ("5%" is 5 and 0.05)."""
    out: set[str] = set()
    for m in _NUMBER.finditer(normal(conversation)):
        whole, part, percent, word, short = m.groups()
        written = whole.replace(",", "") + (part or "")
        out.add(written)
        scale = _SCALES.get((word or short or "").lower())
        exact = float(written)
        if scale is not None:
            out.add(_plain_number(exact * scale))
        if percent:
            out.add(_plain_number(exact / 100))
    return frozenset(out)


#: A property that takes a percentage as written ("in percentage", "Percent change", "%").
_PERCENT_WORDS = re.compile(r"percent|%", re.IGNORECASE)
#: How many words before a number its key's words are looked for ("a discount rate of 5%").
_NEAR = 6


def as_fraction(key: str, value: Any, schema: Mapping[str, Any], conversation: str) -> float | None:
    """The fraction a number argument stands for where the user wrote it as a percentage: 0.05 for
    ``"discount_rate": 5`` where the conversation (as written) says "a discount rate of 5%". Only
    for a number that may be one (not an ``integer``), whose name and description never speak of a
    percentage (a tool that takes "the rate in percentage" takes 5), and where the places the
    conversation writes it as a whole number are percentages: those within a few words after one
    of the key's own words ("rate", "discount") where there are such, else every one ("5%" and
    "5 years" with no word of the key near either are left alone). Never for a schema whose range
    reaches past 1 (a ``maximum`` of 100 takes percentages as written) or that the fraction would
    break (under its ``minimum``, not its ``multipleOf``). ``None`` where it stands as written."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or \
            not isinstance(schema, Mapping) or schema.get("type") == "integer":
        return None
    top = [b for b in (schema.get("maximum"), schema.get("exclusiveMaximum"))
           if isinstance(b, int | float) and not isinstance(b, bool)]
    if any(b > 1 for b in top):
        return None
    if _PERCENT_WORDS.search(key) or _PERCENT_WORDS.search(str(schema.get("description") or "")):
        return None
    keys = {_stem(w) for w in _key_words(key)}
    conversation = normal(conversation)  # "５％" is "5%"
    places: list[tuple[bool, bool]] = []
    for m in _NUMBER.finditer(conversation):
        whole, part, sign, word, short = m.groups()
        if float(whole.replace(",", "") + (part or "")) != float(value) or word or short:
            continue
        percent = bool(sign) or bool(re.match(r"\s?percent\b", conversation[m.end():], re.IGNORECASE))
        before = _words(conversation[:m.start()])[-_NEAR:]
        last = max((i for i, w in enumerate(before) if _stem(w) in keys), default=None)
        # A key word belongs to the first number after it ("a rate of 5% over 5 years": not the years').
        near = last is not None and not any(w.isdigit() for w in before[last + 1:])
        places.append((percent, near))
    judged = [percent for percent, close in places if close] or [percent for percent, _ in places]
    if not judged or not all(judged):
        return None
    fraction = float(_plain_number(float(value) / 100))
    return fraction if _within(fraction, schema) else None


def _within(x: float, schema: Mapping[str, Any]) -> bool:
    """Whether the number ``x`` keeps ``schema``'s bounds and ``multipleOf``."""
    def bound(key: str) -> float | None:
        b = schema.get(key)
        return float(b) if isinstance(b, int | float) and not isinstance(b, bool) else None

    low, high, above, below, step = (bound(k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                                        "multipleOf"))
    return (low is None or x >= low) and (high is None or x <= high) and (above is None or x > above) and \
        (below is None or x < below) and (step is None or step <= 0 or abs(x / step - round(x / step)) < 1e-9)


def _key_words(key: str) -> list[str]:
    """The words of an argument's name ("discountRate", "discount_rate": discount, rate)."""
    return [w for w in _words(re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key)) if w not in _FILLER]


def _plain_number(x: float) -> str:
    """``x`` as a call writes it: an integer without a point, else the shortest decimal."""
    if x == int(x) and abs(x) < 1e18:
        return str(int(x))
    return format(x, ".12f").rstrip("0").rstrip(".")


def number_ahead(text: str, conversation: str) -> dict[str, float]:
    """Where ``text`` ends writing a number that starts one the conversation writes
    (``numbers_in``): each such number's next character (+1); where the number so far is whole
    and no longer one goes on from it, a digit or a point (-1), so that it ends where the
    conversation's does, in whatever way the grammar and the model end it (a comma for another key is not pushed
    over a closing brace). Empty elsewhere, and outside an object or a call's parentheses: a
    number in a text answer is the model's own."""
    m = _WRITING.search(text)
    if m is None or (text.count("{") <= text.count("}") and text.count("(") <= text.count(")")):
        return {}
    so_far = m.group(1).lstrip("-")
    numbers = numbers_in(conversation)
    ahead = {n[len(so_far)]: 1.0 for n in sorted(numbers) if len(n) > len(so_far) and n.startswith(so_far)}
    if so_far in numbers:
        # Whole here and longer there ("5" and "50"): the model's to choose.
        return {} if ahead else dict.fromkeys(_GOES_ON, -1.0)
    # One digit starts too many numbers to go on with: "2" (for "dos personas") is not pushed on
    # to the "20" of "20:30", nor to a result's 24.99; "50" goes on to "50 million"'s 50000000.
    return ahead if len(so_far) >= _NUMBER_FROM else {}


_NUM = r"-?\d+(?:\.\d+)?(?!\w|\.\d)"
#: Capitalised words in a row (a name: "Paris", "New York"), not "I" alone.
_NAME = r"(?!I\b)[A-Z][\w#+.-]*(?:[ \t]+[A-Z][\w#+.-]*)*"
_JOIN = r"(?:\s*,)?\s+(?:and|or)\s+"
#: Lists the user wrote: numbers joined by commas or "and"/"or" ("2017, 2018 and 2019", "15 or
#: 20"); names joined by "and"/"or", with commas before the last join ("Paris, Lima and Cairo").
_LISTS = (re.compile(rf"(?<![\w.]){_NUM}(?:(?:\s*,\s*(?:(?:and|or)\s+)?|{_JOIN}){_NUM})+", re.IGNORECASE),
          re.compile(rf"(?<!\w){_NAME}(?:\s*,\s*{_NAME})*{_JOIN}{_NAME}"))
_ITEMS = (re.compile(_NUM), re.compile(_NAME))
_JOINED = re.compile(r"\s(?:and|or)\s", re.IGNORECASE)


def _leaves(value: Any) -> list[str]:
    """The strings and numbers of an argument's value (in its lists and objects), as text."""
    if isinstance(value, Mapping):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, bool) or value is None:
        return []
    text = _plain_number(float(value)) if isinstance(value, int | float) else str(value)
    return [text.strip()] if text.strip() else []


def _leaf_words(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[set[str]]:
    """The words of each string and number the calls' arguments hold (``_leaves``), none empty."""
    return [words for _, arguments in calls for value in arguments.values() for leaf in _leaves(value)
            if (words := set(_words(leaf)))]


def uncovered(calls: Sequence[tuple[str, Mapping[str, Any]]], conversation: str) -> list[str]:
    """Values of a list the conversation writes, one item of which the calls used, that no call
    used: "seasons 2017, 2018 and 2019" after a call for 2017 leaves 2018 and 2019; "concerts
    near Berlin and Paris" after one for Berlin leaves Paris. A list holds items alike: numbers,
    or names (capitalised words), so "in Miami, Florida" or "Berlin and I" list nothing."""
    used = _leaf_words(calls)

    def called(item: str) -> bool:
        # By words: "Washington D.C." in a call is the list's "Washington D.C" and "washington dc" too.
        words = set(_words(item))
        return any(words <= u or u <= words for u in used)

    out: list[str] = []
    for listed, item in zip(_LISTS, _ITEMS, strict=True):
        for m in listed.finditer(conversation):
            # A sentence's full stop is not part of its last name ("Paris."); an initialism's is ("D.C.").
            items = [i.group()[:-1] if i.group().endswith(".") and "." not in i.group().split()[-1][:-1] else i.group()
                     for i in item.finditer(m.group())]
            if not _JOINED.search(m.group()) and len({len(i) for i in items}) > 1:
                continue  # commas alone between unlike numbers: a date ("January 1, 2021"), not a list
            if any(called(i) for i in items):
                out += [i for i in items if not called(i) and i not in out]
    return out


def covers(calls: Sequence[tuple[str, Mapping[str, Any]]], values: Sequence[str]) -> bool:
    """Whether ``calls`` use one of ``values`` (as a whole value, or every word of one)."""
    wanted = [w for w in (set(_words(v)) for v in values) if w]
    return any(w <= words for words in _leaf_words(calls) for w in wanted)


def cut_word(value: str, conversation: str, tools: str = "") -> list[str]:
    """The rest of the word ``value`` stops inside, where the conversation writes ``value`` at the
    start of a word and every such place goes on inside one word: letters or digits ("Christian"
    in "Christianity"; digits after digits), or a word's closing marks alone ("C" in "C#", "C++").
    Empty where any place ends a word there, where a word goes on with other marks ("x" in "x^2",
    "2023" in "2023-06-01") or with letters after a digit ("10" in "10th"), where ``value`` ends in
    a space, or where it starts no word there; a plural's "s" is not a cut ("bug" of "bugs"), nor a
    value ``tools`` (the offered tools' own text) writes whole and the word goes on with letters or
    digits: an abbreviation the tool takes ("asc" where "ascending" is said), where a word that goes
    on with marks alone is another token ("C" of "C#", though the tool's examples write 'C')."""
    if not value or value[-1].isspace() or unspaced(value[-1]):
        # A script without spaces has no word ends to read: every character "goes on inside a word".
        return []
    abbreviation = bool(re.search(rf"(?<!\w){re.escape(value)}(?!\w)", tools))
    rests: list[str] = []
    at = conversation.find(value)
    while at >= 0:
        if at == 0 or not conversation[at - 1].isalnum():
            tail = conversation[at + len(value):]
            end = next((i for i, ch in enumerate(tail) if ch.isspace()), len(tail))
            rest = _unclosed(tail[:end])
            # Letters go on with letters, digits with digits: "10" of "10th" is a number, not a cut word.
            alike = (rest[:1].isalpha() and value[-1].isalpha()) or (rest[:1].isdigit() and value[-1].isdigit())
            marks = not any(ch.isalnum() for ch in rest)
            if not rest or rest in _PLURALS or not (alike or marks) or (abbreviation and not marks):
                return []
            if rest not in rests:
                rests.append(rest)
        at = conversation.find(value, at + 1)
    return rests
