"""Thresholds for the decisions (``Decisions``), calibrated on BFCL cases apart from those reported.

Each calibration case is asked once with every decision probing: the call branch always taken
(its share recorded), another call written while its share reaches a low floor (each share and
the reply it would have ended with recorded), repeats left out. Any pair of thresholds then
replays offline: below the call threshold the answer is text; below the "more" threshold the
reply ends where that decision stood; under the guess threshold a reply whose calls are a guess
(``guessed``) is text, and under the fit threshold one that calls a tool the conversation never
speaks of (``unfit``). The set kept is the one with the best mean accuracy over
the categories (each category weighs the same); its curve is printed and written.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .._errors import LocalToolsError
from ..model._decide import CALIBRATED, DecisionPoint, Decisions, Grounds
from ..model._model import Model
from ._bfcl import Case, sample
from ._checker import check_calls

__all__ = ["CALL_GRID", "FIT_GRID", "FORM_GRID", "GUESS_GRID", "MORE_GRID", "Probe", "ProbeLog", "calibration_cases",
           "call_curve", "choose", "probe", "replay", "saved_probes", "write_calibration"]

#: The thresholds tried (shares of the model's probability).
CALL_GRID = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
# Down to 0.001: inside the parallel form's list a right second item may hold little of the mass
# (Qwen 0.5B, calibration split: 0.004 to 0.012 after the first item on 4 of 20 parallel questions).
MORE_GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.01)
FORM_GRID = (0.0, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.3, 1.01)
#: 0: no call is refused as a guess.
GUESS_GRID = (0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.01)
#: 0: no call is refused for its tool.
FIT_GRID = (0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.01)
#: Most tokens of a probed reply, unless told.
MAX_TOKENS = 256
#: Below this share no further call is probed (every higher threshold would stop there too).
FLOOR = MORE_GRID[0]

Calls = list[tuple[str, dict[str, Any]]]


@dataclass
class Probe:
    """One case asked with every decision probing."""

    case_id: str
    category: str
    #: The call branch's share (``None``: unreadable, or no call decision was made).
    call_share: float | None
    #: The form decision's list share and the calls of the reply in single calls (``None``: none made).
    form: tuple[float | None, Calls] | None = None
    #: For each "more" decision: its share and the calls the reply held then.
    more: list[tuple[float | None, Calls]] = field(default_factory=list)
    #: The calls of the reply at the end (after every continuation taken).
    final: Calls = field(default_factory=list)
    error: str = ""


class ProbeLog:
    """The probes of a calibration as they are made, one JSON line each after a header naming the
    run, so that a run stopped part way (a laptop's lid, a time limit) goes on where it stopped:
    a run with the same header reads back the probes already made; another starts the log again."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.done: dict[str, Probe] = {}
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            try:
                if lines and json.loads(lines[0]) == header:
                    self.done = {p.case_id: p for p in map(_probe_from_line, lines[1:])}
            except (ValueError, TypeError, KeyError):
                self.done = {}  # a line cut by the stop itself, or not a log: start again
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as f:
            f.write(json.dumps(header) + "\n")
            f.writelines(json.dumps(asdict(p)) + "\n" for p in self.done.values())

    def add(self, p: Probe) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(p)) + "\n")
        self.done[p.case_id] = p

    def close(self) -> None:
        """The calibration is written: the log is no longer needed."""
        self.path.unlink(missing_ok=True)


def _probe_from_line(line: str) -> Probe:
    data = json.loads(line)
    return Probe(**{k: data[k] for k in Probe.__dataclass_fields__})


def saved_probes(path: Path, header: dict[str, Any]) -> dict[str, Probe] | None:
    """The probes of the calibration written at ``path``, by case, when it was made with ``header``'s
    settings; ``None`` when there is none, or it was made with others."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        # Files written before the header held max_tokens were made with probe's default.
        if {"max_tokens": MAX_TOKENS, **body["meta"]} != header:
            return None
        return {p.case_id: p for p in (_probe_from_line(json.dumps(line)) for line in body["probes"])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def calibration_cases(cases: Sequence[Case], n: int, *, reported: int = 40) -> list[Case]:
    """``n`` cases of one category that the report never uses: the reported sample (``reported``
    cases, seed 0) left out, then an even spread (seed 1) of the rest."""
    kept = {c.id for c in sample(list(cases), reported, 0)}
    return sample([c for c in cases if c.id not in kept], n, 1)


def probe(model: Model, case: Case, *, max_tokens: int = MAX_TOKENS) -> Probe:
    """``case`` asked with the call branch always taken and more calls while their share is at least ``FLOOR``."""
    decisions = Decisions(call=0.0, more=FLOOR, form=0.0, distinct=True)
    family = model.family
    # Read with the parallel form too: the probe may write it.
    fmt = model.reply_format(case.tools, forms=(*family.call_forms, *family.parallel_forms) or None)
    model.backend.drop_prompt_cache()
    try:
        result = model.chat(case.messages, case.tools, decisions=decisions, max_tokens=max_tokens)
    except LocalToolsError as exc:
        return Probe(case.id, case.category, None, error=f"{type(exc).__name__}: {str(exc)[:160]}")
    call = next((d for d in result.decisions if d.point is DecisionPoint.CALL), None)
    form = next(((d.share, _calls(fmt, d.reply)) for d in result.decisions if d.point is DecisionPoint.FORM), None)
    if form is not None and not form[1]:
        # The reply stopped where it began a single call: those calls are the greedy reply's (none,
        # as a failed probe's, where it fails).
        with contextlib.suppress(LocalToolsError):
            form = form[0], [(c.name, c.arguments) for c in model.chat(
                case.messages, case.tools, decisions=Decisions(call=0.0, form=1.0), max_tokens=max_tokens,
                schema_retries=0, disguise_retries=0).tool_calls]
    more = [(d.share, [(c.name, c.arguments) for c in fmt.parse(d.reply).tool_calls])
            for d in result.decisions if d.point is DecisionPoint.MORE]
    return Probe(case.id, case.category, call.share if call else None, form, more,
                 [(c.name, c.arguments) for c in result.tool_calls])


def _calls(fmt: Any, text: str) -> Calls:
    try:
        return [(c.name, c.arguments) for c in fmt.parse(text).tool_calls]
    except LocalToolsError:
        return []


def replay(p: Probe, call: float, more: float, form: float = 1.01, guess: float = 0.0,
           is_guess: Callable[[Calls], bool] | None = None, fit: float = 0.0,
           is_unfit: Callable[[Calls, Calls], bool] | None = None) -> Calls:
    """The calls the reply would hold under these thresholds (``is_guess``: whether calls are a
    guess in the probe's case, ``is_unfit``: whether they, after the reply's earlier calls, call a
    tool it never speaks of; none is without them)."""

    def refused(calls: Calls, share: float, earlier: Calls | None = None) -> bool:
        return (is_guess is not None and share < guess and is_guess(calls)) or \
            (is_unfit is not None and share < fit and is_unfit(calls, earlier or []))

    calls = _replay(p, call, more, form, refused)
    # Judged as the model judges them: on the calls the form decision left, before another is added.
    opened = _opened(p, form) if calls else calls
    if opened and p.call_share is not None and refused(opened, p.call_share):
        return []
    return calls


def _opened(p: Probe, form: float) -> Calls:
    """The calls of the probe's reply once its form was decided, before any "more" decision."""
    if p.form is not None and (p.form[0] is None or p.form[0] < form):
        return p.form[1]
    return p.more[0][1] if p.more else p.final


def _replay(p: Probe, call: float, more: float, form: float,
            refused: Callable[[Calls, float, Calls], bool] | None = None) -> Calls:
    """``refused``: whether a "more" decision's new calls are refused on its share, as the model
    refuses a further call that is a guess or to a tool nobody spoke of."""
    if p.error or p.call_share is None or p.call_share < call:
        return []
    if p.form is not None and (p.form[0] is None or p.form[0] < form):
        return p.form[1]
    for i, (share, calls) in enumerate(p.more):
        if share is None or share < more:
            return calls
        after = p.more[i + 1][1] if i + 1 < len(p.more) else p.final
        if refused is not None and refused(after[len(calls):], share, calls):
            return calls
    return p.final


def _schemas(case: Case) -> dict[str, Any]:
    return {t["function"]["name"]: t["function"]["parameters"] for t in case.tools}


def _unfit(grounds: Grounds, calls: Calls, earlier: Calls) -> bool:
    """Whether calls (after the reply's ``earlier`` ones) name only tools the conversation never
    speaks of (``unfit``)."""
    return bool(grounds.unfit(calls, earlier))


def _accuracy(probes: Sequence[Probe], cases: dict[str, Case], call: float, more: float, form: float,
              guess: float = 0.0, guesses: dict[str, Callable[[Calls], bool]] | None = None, fit: float = 0.0,
              unfits: dict[str, Callable[[Calls, Calls], bool]] | None = None) -> dict[str, float]:
    by: dict[str, list[bool]] = {}
    for p in probes:
        case = cases[p.case_id]
        calls = replay(p, call, more, form, guess, guesses[p.case_id] if guesses is not None else None, fit,
                       unfits[p.case_id] if unfits is not None else None)
        by.setdefault(p.category, []).append(check_calls(calls, case.expected, _schemas(case)).ok)
    return {category: sum(flags) / len(flags) for category, flags in by.items()}


def choose(probes: Sequence[Probe], cases: Iterable[Case]) -> tuple[Decisions, list[dict[str, Any]]]:
    """The thresholds with the best mean per-category accuracy on ``probes`` (ties: no guess
    threshold or the lower one, the lower call threshold, then the higher "more" threshold: the fewer changes
    from greedy), and the whole grid as rows. The guess threshold is swept with the call
    threshold, "more" and the form held where the rest of the grid put them; then the fit
    threshold with the call threshold, the rest held where they stand."""
    known = {c.id: c for c in cases}
    rows = []
    forms = FORM_GRID if any(p.form is not None for p in probes) else (1.01,)

    # Each case's conversation is read once, not once a row nor once a judgement.
    grounds = {p.case_id: Grounds.of(known[p.case_id].messages, known[p.case_id].tools) for p in probes}
    guesses: dict[str, Callable[[Calls], bool]] = {case: g.guessed for case, g in grounds.items()}
    unfits: dict[str, Callable[[Calls, Calls], bool]] = {case: partial(_unfit, g) for case, g in grounds.items()}

    def row(call: float, more: float, form: float, guess: float, fit: float = 0.0) -> dict[str, Any]:
        accuracy = _accuracy(probes, known, call, more, form, guess, guesses if guess > 0 else None, fit,
                             unfits if fit > 0 else None)
        return {"call": call, "more": more, "form": form, "guess": guess, "fit": fit,
                "mean": sum(accuracy.values()) / len(accuracy), **accuracy}

    rows = [row(call, more, form, 0.0) for call in CALL_GRID for more in MORE_GRID for form in forms]

    def rank(r: dict[str, Any]) -> tuple[float, ...]:
        return round(r["mean"], 9), -r["fit"], -r["guess"], -r["call"], r["form"], r["more"]

    held = max(rows, key=rank)
    rows += [row(call, held["more"], held["form"], guess) for call in CALL_GRID for guess in GUESS_GRID if guess > 0]
    held = max(rows, key=rank)
    rows += [row(call, held["more"], held["form"], held["guess"], fit) for call in CALL_GRID for fit in FIT_GRID
             if fit > 0]
    best = max(rows, key=rank)
    return Decisions(call=best["call"], more=best["more"] if best["more"] <= 1 else None,
                     form=best["form"] if best["form"] <= 1 else None,
                     guess=min(best["guess"], 1.0) if best["guess"] > 0 else None,
                     fit=min(best["fit"], 1.0) if best["fit"] > 0 else None, distinct=True), rows


def call_curve(probes: Sequence[Probe], cases: Iterable[Case],
               thresholds: Sequence[float] = CALL_GRID) -> list[dict[str, Any]]:
    """The call decision's curve: per threshold, how many of the cases that expect a call still
    call, and how many of those that expect none (no fitting tool) call anyway."""
    expects = {c.id: bool(c.expected) for c in cases}
    # A probe that failed made no decision: it is counted in neither column's calls.
    read = [(p.call_share, expects[p.case_id]) for p in probes if p.case_id in expects]
    needed = sum(1 for _, wants in read if wants)
    return [{"threshold": t,
             "needed": needed, "needed_called": sum(1 for s, w in read if w and s is not None and s >= t),
             "unneeded": len(read) - needed,
             "unneeded_called": sum(1 for s, w in read if not w and s is not None and s >= t)} for t in thresholds]


def write_calibration(path: Path, decisions: Decisions, meta: dict[str, Any], rows: list[dict[str, Any]],
                      probes: Sequence[Probe], curve: Sequence[dict[str, Any]] = ()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"decisions": {k: v for k, v in asdict(decisions).items() if k in CALIBRATED},
            "meta": meta, "grid": rows, "curve": list(curve), "probes": [asdict(p) for p in probes]}
    path.write_text(json.dumps(body, indent=1), encoding="utf-8")
