"""The official JSON-Schema-Test-Suite (draft 2020-12), every group as a tool's parameters: what
the constrained path admits against the suite's verdicts (grammar matching only, no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localtools.bench._suite import SuiteScore, fetch_suite, load_suite, score_suite
from localtools.host._catalog import cache_dir

EXPECTED = Path(__file__).parent / "data" / "schema_suite_expected.txt"


@pytest.fixture(scope="module")
def score() -> SuiteScore:
    # Downloaded once from the jsonschema sdist, then read from the cache like the models.
    return score_suite(load_suite(fetch_suite(cache_dir().parent / "suites")))


def test_no_invalid_instance_is_admitted(score: SuiteScore) -> None:
    assert score.invalid_admitted == []
    assert score.format_invalid > 150 and score.format_invalid_admitted == 0


def test_nearly_every_group_is_built_and_the_rest_are_refused_by_name(score: SuiteScore) -> None:
    assert score.built >= 0.9 * score.groups
    for group, reason in score.refused:
        # Each refusal says what it could not follow: a remote reference, a 'false' schema...
        assert any(word in reason for word in ("$ref", "references", "'false'", "admits no", "no branch")), (group, reason)


def test_the_valid_instances_rejected_are_the_listed_ones(score: SuiteScore) -> None:
    listed = {tuple(part.strip() for part in line.split(" | ")[:2])
              for line in EXPECTED.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")}
    assert set(score.valid_rejected) == listed
    assert len(score.valid_rejected) <= 0.02 * score.valid


def test_what_the_grammar_alone_admits_falls_under_a_keyword_listed_as_checked(score: SuiteScore) -> None:
    assert all(checked for _, _, checked in score.invalid_admitted_by_grammar)
    core = [x for x in score.invalid_admitted_by_grammar if not x[0].startswith("optional/format/")]
    # The grammar does most of the work: it alone admitted 138 of 422 when measured (BENCHMARKS.md).
    assert len(core) < 0.35 * score.invalid
