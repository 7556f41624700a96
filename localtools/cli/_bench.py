"""``localtools bench``: constrained vs free decoding on BFCL-format cases, peers, pooled routing."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._errors import UsageError
from ..backends import BACKENDS, ENGINES
from . import _common


def add_parser(sub: Any) -> None:
    bench = sub.add_parser(
        "bench", help="constrained vs free decoding on BFCL-format cases",
        description="Score every mode (model x backend x free/constrained x tool_choice) on the same BFCL-format "
        "cases with our own checker: AST accuracy, valid-call rate, latency p50/p95, time to first token, tokens/s "
        "and the grammar's overhead per generated token against free decoding of the same model and backend.")
    source = bench.add_mutually_exclusive_group()
    source.add_argument("--bfcl", action="store_true", help="BFCL v4 data from the bfcl-eval wheel (default; fetched once, "
                        "without its dependencies)")
    source.add_argument("--data", metavar="DIR", help="a folder in BFCL format (BFCL_v4_<category>.json + possible_answer/)")
    bench.add_argument("--category", action="append", metavar="C",
                       help="simple_python, multiple, parallel, parallel_multiple, irrelevance (repeatable; default all five); "
                       "or BFCL's multi-turn categories, multi_turn_base, multi_turn_miss_func, multi_turn_miss_param, "
                       "multi_turn_long_context: each case through the agent loop, turn by turn, scored by BFCL's own "
                       "multi-turn checker (the calls' effect on the APIs' state and their results)")
    bench.add_argument("--sample", type=int, default=40, metavar="N", help="cases per category, evenly spread (default 40)")
    bench.add_argument("--seed", type=int, default=0, help="shifts which cases the even spread picks (default 0)")
    bench.add_argument("--split", choices=["report", "calibration"], default="report",
                       help="with --bfcl: the report split (the even spread --seed picks, default) or the calibration "
                       "split `localtools calibrate` chooses thresholds on (none of the report's --sample 40 --seed 0 "
                       "cases), to choose a setting before it is reported")
    bench.add_argument("--model", "-m", action="append", help="catalog name or .gguf path (repeatable; default: the default model)")
    bench.add_argument("--backend", action="append", type=_common.backend_name, metavar="BACKEND",
                       help=f"{', '.join([*BACKENDS, *ENGINES])} or MODULE:CLASS; repeatable; default llama-cpp. "
                       "llama-server / vllm / sglang: the engine at --engine-url, "
                       "scored with the same prompts, grammars and parser as in process")
    _common.engine_args(bench)
    bench.add_argument("--mode", action="append", choices=["free", "constrained"], help="repeatable; default both")
    bench.add_argument("--tool-choice", action="append", choices=["auto", "required"], help="repeatable; default auto")
    bench.add_argument("--peer", action="append", default=[], metavar="native|llama-cpp-python|openai:URL[#MODEL]",
                       help="repeatable. native: each --model's own GGUF chat template, free decoding on llama.cpp, "
                       "calls read tolerantly from tags, fenced or bare JSON (the bar constrained decoding must clear). "
                       "llama-cpp-python: its own chatml-function-calling handler on each --model, in "
                       "process. openai:URL: any OpenAI-compatible server (llama-server --jinja, Ollama, vLLM, localtools "
                       "serve), scored strictly on the tool_calls it returns; #MODEL names the model to ask for "
                       "(default: the first in its /models)")
    bench.add_argument("--peers-only", action="store_true", help="run only the peers, not localtools' own modes")
    bench.add_argument("--system", metavar="TEXT", help="a system message for every case and every mode (BFCL's "
                       "questions have none; llama-cpp-python's handler lists the tools only inside one); on the "
                       "multi-turn categories the default is what BFCL's system prompt tells prompting models of a "
                       "multi-turn case (go on calling until the request is done), and --system '' sends none")
    bench.add_argument("--scenarios", action="store_true", help="also run the multi-turn scenarios (a question, tools "
                       "incl. unrelated ones, the results): per auto mode, how often the answer holds the facts and "
                       "the needed tool was called once")
    bench.add_argument("--scenario-language", action="append", choices=["en", "zh", "ja", "es", "all"],
                       help="with --scenarios: the languages the scenarios are asked in (repeatable; default en; the "
                            "tools stay in English)")
    bench.add_argument("--pooled", action="store_true", help="routing among many tools: pool the tools of every case "
                       "of the categories (default: multiple) into one set, deduplicated by name (the first definition "
                       "kept), and ask each sampled case with all of them and with the --route-k tools nearest its "
                       "question (EmbeddingRouter, the routing extra). Per mode: accuracy against the case's expected "
                       "call, mean/max prompt tokens, and the prompts that leave fewer than --max-tokens of the "
                       "model's context (not generated; scored wrong). localtools' own modes only")
    bench.add_argument("--route-k", type=int, action="append", metavar="K",
                       help="with --pooled: tools the router offers per case (repeatable; default 5). On the multi-turn "
                       "categories: each mode once per K, every model turn offered the K tools nearest the user's "
                       "last message (EmbeddingRouter, the routing extra; a tool called earlier in the turn stays "
                       "offered); 0: all the case's tools (the default)")
    bench.add_argument("--router", choices=["embedding", "model"], default="embedding",
                       help="with --route-k on the multi-turn categories: embedding (EmbeddingRouter, the packaged "
                       "MiniLM, which reads English; default) or model (ModelRouter: the model's own probability of "
                       "each tool's name, in any language it reads)")
    bench.add_argument("--max-steps", type=int, metavar="N",
                       help="multi-turn categories: model turns a user turn may take before it is cut short and the case "
                       "fails, as BFCL fails a forced quit (default 10; BFCL's own limit is 20)")
    bench.add_argument("--max-tokens", type=int, default=256, help="most tokens per reply (default 256)")
    bench.add_argument("--disguise-retry", choices=["bar", "required"],
                   help="when a text answer under auto reads as a call, decode again with that opening barred "
                   "(bar, default: the model may still answer in words) or as a call (required)")
    bench.add_argument("--greedy", action="store_true",
                       help="constrained modes settle every choice the grammar leaves by the greedy token, instead of "
                       "the catalog's thresholds for the model (docs/decisions.md)")
    bench.add_argument("--decisions", action="append", metavar="PROFILE|LEVERS",
                       help="each constrained mode once per setting of the decisions (repeatable): a profile (default, "
                            "greedy, bfcl, calibrated) or levers as models.txt writes them (form=0.0001,distinct); "
                            "labelled by the setting")
    bench.add_argument("--levers", action="store_true", help="each constrained mode once per decision lever on the same "
                       "cases: greedy, call (call or text on the calibrated share), more (another call on its "
                       "share), guess (calls whose required values the conversation lacks, on a share under the "
                       "threshold, answered in text; with form and more), copy (a string goes on with the span of the "
                       "conversation it matches, --copy-bonus; with form and more), word (a string cut inside a word of the "
                       "conversation goes on to the word's end, --word-bonus; with form, more, guess and fit), number (a "
                       "number goes on to one the conversation writes, --number-bonus; with form, more, guess and "
                       "fit), cover (another call for values the user listed beside one a call used; with form, "
                       "more, guess and fit), percent (a number the user wrote as a percentage given as its fraction "
                       "where the tool does not take percentages; with form, more, guess and fit), option (an optional "
                       "argument the conversation names, asked of the model; with form, more, guess and fit), shape "
                       "(a date, or a city and its state, in the form its description states; with form, more, guess and fit), "
                       "held (a text answer decoded again as a call, taken when the call's values and its tool's words "
                       "hold the whole request and the conversation its required values; with form, more, guess and "
                       "fit), fit "
                       "(calls to a tool nothing in the "
                       "conversation speaks of, on a share under --fit-threshold, answered in text; with form, more "
                       "and guess), distinct (a reply's repeated call left out), "
                       "ground (optional arguments the "
                       "conversation never mentions left out), samples=N (N replies vote; --samples), all of them but samples, "
                       "and all+samples (all of them with samples=N); "
                       "thresholds from "
                       "`localtools calibrate MODEL` or --call-threshold / --more-threshold")
    bench.add_argument("--lever", action="append", metavar="NAME", help="with --levers: only these (repeatable): "
                       "greedy, call, more, form, guess, copy, word, number, cover, percent, option, shape, held, fit, "
                       "distinct, "
                       "ground, "
                       "samples, all, "
                       "all+samples")
    bench.add_argument("--samples", type=int, action="append", metavar="N",
                       help="with --levers: the samples and all+samples levers once per N (repeatable; default 3)")
    bench.add_argument("--call-threshold", type=float, metavar="P", help="with --levers: the call-or-text threshold")
    bench.add_argument("--more-threshold", type=float, metavar="P", help="with --levers: the another-call threshold")
    bench.add_argument("--form-threshold", type=float, metavar="P", help="with --levers: the parallel-form threshold "
                       "(one list of calls; with more)")
    bench.add_argument("--guess-threshold", type=float, metavar="P", help="with --levers: the call share under which "
                       "a guessed call is answered in text (with form and more)")
    bench.add_argument("--copy-bonus", type=float, metavar="B", help="with --levers: the logit bonus of a token that "
                       "goes on with the span of the conversation a string matches (with form and more)")
    bench.add_argument("--word-bonus", type=float, metavar="B", help="with --levers: the logit bonus of the rest of "
                       "a word of the conversation a string stops inside (with form, more, guess and fit)")
    bench.add_argument("--number-bonus", type=float, metavar="B", help="with --levers: the logit bonus of the next "
                       "digit of a number the conversation writes that a number so far starts, and the penalty of a "
                       "digit after a whole one (with form, more, guess and fit)")
    bench.add_argument("--fit-threshold", type=float, metavar="P", help="with --levers: the call share under which "
                       "a call to a tool nothing in the conversation speaks of is answered in text (with form, more "
                       "and guess)")
    bench.add_argument("--json", metavar="FILE", help="write the summary and every case's result as JSON")
    bench.add_argument("--plot", metavar="FILE.png", help="chart accuracy and latency per mode, grouped by category "
                       "(needs matplotlib)")


def _bench_peers(args: argparse.Namespace, names: list[str], choices: list[str]) -> tuple[dict[tuple[str, str], Any], list[Any]]:
    from ..bench import LlamaCppPythonPeer, Mode, NativePeer, OpenAIPeer, parse_peer
    from ..host._catalog import resolve_model

    peers: list[Any] = []
    for spec in args.peer:
        kind, url, model = parse_peer(spec)
        if kind == "openai":
            peers.append(OpenAIPeer(url, model=model))
        else:
            local = NativePeer if kind == "native" else LlamaCppPythonPeer
            peers += [local(resolve_model(name)[0], model=name) for name in names]
    loaded, modes = {}, []
    for peer in peers:
        loaded[peer.model, peer.name] = peer
        for choice in choices:
            if choice in peer.tool_choices:
                modes.append(Mode(peer.model, peer.name, False, choice, peer=True))
            else:
                print(f"note: {peer.name} has no tool_choice {choice!r}; skipped for it", file=sys.stderr)
    return loaded, modes


def _bench_scenarios(args: argparse.Namespace, models: dict[tuple[str, str], Any], modes: list[Any]) -> tuple[list[Any], list[Any]]:
    from ..bench import SCENARIOS, TRANSLATED, run_scenario, summarize_scenarios

    auto = [m for m in modes if m.tool_choice == "auto"]
    wanted = set(args.scenario_language or ["en"])
    chosen = [s for s in (*SCENARIOS, *TRANSLATED) if s.language in wanted or "all" in wanted]
    results = []
    with _common.steps("scenarios", len(auto) * len(chosen)) as step:
        for scenario in chosen:
            for mode in auto:
                results.append(run_scenario(models[mode.model, mode.backend], mode.label, scenario,
                                            constrained=mode.constrained, max_tokens=args.max_tokens,
                                            decisions=mode.decisions if mode.constrained else None))
                step(f"{mode.label} {scenario.name}")
    return summarize_scenarios(results), results


def _bench_targets(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The --model names and --backend names a bench run covers."""
    from ..host._catalog import default_model

    names, backends = args.model or [default_model()], args.backend or ["llama-cpp"]
    engines = [b for b in backends if b in ENGINES]
    if engines and (not args.model or len(args.model) > 1) and not args.peers_only:
        raise UsageError(f"--backend {engines[0]} needs one --model: the model the engine serves (it names the "
                         "family and labels the results; an engine serves one model)")
    return names, backends


def _bench_models(args: argparse.Namespace, names: list[str], backends: list[str]) -> dict[tuple[str, str], Any]:
    from ..model._load import load

    greedy: dict[str, Any] = {"decisions": "greedy"} if args.greedy else {}
    models = {(name, backend): load(name, backend=backend, **greedy, **_common.engine_options(args, backend))
              for name in names for backend in backends}
    for model in models.values():
        _common.set_disguise_retry(model, args)
    return models


def _bench_multi_turn(args: argparse.Namespace) -> int:
    """``bench --category multi_turn_*``: BFCL's multi-turn cases through ``Agent``, per mode."""
    import statistics
    from dataclasses import asdict

    from rich.table import Table

    from ..agent._routing import EmbeddingRouter, ModelRouter
    from ..bench._multiturn import MULTI_TURN_CATEGORIES, MultiTurnMode, bfcl_instruction, pick_cases, run_multi_turn_case
    from ..model._load import resolve_decisions

    categories = list(dict.fromkeys(args.category))
    if other := [c for c in categories if c not in MULTI_TURN_CATEGORIES]:
        raise UsageError(f"--category {other[0]}: a multi-turn run takes only the multi-turn categories "
                         f"({', '.join(MULTI_TURN_CATEGORIES)})")
    if args.peer or args.peers_only or args.pooled or args.scenarios or args.levers or args.data or args.plot:
        raise UsageError("the multi-turn categories run localtools' own modes on BFCL's data: drop --peer, --peers-only, "
                         "--pooled, --scenarios, --levers, --data and --plot")
    if any(isinstance(k, bool) or k < 0 for k in args.route_k or ()):
        raise UsageError(f"--route-k takes a number of tools, at least 1 (or 0: all of them); got {min(args.route_k)}")
    ks = list(dict.fromkeys(args.route_k or [0]))
    # Made now, so a missing routing extra fails before the models load; shared by every model.
    embedding = {k: EmbeddingRouter(k) for k in ks if k and args.router == "embedding"}
    names, backends = _bench_targets(args)
    models = _bench_models(args, names, backends)
    modes: list[tuple[Any, MultiTurnMode]] = []
    for (name, backend), model in models.items():
        for k in ks:
            router = None if not k else embedding.get(k) or ModelRouter(model, k)
            routed = f" route {k}{' by the model' if args.router == 'model' else ''}" if k else ""
            for decoding in args.mode or ["free", "constrained"]:
                if decoding == "free":
                    modes.append((model, MultiTurnMode(f"{name} {backend} free{routed}", False, None, router)))
                    continue
                for setting in args.decisions or ["default"]:
                    decisions = model.decisions if setting == "default" and not args.decisions else \
                        resolve_decisions(setting, name)
                    modes.append((model, MultiTurnMode(f"{name} {backend} constrained {setting}{routed}", True, decisions,
                                                       router)))
    cases = [c for category in categories for c in pick_cases(category, args.sample, args.seed)]
    max_steps = args.max_steps or 10
    system = bfcl_instruction() if args.system is None else args.system
    results = []
    with _common.steps("bench", len(cases) * len(modes)) as step:
        for case in cases:  # case by case, every mode: a run cut short still compares the modes on the same cases
            for model, mode in modes:
                result = run_multi_turn_case(model, case, mode, max_steps=max_steps, max_tokens=args.max_tokens,
                                             system=system)
                results.append(result)
                step(f"{mode.label} {case.id}: {result.turns_passed}/{result.turns} turns")
    rows = []
    for _, mode in modes:
        for category in categories:
            mine = [r for r in results if r.mode == mode.label and r.category == category]
            if not mine:
                continue
            rows.append({"mode": mode.label, "category": category, "cases": len(mine),
                         "accuracy": sum(r.correct for r in mine) / len(mine),
                         "turns_passed": sum(r.turns_passed for r in mine), "turns": sum(r.turns for r in mine),
                         "mean_calls": statistics.mean(r.calls for r in mine),
                         "mean_steps": statistics.mean(r.steps for r in mine),
                         "mean_prompt_tokens": statistics.mean(r.prompt_tokens for r in mine),
                         "p50_seconds": statistics.median(r.seconds for r in mine),
                         "no_call_kept": sum(r.no_call_kept for r in mine),
                         "no_call_turns": sum(r.no_call_turns for r in mine),
                         "taken": {p: sum(r.taken.get(p, 0) for r in mine) for p in sorted({p for r in mine for p in r.taken})}})
    table = Table(title=f"BFCL multi-turn, {len(cases)} cases, at most {max_steps} steps a turn, BFCL's checker")
    # "no-call turns kept": of the turns whose ground truth makes no call (a function or a value is
    # missing), those the agent made none in: what BFCL's state check asks there.
    for column in ("mode", "category", "cases", "accuracy", "turns passed", "no-call turns kept", "calls", "steps",
                   "prompt tokens", "p50 s", "decisions taken"):
        table.add_column(column, justify="left" if column in ("mode", "category", "decisions taken") else "right")
    for row in rows:
        table.add_row(row["mode"], row["category"], str(row["cases"]), f"{row['accuracy']:.1%}",
                      f"{row['turns_passed']}/{row['turns']}",
                      f"{row['no_call_kept']}/{row['no_call_turns']}" if row["no_call_turns"] else "-",
                      f"{row['mean_calls']:.1f}", f"{row['mean_steps']:.1f}",
                      f"{row['mean_prompt_tokens']:.0f}", f"{row['p50_seconds']:.0f}",
                      ", ".join(f"{p} {n}" for p, n in row["taken"].items()) or "-")
    _common.print_table(table)
    if args.json:
        meta = {"categories": categories, "sample": args.sample, "seed": args.seed, "max_steps": max_steps, "system": system,
                "max_tokens": args.max_tokens, "route_k": ks, "router": args.router, "checker": "bfcl_eval multi_turn_checker"}
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": rows, "cases": [asdict(r) for r in results]},
                                              indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def _bench_pooled(args: argparse.Namespace) -> int:
    """``bench --pooled``: every case against one pooled tool set, all of it vs routed to the top k."""
    from rich.table import Table

    from ..agent._routing import EmbeddingRouter
    from ..bench import bfcl_data_dir, load_cases, sample, write_json
    from ..bench._pooled import PooledMode, pool_tools, run_pooled, summarize_pooled

    if args.peer or args.peers_only or args.plot or args.scenarios:
        raise UsageError("--pooled runs localtools' own modes only (it counts each prompt's tokens before generating): "
                         "drop --peer, --peers-only, --plot and --scenarios")
    if args.router != "embedding":
        raise UsageError("--pooled routes by embedding; --router model applies to the multi-turn categories")
    ks = list(dict.fromkeys(args.route_k or [5]))
    for k in ks:
        EmbeddingRouter(k)  # a bad k or a missing routing extra fails now, not after loading the models
    folder = args.data or bfcl_data_dir()
    categories = args.category or ["multiple"]
    every = {category: load_cases(folder, category) for category in categories}
    pool = pool_tools(case for category in categories for case in every[category])
    cases = [c for category in categories for c in sample(every[category], args.sample, args.seed)]
    if args.system:
        cases = [c.with_system(args.system) for c in cases]
    names, backends = _bench_targets(args)
    modes = [PooledMode(name, backend, decoding == "constrained", choice, route_k=k)
             for name in names for backend in backends for choice in args.tool_choice or ["auto"]
             for decoding in args.mode or ["free", "constrained"] for k in [None, *ks]]
    models = _bench_models(args, names, backends)
    with _common.steps("bench", len(cases) * len(modes)) as step:
        results = run_pooled(models, modes, cases, pool, max_tokens=args.max_tokens,
                             on_result=lambda r: step(f"{r.mode} {r.case_id}"))
    rows = summarize_pooled(results, modes)
    contexts = sorted({str(m.backend.capabilities.n_ctx or "?") for m in models.values()})
    table = Table(title=f"{len(cases)} cases from {', '.join(categories)}, asked against {len(pool)} pooled tools "
                  f"(context {'/'.join(contexts)} tokens, max_tokens {args.max_tokens})")
    for column in ("mode", "offered", "cases", "accuracy", "valid", "expected offered", "prompt tok mean", "max",
                   "over context", "p50 s", "route ms"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for row in rows:
        table.add_row(row["mode"], f"{row['offered_mean']:.0f}", str(row["cases"]), f"{row['accuracy']:.1%}",
                      f"{row['valid_rate']:.1%}", f"{row['expected_offered_rate']:.1%}", f"{row['prompt_tokens_mean']:,.0f}",
                      f"{row['prompt_tokens_max']:,}", str(row["over_context"]), _common.fmt(row["latency_p50"], ".2f"),
                      _common.fmt(row["route_ms_mean"], ".0f"))
    _common.print_table(table)
    for row in rows:
        if "accuracy_vs_all" in row:
            print(f"{row['mode']} vs all tools: accuracy {row['accuracy_vs_all'] * 100:+.1f} points, mean prompt "
                  f"{row['prompt_tokens_ratio_vs_all']:.3f}x the tokens")
    if pool.redefined:
        affected = len({r.case_id for r in results if r.redefined})
        print(f"note: {len(pool.redefined)} tool names are defined differently by later cases; the first definition "
              f"is kept, and {affected} of the {len(cases)} cases expect such a tool")
    if args.json:
        meta = {"data": str(folder), "categories": categories, "sample": args.sample, "seed": args.seed,
                "system": args.system, "max_tokens": args.max_tokens, "modes": [m.label for m in modes],
                "pooled_tools": len(pool), "redefined_tools": pool.redefined, "route_k": ks, "n_ctx": contexts}
        write_json(args.json, rows, list(results), meta)
        print(f"wrote {args.json}")
    return 0


def _setting_modes(settings: list[str], modes: list[Any]) -> list[Any]:
    """Each constrained mode once per setting of the decisions (``resolve_decisions``), labelled by it."""
    from dataclasses import replace

    from ..model._decide import Decisions
    from ..model._load import resolve_decisions

    return [m for mode in modes for m in (
        [replace(mode, decisions=resolve_decisions(setting, mode.model) or Decisions(), lever=setting)
         for setting in dict.fromkeys(settings)] if mode.constrained else [mode])]


#: The levers --lever names.
_LEVERS = ("greedy", "call", "more", "form", "guess", "copy", "word", "number", "cover", "percent", "option", "shape",
           "held", "echo", "told", "fit", "distinct", "ground", "samples", "all", "all+samples")


#: The levers that read the conversation or the tools: on/off settings, each measured on form, more,
#: guess and fit.
_READING = ("cover", "percent", "option", "shape", "held", "echo", "told")


def _lever_modes(args: argparse.Namespace, modes: list[Any], models: dict[tuple[str, str], Any]) -> list[Any]:
    """Each constrained mode once per lever: greedy, each decision alone, all together."""
    from dataclasses import replace

    from ..model._decide import Decisions
    from ..model._load import with_calibration

    out = []
    for mode in modes:
        if not mode.constrained:
            out.append(mode)
            continue
        # The levers are measured on the thresholds `calibrate` wrote, asked for here by --levers itself,
        # else on the catalog's.
        own = with_calibration(mode.model) or models[mode.model, mode.backend].decisions or Decisions()
        call = args.call_threshold if args.call_threshold is not None else own.call
        more = args.more_threshold if args.more_threshold is not None else own.more
        form = args.form_threshold if args.form_threshold is not None else own.form
        guess = args.guess_threshold if args.guess_threshold is not None else own.guess
        copy = args.copy_bonus if args.copy_bonus is not None else own.copy
        fit = args.fit_threshold if args.fit_threshold is not None else own.fit
        word = args.word_bonus if args.word_bonus is not None else own.word
        number = args.number_bonus if args.number_bonus is not None else own.number
        if call is None and more is None and form is None and guess is None and fit is None:
            raise UsageError(f"--levers needs thresholds for {mode.model}: run `localtools calibrate {mode.model}` or "
                             "pass --call-threshold, --more-threshold or --form-threshold")
        every = Decisions(call=call, more=more, form=form, guess=guess, copy=copy, fit=fit, word=word, number=number,
                          distinct=True, ground=True, **{name: getattr(own, name) for name in _READING})
        # Each lever by the name --lever takes: its label in the results, and how it decides.
        # A threshold calibrate left unset (it found the decision best never taken) has no lever.
        levers = {"greedy": [("greedy", Decisions())],
                  **({"call": [(f"call>={call:g}", Decisions(call=call))]} if call is not None else {}),
                  **({"more": [(f"more>={more:g}", Decisions(more=more))]} if more is not None else {}),
                  **({"form": [(f"form>={form:g}", Decisions(form=form, more=more))]} if form is not None else {}),
                  **({"guess": [(f"guess<{guess:g}", Decisions(form=form, more=more, guess=guess))]}
                     if guess is not None else {}),
                  **({"copy": [(f"copy+{copy:g}", Decisions(form=form, more=more, copy=copy))]}
                     if copy is not None else {}),
                  **({"fit": [(f"fit<{fit:g}", Decisions(form=form, more=more, guess=guess, fit=fit))]}
                     if fit is not None else {}),
                  **({"word": [(f"word+{word:g}", Decisions(form=form, more=more, guess=guess, fit=fit, word=word))]}
                     if word is not None else {}),
                  **({"number": [(f"number+{number:g}", Decisions(form=form, more=more, guess=guess, fit=fit,
                                                                  number=number))]}
                     if number is not None else {}),
                  # The switches that read the conversation or the tools, each on form, more, guess and fit.
                  **{name: [(name, Decisions(form=form, more=more, guess=guess, fit=fit, **{name: True}))]
                     for name in _READING},
                  "distinct": [("distinct", Decisions(distinct=True))], "ground": [("ground", Decisions(ground=True))],
                  "samples": [(f"samples={n}", Decisions(samples=n)) for n in dict.fromkeys(args.samples or [3])],
                  "all": [("all", every)],
                  "all+samples": [(f"all+samples={n}", replace(every, samples=n))
                                  for n in dict.fromkeys(args.samples or [3])]}
        wanted = set(args.lever or ())
        if unknown := wanted - set(_LEVERS):
            raise UsageError(f"--lever {', '.join(sorted(unknown))}: not a lever; expected {', '.join(_LEVERS)}")
        if unset := sorted(wanted - set(levers)):
            flags = [f"--{name}-bonus" if name in ("copy", "word", "number") else f"--{name}-threshold"
                     for name in unset]
            raise UsageError(f"--lever {', '.join(unset)}: no threshold for {mode.model} (its calibration "
                             f"found it best never taken, or it has none by default); pass {' and '.join(flags)}")
        # all+samples costs the most and measures one question (does voting add to the rest?): asked for by name.
        out += [replace(mode, decisions=d, lever=label) for key, each in levers.items()
                if key in wanted or (not wanted and key != "all+samples") for label, d in each]
    return out


def _decides(decisions: Any) -> str:
    """How a model's constrained mode decides, in a line."""
    from ..model._decide import SWITCHES

    if decisions is None or not decisions.active:
        return "greedy"
    set_ = [f"{k} {getattr(decisions, k):g}" for k in ("call", "more", "form", "guess", "copy", "fit", "word", "number")
            if getattr(decisions, k) is not None]
    return "on " + ", ".join(set_ + [k for k in SWITCHES if getattr(decisions, k)])


def _apart_from_calibration(cases: list[Any], names: list[str]) -> list[Any]:
    """``cases`` less those a model's calibration was made on: thresholds are reported on cases
    they were not chosen on (the calibration split avoids ``--sample 40 --seed 0``, but another
    sample may meet it)."""
    import json

    from ..model._load import calibration_path

    used: set[str] = set()
    for name in names:
        path = calibration_path(name)
        if path.is_file():
            try:
                used |= {str(p["case_id"]) for p in json.loads(path.read_text(encoding="utf-8")).get("probes", [])}
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # not a calibration file: load() says so when it is read for thresholds
    kept = [c for c in cases if c.id not in used]
    if len(kept) < len(cases):
        print(f"note: {len(cases) - len(kept)} of the {len(cases)} cases were in a calibration split and are left out",
              file=sys.stderr)
    return kept


def main(args: argparse.Namespace) -> int:
    from rich.table import Table

    from ..bench import CATEGORIES, Mode, bfcl_data_dir, load_cases, run_bench, sample, summarize, write_json

    if args.pooled:
        return _bench_pooled(args)
    if any(c.startswith("multi_turn") for c in args.category or ()):
        return _bench_multi_turn(args)
    if args.max_steps is not None:
        raise UsageError("--max-steps applies to the multi-turn categories")
    if args.route_k:
        raise UsageError("--route-k applies to --pooled and the multi-turn categories")
    if args.router != "embedding":
        raise UsageError("--router applies to --route-k on the multi-turn categories")
    if args.peers_only and not args.peer:
        raise UsageError("--peers-only needs at least one --peer")
    if (args.call_threshold is not None or args.more_threshold is not None or args.form_threshold is not None
            or args.guess_threshold is not None or args.copy_bonus is not None or args.fit_threshold is not None
            or args.word_bonus is not None or args.number_bonus is not None or args.samples) and not args.levers:
        raise UsageError("--call-threshold, --more-threshold, --form-threshold, --guess-threshold, --copy-bonus, "
                         "--fit-threshold, --word-bonus, --number-bonus and --samples apply to --levers")
    if any(n < 2 for n in args.samples or ()):
        raise UsageError(f"--samples takes 2 or more replies to vote, got {min(args.samples)}")
    if args.plot:
        from ..bench._plot import plot_summary, pyplot

        pyplot()  # a missing matplotlib fails now, not after the run
    folder = args.data or bfcl_data_dir()
    categories = args.category or list(CATEGORIES)
    if args.split == "calibration":
        from ..bench._calibrate import calibration_cases

        cases = [c for cat in categories for c in calibration_cases(load_cases(folder, cat), args.sample or 40)]
    else:
        cases = [c for cat in categories for c in sample(load_cases(folder, cat), args.sample, args.seed)]
    if args.system:
        cases = [c.with_system(args.system) for c in cases]
    names, backends = _bench_targets(args)
    choices = args.tool_choice or ["auto"]
    modes = [] if args.peers_only else [
        Mode(name, backend, decoding == "constrained", choice)
        for name in names for backend in backends
        for choice in choices for decoding in (args.mode or ["free", "constrained"])]
    models: dict[tuple[str, str], Any] = {} if args.peers_only else _bench_models(args, names, backends)
    peers, peer_modes = _bench_peers(args, names, choices)
    if args.decisions:
        if args.levers or args.greedy:
            raise UsageError("--decisions names each setting to run: it does not go with --levers or --greedy")
        modes = _setting_modes(args.decisions, modes)
    if args.levers:
        modes = _lever_modes(args, modes, models)
        if args.split == "report":
            cases = _apart_from_calibration(cases, names)
    deciding = {f"{name} {backend}": _decides(model.decisions) for (name, backend), model in models.items()}
    if not args.levers and not args.decisions:
        for label, how in deciding.items():
            print(f"note: {label} constrained decides {how}", file=sys.stderr)
    models.update(peers)
    modes += peer_modes
    with _common.steps("bench", len(cases) * len(modes)) as step:
        results = run_bench(models, modes, cases, max_tokens=args.max_tokens,
                            on_result=lambda r: step(f"{r.mode} {r.case_id}"))
    rows = summarize(results, modes)
    scenario_rows, scenario_results = _bench_scenarios(args, models, modes) if args.scenarios else ([], [])
    table = Table(title=f"{len(cases)} cases from {folder}")
    for column in ("mode", "category", "cases", "accuracy", "valid", "disguised", "caught", "repaired", "refused",
                   "p50 s", "p95 s", "ttft s", "tok/s", "grammar ratio"):
        table.add_column(column, justify="left" if column in ("mode", "category") else "right")
    for row in rows:
        table.add_row(row["mode"], row["category"], str(row["cases"]), f"{row['accuracy']:.1%}", f"{row['valid_rate']:.1%}",
                      str(row["disguised_calls"]), str(row["disguises_caught"]), str(row["calls_repaired"]),
                      str(row["calls_refused"]),
                      _common.fmt(row["latency_p50"], ".2f"), _common.fmt(row["latency_p95"], ".2f"), _common.fmt(row["ttft_p50"], ".2f"),
                      _common.fmt(row["generated_tokens_per_s"], ".1f"), _common.fmt(row.get("grammar_overhead_ratio"), ".2f"))
    _common.print_table(table)
    if scenario_rows:
        scenarios = Table(title="multi-turn scenarios (auto modes)")
        for column in ("mode", "language", "scenarios", "answered", "called once", "mean steps"):
            scenarios.add_column(column, justify="left" if column in ("mode", "language") else "right")
        for srow in scenario_rows:
            scenarios.add_row(srow["mode"], srow["language"], str(srow["scenarios"]), f"{srow['answer_rate']:.0%}",
                              f"{srow['called_once_rate']:.0%}", f"{srow['mean_steps']:.1f}")
        _common.print_table(scenarios)
    if args.json:
        meta = {"data": str(folder), "categories": categories, "sample": args.sample, "seed": args.seed, "split": args.split,
                "system": args.system, "max_tokens": args.max_tokens, "modes": [m.label for m in modes],
                "decisions": deciding}
        write_json(args.json, rows, results, meta, scenarios=(scenario_rows, scenario_results))
        print(f"wrote {args.json}")
    if args.plot:
        plot_summary(rows, args.plot, title=f"{len(cases)} BFCL-format cases, {args.sample} per category")
        print(f"wrote {args.plot}")
    return 0
