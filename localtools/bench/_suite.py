"""The official JSON-Schema-Test-Suite (draft 2020-12) as tool schemas, scored by ``admits``.

Each schema group becomes a tool whose parameters are ``{"type": "object", "properties": {"v": S},
"required": ["v"]}`` (references into ``S`` rewritten to point under ``/properties/v``); each test
instance ``{"v": x}``, written as compact JSON in schema key order, is asked of ``admits`` with
and without the check, and compared with the suite's verdict. The suite ships inside the
jsonschema sdist; ``fetch_suite`` downloads it once into the cache.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import LocalToolsError, UnsupportedSchema
from ..grammar import Enforcement, admits, schema_report

__all__ = ["EXCLUDED", "SUITE_VERSION", "SuiteCase", "SuiteGroup", "SuiteScore", "fetch_suite", "load_suite",
           "score_suite"]

SUITE_VERSION = "4.26.0"
#: Files that need remote references, vocabularies or dynamic scopes, or test nothing a tool's
#: schema meets (as measured for the grammar, and kept out the same way here).
EXCLUDED = frozenset({
    "refRemote", "dynamicRef", "vocabulary", "anchor", "id", "cross-draft", "dependencies-compatibility",
    "no-schema", "float-overflow", "bignum", "refOfUnknownKeyword", "format-assertion", "ecmascript-regex",
    "non-bmp-regex", "unknownKeyword", "infinite-loop-detection", "defs",
})
#: Tests that read formats as annotations; formats are asserted here (the optional/format files
#: and every call's check read them so), which makes these invalid.
ANNOTATION_ONLY = "only an annotation by default"


class SuiteUnavailable(LocalToolsError, RuntimeError):
    """The test suite could not be fetched (no package index and nothing cached)."""


def fetch_suite(cache: Path) -> Path:
    """The draft 2020-12 folder of the suite, downloaded from the jsonschema sdist on first use."""
    target = cache / f"jsonschema-suite-{SUITE_VERSION}" / "draft2020-12"
    if (target / "type.json").is_file():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
               f"jsonschema=={SUITE_VERSION}", "-d", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        archives = list(Path(tmp).glob("jsonschema-*.tar.gz"))
        if done.returncode != 0 or not archives:
            raise SuiteUnavailable(f"could not download the jsonschema {SUITE_VERSION} sdist for its test suite: "
                                   f"{(done.stderr or done.stdout).strip()[-400:]}")
        staging = Path(tmp) / "suite"
        with tarfile.open(archives[0]) as tar:
            prefix = f"jsonschema-{SUITE_VERSION}/json/tests/draft2020-12/"
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            for m in members:
                m.name = m.name[len(prefix):]
            tar.extractall(staging, members=members, filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(staging, partial)
        partial.rename(target)
    return target


@dataclass(frozen=True)
class SuiteCase:
    description: str
    data: Any
    valid: bool


@dataclass(frozen=True)
class SuiteGroup:
    file: str
    description: str
    schema: Any
    tests: tuple[SuiteCase, ...]

    @property
    def is_format(self) -> bool:
        return self.file.startswith("optional/format/")

    @property
    def name(self) -> str:
        return f"{self.file}: {self.description}"


def load_suite(folder: Path) -> list[SuiteGroup]:
    """The suite's groups: every top-level file but ``EXCLUDED``, and ``optional/format``."""
    files = sorted(p for p in folder.glob("*.json") if p.stem not in EXCLUDED)
    files += sorted(p for p in (folder / "optional" / "format").glob("*.json") if p.stem not in EXCLUDED)
    groups = []
    for path in files:
        rel = path.relative_to(folder).with_suffix("").as_posix()
        for g in json.loads(path.read_text(encoding="utf-8")):
            tests = tuple(SuiteCase(t["description"], t["data"], bool(t["valid"])) for t in g["tests"])
            groups.append(SuiteGroup(rel, g["description"], g["schema"], tests))
    return groups


def _rebase(schema: Any) -> Any:
    """``schema`` with its references into itself pointed under ``/properties/v``."""
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#") and (v == "#" or v.startswith("#/")):
                out[k] = "#/properties/v" + v[1:]
            elif k in ("$schema", "$id") and isinstance(v, str):
                continue  # the wrapper is the document now
            elif k in ("const", "enum", "default", "examples"):
                out[k] = v  # values, not schemas
            else:
                out[k] = _rebase(v)
        return out
    if isinstance(schema, list):
        return [_rebase(v) for v in schema]
    return schema


def tool_parameters(schema: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"v": _rebase(schema)}, "required": ["v"]}


def _properties(schema: Any) -> dict[str, Any]:
    """The properties a schema declares, its own first, then its applicators' (the order the
    grammar writes them in)."""
    if not isinstance(schema, dict):
        return {}
    props: dict[str, Any] = {}
    for key in ("allOf", "anyOf", "oneOf"):
        for part in schema.get(key) or []:
            for k, v in _properties(part).items():
                props.setdefault(k, v)
    own: dict[str, Any] = schema["properties"] if isinstance(schema.get("properties"), dict) else {}
    return {**own, **{k: v for k, v in props.items() if k not in own}}


def _ordered(value: Any, schema: Any) -> Any:
    """``value`` with object keys in the schema's ``properties`` order, others after."""
    if isinstance(value, dict):
        props = _properties(schema)
        keys = [k for k in props if k in value] + [k for k in value if k not in props]
        return {k: _ordered(value[k], props.get(k)) for k in keys}
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema, dict) else None
        prefix = schema.get("prefixItems") if isinstance(schema, dict) else None
        return [_ordered(v, prefix[i] if isinstance(prefix, list) and i < len(prefix) else items)
                for i, v in enumerate(value)]
    return value


@dataclass
class SuiteScore:
    groups: int = 0
    built: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    #: (group, test) lists, by verdict.
    invalid_admitted: list[tuple[str, str]] = field(default_factory=list)
    invalid_admitted_by_grammar: list[tuple[str, str, bool]] = field(default_factory=list)
    valid_rejected: list[tuple[str, str]] = field(default_factory=list)
    invalid: int = 0
    valid: int = 0
    format_invalid: int = 0
    format_invalid_admitted: int = 0
    format_invalid_admitted_by_grammar: int = 0

    def lines(self) -> Iterator[str]:
        grammar_core = [x for x in self.invalid_admitted_by_grammar if not x[0].startswith("optional/format/")]
        yield f"schema groups built: {self.built} of {self.groups} ({len(self.refused)} refused by name)"
        yield (f"invalid instances admitted: {len(self.invalid_admitted)} of {self.invalid + self.format_invalid} "
               f"(format: {self.format_invalid_admitted} of {self.format_invalid})")
        yield (f"grammar alone (check=False) admits: {len(grammar_core)} of {self.invalid} invalid instances, "
               f"format: {self.format_invalid_admitted_by_grammar} of {self.format_invalid}; "
               f"under a keyword listed as checked: {sum(1 for x in self.invalid_admitted_by_grammar if x[2])}"
               f" of {len(self.invalid_admitted_by_grammar)}")
        share = 100 * len(self.valid_rejected) / max(self.valid, 1)
        yield f"valid instances rejected: {len(self.valid_rejected)} of {self.valid} ({share:.1f} %)"


def _listed_as_checked(parameters: dict[str, Any]) -> bool:
    return any(e.enforcement in (Enforcement.CHECKED, Enforcement.NARROWED) for e in schema_report(parameters))


def score_suite(groups: list[SuiteGroup]) -> SuiteScore:
    """Every group through ``admits``, with and without the check."""
    score = SuiteScore()
    for group in groups:
        score.groups += 1
        parameters = tool_parameters(group.schema)
        try:
            verdicts = [(t, admits(parameters, json.dumps({"v": _ordered(t.data, group.schema)}), check=True),
                         admits(parameters, json.dumps({"v": _ordered(t.data, group.schema)}), check=False))
                        for t in group.tests]
        except UnsupportedSchema as exc:
            score.refused.append((group.name, str(exc)))
            continue
        score.built += 1
        checked = None
        for test, full, grammar_only in verdicts:
            if ANNOTATION_ONLY in test.description:
                continue
            if test.valid:
                score.valid += 1
                if not full:
                    score.valid_rejected.append((group.name, test.description))
                continue
            if group.is_format:
                score.format_invalid += 1
                score.format_invalid_admitted += int(full)
                score.format_invalid_admitted_by_grammar += int(grammar_only)
            else:
                score.invalid += 1
            if full:
                score.invalid_admitted.append((group.name, test.description))
            if grammar_only:
                if checked is None:
                    checked = _listed_as_checked(parameters)
                score.invalid_admitted_by_grammar.append((group.name, test.description, checked))
    return score
