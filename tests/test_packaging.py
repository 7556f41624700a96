"""The wheel carries the family templates and grammars, the catalog and every layer's package,
found without the source tree."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import localtools, localtools.host._catalog as c
assert 'site' in localtools.__file__ or 'target' in localtools.__file__, localtools.__file__
fams = localtools.families()
assert set(fams) == set(EXPECTED), sorted(fams)
assert all(f.template_source() and f.grammar_source() for f in fams.values())
assert next(iter(c.catalog())) == 'qwen2.5-coder-0.5b'
import importlib
layers = ['serve', 'bench', 'cli', 'ops._doctor', 'agent._agent', 'model._model', 'families._derive', 'tools._mcp',
          'backends.transformers', 'grammar._check', 'host._engines']
assert all('target' in importlib.import_module('localtools.' + m).__file__ for m in layers)
print('ok')
"""


def test_non_editable_install_finds_data_files(tmp_path: Path) -> None:
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(tmp_path / "w"), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next((tmp_path / "w").glob("localtools-*.whl"))
    target = tmp_path / "target"
    subprocess.run([*pip, "install", "-q", "--no-deps", "--target", str(target), str(wheel)], check=True, capture_output=True)
    # Every family of the source tree's families.toml is found in the installed package.
    table = ROOT / "localtools" / "families" / "templates" / "families.toml"
    expected = sorted(tomllib.loads(table.read_text(encoding="utf-8"))["families"])
    out = subprocess.run([sys.executable, "-c", f"EXPECTED = {expected!r}\n{CHECK}"], cwd=tmp_path,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_the_catalog_at_the_root_is_the_one_the_package_reads() -> None:
    # Two copies drifted once: a model's default levers changed in the one a reader sees and not in
    # the one ``load`` reads. The root's is the shipped file, not a copy.
    from localtools.host._catalog import catalog

    root, shipped = ROOT / "models.txt", ROOT / "localtools" / "host" / "models.txt"
    assert root.read_bytes() == shipped.read_bytes()
    assert root.resolve() == shipped.resolve()
    assert set(catalog()) == {line.split()[0] for line in shipped.read_text(encoding="utf-8").splitlines()
                              if line.strip() and not line.lstrip().startswith("#")}
