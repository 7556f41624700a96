"""``localtools templates``: list families, check a template against another, derive a family."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    templates = sub.add_parser(
        "templates", help="list model families and their files; check a family's template against another",
        description="With no command: every family (built-in and from $LOCALTOOLS_FAMILIES), its files and call "
        "syntax. 'check FAMILY --against FILE' renders a set of conversations (system prompt, calls, several calls "
        "in one turn, tool results, unicode; with and without tools) with the family's template and with FILE's "
        "(a .jinja file, or a .gguf's own chat template) and prints, per rendering, 'identical' or the first "
        "differing byte with context. Exit status 1 when any differs.")
    tsub = templates.add_subparsers(dest="templates_command")
    check = tsub.add_parser("check", help="a family's template against a .jinja file or a GGUF's own template")
    check.add_argument("family", help="family name or alias")
    check.add_argument("--against", required=True, metavar="FILE", help="a .jinja template or a .gguf model file")
    derive = tsub.add_parser(
        "derive", help="read the call syntax off a model's own template and print it as a families.toml entry",
        description="Renders assistant turns with text, one call, two and three calls, and reads off the call "
        "syntax (where the name and arguments go, the argument syntax, the text between calls, reasoning tags, "
        "stop strings). Prints the record with the family each candidate was checked as, and the round trip: calls "
        "the template renders must parse back to the same calls and be in the grammar. With --save DIR, writes "
        "families.toml, the template and the grammar there: put DIR in $LOCALTOOLS_FAMILIES and edit them (give the "
        "family a name and match rules). Exit status 1 when the syntax cannot be derived or does not round-trip.")
    derive.add_argument("source", metavar="FILE", help="a .gguf model file or a .jinja chat template")
    derive.add_argument("--name", default="auto", help="the family's name in the record (default: auto)")
    derive.add_argument("--save", metavar="DIR", help="write families.toml, the template and the grammar into DIR")


def main(args: argparse.Namespace) -> int:
    from ..families._families import families

    if getattr(args, "templates_command", None) == "check":
        return _check_template(args.family, args.against)
    if getattr(args, "templates_command", None) == "derive":
        return _derive_template(args.source, args.name, args.save)
    for fam in families().values():
        aliases = f" (aliases: {', '.join(fam.aliases)})" if fam.aliases else ""
        thinks = f"  reasoning: {fam.reasoning_start}…{fam.reasoning_end}" if fam.reasoning_start else ""
        print(f"{fam.name}{aliases}\n  template: {fam.template}  grammar: {fam.grammar}  "
              f"calls: {fam.call_start}…{fam.call_end or ''}  arguments: {fam.args_syntax}  "
              f"parallel: {'yes' if fam.parallel else 'no'}{thinks}")
    return 0


def _check_template(family_name: str, against: str) -> int:
    from ..families._families import get_family
    from ..families._template_check import compare_templates, load_template

    family = get_family(family_name)
    results = compare_templates(family.template_source(), load_template(against))
    for r in results:
        what = f"{r.label}, {'with' if r.tools else 'without'} tools"
        if r.error:
            print(f"error      {what}: {r.error}")
            continue
        if r.both_refuse:
            print(f"both refuse {what}: {r.their_error}")
            continue
        at = r.first_difference
        if at is None:
            print(f"identical  {what} ({len(r.ours)} chars)")
            continue
        line = r.ours.count("\n", 0, at) + 1
        print(f"differs    {what}: first at character {at} (line {line})")
        print(f"  {family.name}: {r.ours[max(0, at - 40):at + 40]!r}")
        print(f"  {Path(against).name}: {r.theirs[max(0, at - 40):at + 40]!r}")
    same = sum(r.first_difference is None and not r.error for r in results)
    print(f"{same} of {len(results)} renderings identical (a conversation both templates refuse counts as agreed)")
    return 0 if same == len(results) else 1


def _derive_template(source: str, name: str, save: str | None) -> int:
    import tempfile

    from .._errors import DeriveError, FamilyNotFound
    from ..families._choose import choose_family
    from ..families._derive import derive, round_trip
    from ..families._template_check import load_template

    template = load_template(source)
    try:
        derived = derive(template)
    except DeriveError as exc:
        print(f"cannot derive the call syntax of {Path(source).name}: {exc}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        trip = round_trip(derived.family(Path(save) if save else Path(tmp), name))
    print(f"# {Path(source).name}: call syntax derived from its own renderings")
    for note in derived.notes:
        print(f"# note: {note}")
    print(derived.toml(name), end="")
    print(f"# grammar file {derived.record['grammar']}:")
    print("\n".join(f"#   {line}" for line in derived.grammar.splitlines()[1:]))
    if trip.ok:
        print(f"# round trip: the template's calls parse back and are in the grammar ({trip.turns} turns)")
    else:
        print("# round trip FAILED: " + "; ".join(trip.failures[:3]))
    try:
        _, check = choose_family({"tokenizer.chat_template": template})
        print(f"# as loaded, this model's family is {check}")
    except FamilyNotFound as exc:
        print(f"# as loaded: {exc}")
    if save:
        print(f"# written to {save}: families.toml, {derived.record['template']}, {derived.record['grammar']}")
    return 0 if trip.ok else 1
