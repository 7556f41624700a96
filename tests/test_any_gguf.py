"""Any GGUF gets the right prompt: every official template llama.cpp vendors (taken from the
llama-cpp-python sdist at first use and cached, as the models are) gets a family that renders as
it does, or ``auto`` (the template itself, with a call syntax derived from it), or a typed refusal
with the reason. The verdict for each is pinned in tests/data/official_template_verdicts.json, so a
regression in any of them fails; ``UPDATE_VERDICTS=1`` rewrites the file (review the diff)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from localtools import FamilyMismatchWarning, FamilyNotFound, Verdict, choose_family, derive, get_family
from localtools.families._choose import check_family
from localtools.families._derive import round_trip
from localtools.families._template_check import compare_templates
from localtools.host._engines import official_templates

VERDICTS = Path(__file__).parent / "data" / "official_template_verdicts.json"


@pytest.fixture(scope="module")
def folder() -> Path:
    return official_templates()


def _tool_templates(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.jinja") if "tools" in p.read_text(encoding="utf-8"))


def _metadata(source: str) -> dict[str, Any]:
    return {"general.architecture": "unknown", "tokenizer.chat_template": source}


def _verdict(source: str) -> str:
    try:
        family, check = choose_family(_metadata(source))
    except FamilyNotFound as exc:
        return "refused: " + str(exc).split("cannot be derived: ")[-1].split(". Fix:")[0][:80]
    return "auto" if check.verdict is Verdict.AUTO else f"{check.verdict.value}: {family.name}"


def test_verdicts_are_pinned_for_every_official_template(folder: Path) -> None:
    found = {p.name: _verdict(p.read_text(encoding="utf-8")) for p in _tool_templates(folder)}
    if os.environ.get("UPDATE_VERDICTS"):
        VERDICTS.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert found == json.loads(VERDICTS.read_text(encoding="utf-8"))


def test_no_template_gets_a_family_that_differs_and_most_render_identically(folder: Path) -> None:
    identical = refused = 0
    for path in _tool_templates(folder):
        source = path.read_text(encoding="utf-8")
        try:
            family, check = choose_family(_metadata(source))
        except FamilyNotFound:
            refused += 1
            continue
        if check.verdict is Verdict.AUTO:
            assert family.template_source() == source  # the prompt is the template itself
        else:
            assert check.verdict is Verdict.IDENTICAL, (path.name, check)
            results = compare_templates(family.template_source(), source)
            assert all(r.first_difference is None and not r.our_error for r in results if not r.their_error), path.name
        identical += 1
    assert identical >= 55 and identical + refused == len(_tool_templates(folder)), (identical, refused)


def test_call_syntaxes_round_trip_for_most_official_templates(folder: Path) -> None:
    trips = []
    for path in _tool_templates(folder):
        source = path.read_text(encoding="utf-8")
        try:
            family, _ = choose_family(_metadata(source))
        except FamilyNotFound:
            continue
        if round_trip(family, source).ok:
            trips.append(path.name)
    assert len(trips) >= 45, trips


@pytest.mark.parametrize("name", ["GLM-4.6.jinja", "deepseek-ai-DeepSeek-V3.2.jinja", "Qwen-QwQ-32B.jinja",
                                  "upstage-Solar-Open-100B.jinja", "ByteDance-Seed-OSS.jinja", "openai-gpt-oss-120b.jinja"])
def test_derived_syntaxes_of_several_kinds(folder: Path, name: str) -> None:
    # GLM's <arg_key>/<arg_value>, DeepSeek's typed string="false" tag, Hermes-style JSON, an id
    # between tags, Python-printed lists, a name written twice: each read off the template.
    source = (folder / name).read_text(encoding="utf-8")
    derived = derive(source)
    family = derived.family(Path(os.environ.get("TMPDIR", "/tmp")) / "localtools-derive-test" / name)
    trip = round_trip(family, source)
    assert trip.ok and trip.turns >= 4, trip.failures


def test_a_template_that_drops_calls_is_refused_with_the_reason(folder: Path) -> None:
    source = (folder / "LFM2-8B-A1B.jinja").read_text(encoding="utf-8")
    with pytest.raises(FamilyNotFound, match=r"drops an assistant's calls.*templates derive"):
        choose_family(_metadata(source))


def test_a_named_family_that_differs_loads_with_a_warning_naming_where(folder: Path) -> None:
    source = (folder / "GLM-4.6.jinja").read_text(encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        family, check = choose_family(_metadata(source), "qwen3")
    assert family.name == "qwen3" and check.verdict is Verdict.DIFFERS
    (warning,) = [w for w in caught if issubclass(w.category, FamilyMismatchWarning)]
    assert "differs at character 0" in str(warning.message) and "[gMASK]" in str(warning.message)
    verdict, _ = check_family(get_family("qwen3"), (folder / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8"))
    assert verdict is Verdict.IDENTICAL


def _broken_calls(reply: str) -> list[str]:
    """Variants of a valid call reply that no grammar for these tools may admit."""
    return [reply.replace('"Oslo"', "3"), reply.replace("get_weather", "get_wether"),
            reply.replace('{"city": "Oslo"}', "{}"), reply + " and more text"]


def test_templates_derive_on_the_catalog_gguf_equals_its_family(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from localtools import catalog
    from localtools.cli import main
    from localtools.families._derive import rendered_reply
    from localtools.families._reply import reply_format
    from localtools.families._template_check import CONVERSATIONS, TOOLS
    from localtools.grammar import matches

    gguf = catalog()["qwen2.5-coder-0.5b"].path
    assert main(["templates", "derive", str(gguf), "--save", str(tmp_path), "--name", "qwen-derived"]) == 0
    out = capsys.readouterr().out
    assert '"qwen-derived" = {' in out and "round trip: the template's calls parse back" in out
    assert "this model's family is qwen2.5: identical" in out
    monkey = pytest.MonkeyPatch()
    monkey.setenv("LOCALTOOLS_FAMILIES", str(tmp_path))
    try:
        derived, named = get_family("qwen-derived"), get_family("qwen2.5")
        source = derived.template_source()
        assert compare_templates(named.template_source(), source) and all(
            r.first_difference is None for r in compare_templates(named.template_source(), source))
        messages = dict(CONVERSATIONS)["system, call, result, answer, follow-up"]
        _, reply = rendered_reply(source, messages, 2, TOOLS, derived.stop)
        reply = reply.removesuffix("<|im_end|>\n").strip()
        for fam in (derived, named):
            grammar = reply_format(fam, TOOLS, "required").grammar
            assert grammar is not None and matches(grammar, reply)
            assert not any(matches(grammar, bad) for bad in _broken_calls(reply))
    finally:
        monkey.undo()


def test_templates_derive_says_which_part_cannot_be_read(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    from localtools.cli import main

    assert main(["templates", "derive", str(folder / "LFM2-8B-A1B.jinja")]) == 1
    assert "the template drops an assistant's calls" in capsys.readouterr().err
