"""Families added without forking: a directory in $LOCALTOOLS_FAMILIES, or register_family."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import localtools
from localtools import Model, ScriptedBackend, TemplateError, get_family
from localtools.families._choose import Verdict
from localtools.families._families import _registered
from localtools.families._template_check import CONVERSATIONS

GRAMMAR = """tool-call   ::= "{\\"name\\": " NAME ", \\"arguments\\": " ARGS "}"
call        ::= "<function>" tool-call "</function>"
call-sep    ::= "\\n"
calls-open  ::= ""
calls-close ::= "\\n"?
"""
RECORD = {"call_forms": [], "call_start": "<function>", "call_end": "</function>", "args_key": "arguments",
          "parallel": True, "id": "call", "match": ["template:<function>"], "stop": ["<|im_end|>"], "aliases": [],
          "parallel_hint": "", "result_hint": "", "layout": "compact", "call_style": "tagged", "strip": []}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    yield
    _registered.clear()


def _files(folder: Path) -> None:
    (folder / "myfamily.jinja").write_text(get_family("chatml").template_source().replace(
        "<tool_call>", "<function>").replace("</tool_call>", "</function>"), encoding="utf-8")
    (folder / "myfamily.gbnf").write_text(GRAMMAR, encoding="utf-8")


def _calls_through(family: str) -> None:
    call = '<function>{"name": "get_weather", "arguments": {"city": "Oslo"}}</function>'
    backend = ScriptedBackend([call])
    result = Model(backend, family=family).chat([{"role": "user", "content": "Weather in Oslo?"}], [WEATHER],
                                                tool_choice="required")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert "<function>" in backend.prompts[0].text


def test_a_family_from_a_directory_in_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _files(tmp_path)
    record = ", ".join(f"{k} = {json.dumps(v)}" for k, v in RECORD.items())
    (tmp_path / "families.toml").write_text(
        f'[families]\nmyfamily = {{ template = "myfamily.jinja", grammar = "myfamily.gbnf", {record} }}\n', encoding="utf-8")
    monkeypatch.setenv("LOCALTOOLS_FAMILIES", str(tmp_path))
    assert next(iter(localtools.families())) == "myfamily"  # user families come first
    _calls_through("myfamily")
    # GGUF metadata picks it by its match rules, before the built-in families, once it renders as
    # the model's own template does.
    model = localtools.Model(ScriptedBackend([], metadata={"tokenizer.chat_template": (tmp_path / "myfamily.jinja").read_text()}))
    assert model.family.name == "myfamily" and model.family_check.verdict is Verdict.IDENTICAL
    monkeypatch.delenv("LOCALTOOLS_FAMILIES")
    assert "myfamily" not in localtools.families()


def test_register_family_in_process(tmp_path: Path) -> None:
    _files(tmp_path)
    family = localtools.register_family("myfamily", template=tmp_path / "myfamily.jinja",
                                        grammar=tmp_path / "myfamily.gbnf", **RECORD)
    assert family.directory == str(tmp_path.resolve()) and get_family("myfamily") == family
    _calls_through("myfamily")


def test_a_bad_user_family_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _files(tmp_path)
    with pytest.raises(TemplateError, match=r"family 'broken' in register_family: missing \['strip'\]"):
        localtools.register_family("broken", template=tmp_path / "myfamily.jinja", grammar=tmp_path / "myfamily.gbnf",
                                   **{k: v for k, v in RECORD.items() if k != "strip"})
    (tmp_path / "bad.gbnf").write_text('call ::= "x"\n', encoding="utf-8")
    with pytest.raises(TemplateError, match="must define"):
        localtools.register_family("broken", template=tmp_path / "myfamily.jinja", grammar=tmp_path / "bad.gbnf", **RECORD)
    with pytest.raises(TemplateError, match="no template file"):
        localtools.register_family("broken", template=tmp_path / "nope.jinja", grammar=tmp_path / "myfamily.gbnf", **RECORD)
    assert "broken" not in localtools.families()
    monkeypatch.setenv("LOCALTOOLS_FAMILIES", str(tmp_path / "missing"))
    with pytest.raises(TemplateError, match="LOCALTOOLS_FAMILIES names"):
        localtools.families()


def test_templates_check_finds_the_first_differing_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli import main

    same = tmp_path / "same.jinja"
    same.write_text(get_family("qwen2.5").template_source(), encoding="utf-8")
    assert main(["templates", "check", "qwen2.5", "--against", str(same)]) == 0
    assert f"{2 * len(CONVERSATIONS)} of {2 * len(CONVERSATIONS)} renderings identical" in capsys.readouterr().out
    changed = tmp_path / "changed.jinja"
    changed.write_text(same.read_text(encoding="utf-8").replace("You are Qwen", "You are Qwin"), encoding="utf-8")
    assert main(["templates", "check", "qwen2.5", "--against", str(changed)]) == 1
    out = capsys.readouterr().out
    last = out.splitlines()[-1]
    assert "differs" in out and "You are Qwin" in out and "renderings identical" in last
    assert not last.startswith(f"{2 * len(CONVERSATIONS)} of")


def test_templates_check_a_user_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli import main

    _files(tmp_path)
    record = ", ".join(f"{k} = {json.dumps(v)}" for k, v in RECORD.items())
    (tmp_path / "families.toml").write_text(
        f'[families]\nmyfamily = {{ template = "myfamily.jinja", grammar = "myfamily.gbnf", {record} }}\n', encoding="utf-8")
    monkeypatch.setenv("LOCALTOOLS_FAMILIES", str(tmp_path))
    assert main(["templates", "check", "myfamily", "--against", str(tmp_path / "myfamily.jinja")]) == 0
    assert main(["templates", "check", "myfamily", "--against", str(tmp_path / "nope.jinja")]) != 0
