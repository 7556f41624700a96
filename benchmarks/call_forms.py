"""How each call-form mechanism of a family record changes accuracy, against free decoding and the
model's own template.

    .venv/bin/python benchmarks/call_forms.py [--model qwen2.5-coder-0.5b] [--sample 40] [--json out.json]
                                              [--only bfcl|scenarios]

One run, the same cases for every mode. Constrained decoding goes through the stages of the family
record cumulatively, each a mode on one shared loaded model, so only the grammar and prompt
differ: ``before`` (a call tagged or bare, compact JSON, no hints: the grammar before call forms
were data), ``+fenced`` (also the fenced ```json form), ``+natural`` (also the model's own
newlines and indentation), ``+lists`` (also a JSON list of calls, fenced or bare, and the
``parallel_hint``), ``+result`` (also the ``result_hint`` after tool results: the record as
shipped). ``free`` is free decoding with the record as shipped; ``native`` the peer (the GGUF's
own template, free, tolerant parse). BFCL's cases are single-turn, so ``+result`` runs only in the
multi-turn scenarios. Prints accuracy, valid replies and disguised calls per category, then the
scenarios per mode; ``--json`` keeps every case.
"""

from __future__ import annotations

import argparse
import dataclasses

from localtools import Model, load
from localtools.bench._bfcl import CATEGORIES, bfcl_data_dir, load_cases, sample
from localtools.bench._peers import NativePeer, Peer
from localtools.bench._runner import Mode, run_bench, summarize, write_json
from localtools.bench._scenarios import SCENARIOS, ScenarioResult, run_scenario, summarize_scenarios
from localtools.families._families import Family
from localtools.host._catalog import resolve_model

#: The hints the stages add when the family record has none.
LIST_HINT = ("When the request needs several function calls, return all of them at once as a JSON list of "
             '{"name": ..., "arguments": ...} objects.')
RESULT_HINT = ("Now answer the user's question from the results above, in plain text. Call another function "
               "only if the answer needs one.")


def stages(shipped: Family) -> list[tuple[str, Family]]:
    """The family record at each stage, cumulatively (see the module docstring)."""
    before = dataclasses.replace(shipped, call_forms=("call-tagged", "call-bare"), layout="compact",
                                 parallel_hint="", result_hint="")
    fenced = dataclasses.replace(before, call_forms=("call-tagged", "call-fenced", "call-bare"))
    natural = dataclasses.replace(fenced, layout="natural")
    lists = dataclasses.replace(natural, call_forms=(*fenced.call_forms, "list-fenced", "list-bare"),
                                parallel_hint=shipped.parallel_hint or LIST_HINT)
    result = dataclasses.replace(lists, result_hint=shipped.result_hint or RESULT_HINT)
    return [("before", before), ("+fenced", fenced), ("+natural", natural), ("+lists", lists), ("+result", result)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--category", action="append", choices=CATEGORIES)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--no-native", action="store_true", help="leave out the native peer")
    parser.add_argument("--only", choices=["bfcl", "scenarios"], help="run one part (default: both)")
    parser.add_argument("--stage", action="append", choices=["before", "+fenced", "+natural", "+lists", "+result"],
                        help="run these stages only (repeatable; default all)")
    parser.add_argument("--no-free", action="store_true", help="leave out free decoding")
    parser.add_argument("--json")
    args = parser.parse_args()

    path, entry = resolve_model(args.model)
    base = load(args.model)
    models: dict[tuple[str, str], Model | Peer] = {(args.model, "llama-cpp"): base}
    modes = [] if args.no_free else [Mode(args.model, "llama-cpp", False)]
    for stage, family in stages(base.family):
        if args.stage and stage not in args.stage:
            continue
        name = f"{args.model}[{stage}]"
        models[name, "llama-cpp"] = Model(base.backend, family=family)
        modes.append(Mode(name, "llama-cpp", True))
    if not args.no_native:
        peer = NativePeer(path, model=args.model)
        models[args.model, peer.name] = peer
        modes.append(Mode(args.model, peer.name, False, peer=True))
    single_turn = [m for m in modes if not m.model.endswith("[+result]")]

    results, rows = [], []
    if args.only != "scenarios":
        folder = bfcl_data_dir()
        cases = [c for cat in args.category or CATEGORIES for c in sample(load_cases(folder, cat), args.sample, args.seed)]
        done = 0

        def progress(result: object) -> None:
            nonlocal done
            done += 1
            if done % 25 == 0:
                print(f"{done}/{len(cases) * len(single_turn)}", flush=True)

        results = run_bench(models, single_turn, cases, max_tokens=args.max_tokens, on_result=progress)
        rows = summarize(results, single_turn)
        print("| mode | category | cases | accuracy | valid | disguised |")
        print("| --- | --- | --- | --- | --- | --- |")
        for row in rows:
            print(f"| {row['mode']} | {row['category']} | {row['cases']} | {row['accuracy']:.1%} | "
                  f"{row['valid_rate']:.1%} | {row['disguised_calls']} |")
    scenario_results: list[ScenarioResult] = []
    if args.only != "bfcl":
        scenario_results = [run_scenario(models[m.model, m.backend], m.label, sc, constrained=m.constrained,
                                         max_tokens=args.max_tokens) for sc in SCENARIOS for m in modes]
        print("\n| mode | scenarios | answered | called once | mean steps |")
        print("| --- | --- | --- | --- | --- |")
        for srow in summarize_scenarios(scenario_results):
            print(f"| {srow['mode']} | {srow['scenarios']} | {srow['answer_rate']:.0%} | "
                  f"{srow['called_once_rate']:.0%} | {srow['mean_steps']:.1f} |")
    if args.json:
        write_json(args.json, rows, results, {"model": args.model, "sample": args.sample, "seed": args.seed,
                                              "family": base.family.name, "entry": entry.name if entry else str(path)},
                   scenarios=(summarize_scenarios(scenario_results), scenario_results))


if __name__ == "__main__":
    main()
