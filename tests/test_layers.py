"""Imports run one way: no module of the package reaches itself through imports, counting every
import (top level, inside functions, under ``TYPE_CHECKING``): a late import that breaks a cycle at
run time is still two modules that know each other. A package's ``__init__`` importing its children,
and a module importing its own package, do not count."""

from __future__ import annotations

import ast
from pathlib import Path

import localtools

ROOT = Path(localtools.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            parent = ".".join(base.split(".")[:len(base.split(".")) - node.level + 1]) if node.level else ""
            module = ".".join(filter(None, [parent, node.module or ""]))
            targets = [module, *(f"{module}.{a.name}" for a in node.names)]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in graph:
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_the_package_has_no_import_cycle() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    assert len(graph) > 50 and graph["localtools.model._model"] >= {"localtools.families._parse", "localtools.families._prompt"}
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_check_finds_a_cycle_when_there_is_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


#: The layers, top to bottom: a module imports from its own layer or one below it, never above.
#: The package's ``__init__``, re-exporting the public API, is the one module outside them.
LAYERS = [
    {"__main__"},
    {"cli"},
    {"serve", "bench", "examples"},
    {"ops"},
    {"agent"},
    {"model"},
    {"families"},
    {"tools"},
    {"backends"},
    {"grammar"},
    {"host"},
    {"_types"},
    {"_resources", "_errors"},
]


def _layer(module: str) -> int | None:
    head = module.removeprefix("localtools.").split(".")[0]
    return next((i for i, names in enumerate(LAYERS) if head in names), None)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """The imports of ``graph`` that go to a layer above the importing module's."""
    out = []
    for name, targets in graph.items():
        here = _layer(name)
        for target in sorted(targets):
            there = _layer(target)
            if here is not None and there is not None and there < here:
                out.append(f"{name} -> {target}")
    return out


def test_every_module_sits_in_a_layer_and_imports_only_downwards() -> None:
    modules = _modules()
    assert sorted(m for m in modules if m != "localtools" and _layer(m) is None) == []
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    assert _upward(graph) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {"localtools.grammar._build": {"localtools.families._families", "localtools._types"},
             "localtools.agent._agent": {"localtools.model._model", "localtools.agent._trace"}}
    assert _upward(graph) == ["localtools.grammar._build -> localtools.families._families"]
    assert _layer("localtools.somewhere_new") is None
