"""The house plan inside each layer (issue 61): a layer's rooms are its top-level modules and its sub-folders;
an arrow is an import from one room to another. No circle of rooms in any layer (each folder can be read after
the rooms it imports, never before), no folder with more than 30 flat modules, runner/ at most 40 rooms.

Lazy imports (inside functions) and ``TYPE_CHECKING`` imports count: an import names a dependency wherever
it sits."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("runner", "engine", "agents", "server", "analysis", "knowledge", "wire")
MAX_FLAT = 30
MAX_RUNNER_ROOMS = 40


def _package(path: Path, layer_dir: Path) -> list[str]:
    parts = list(path.relative_to(layer_dir.parent).with_suffix("").parts)
    return parts[:-1]  # a module's package; __init__'s package is its folder, the same list


def arrows(layer_dir: Path) -> dict[str, set[str]]:
    """room -> the rooms it imports (rooms: the layer's top-level module stems and sub-folder names)."""
    layer = layer_dir.name
    out: dict[str, set[str]] = {}
    for path in layer_dir.rglob("*.py"):
        rel = path.relative_to(layer_dir).parts
        source = rel[0].removesuffix(".py")
        package = ["pallasite", *_package(path, layer_dir)]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = base + (node.module.split(".") if node.module else [])
                targets = [module + [alias.name] for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name.split(".") for alias in node.names]
            else:
                continue
            for target in targets:
                if target[:2] != ["pallasite", layer] or len(target) < 3:
                    continue
                room = target[2]
                if room != source and ((layer_dir / room).is_dir() or (layer_dir / f"{room}.py").exists()):
                    out.setdefault(source, set()).add(room)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one room (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for other in sorted(graph.get(room, ())):
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in stack:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == room:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for room in sorted(set(graph) | {r for targets in graph.values() for r in targets}):
        if room not in index:
            visit(room)
    return found


def test_no_circle_of_rooms_in_any_layer():
    found = {layer: circles(arrows(ROOT / layer)) for layer in LAYERS}
    assert not any(found.values()), {layer: c for layer, c in found.items() if c}


def test_no_folder_holds_more_than_30_flat_modules_and_runner_has_at_most_40_rooms():
    crowded = {}
    for layer in LAYERS:
        for folder in [ROOT / layer, *(p.parent for p in (ROOT / layer).rglob("*/__init__.py"))]:
            flat = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            if len(flat) > MAX_FLAT:
                crowded[str(folder.relative_to(ROOT))] = len(flat)
    assert not crowded, crowded
    runner = ROOT / "runner"
    rooms = [p for p in runner.glob("*.py") if p.name != "__init__.py"] + [p for p in runner.iterdir()
                                                                          if (p / "__init__.py").exists()]
    assert len(rooms) <= MAX_RUNNER_ROOMS, len(rooms)


def test_a_circle_between_a_folder_and_a_top_module_is_seen(tmp_path):
    layer = tmp_path / "engine"
    (layer / "workers").mkdir(parents=True)
    (layer / "__init__.py").write_text("")
    (layer / "workers" / "__init__.py").write_text("")
    (layer / "workers" / "spawn.py").write_text("def f():\n    from ..checker import check\n")
    (layer / "checker.py").write_text("from .workers import spawn\nfrom pallasite.engine.jobs import Job\n")
    (layer / "jobs.py").write_text("import os\n")
    graph = arrows(layer)
    assert graph == {"workers": {"checker"}, "checker": {"workers", "jobs"}}
    assert circles(graph) == [["checker", "workers"]]
    (layer / "workers" / "spawn.py").write_text("import os\n")
    assert circles(arrows(layer)) == []


ONE_HOME = ("Timed", "Timing", "Verdict", "TestResult", "CompileResult", "Measurement", "RunRequest", "RunSetup")


def homes(root: Path, names: tuple[str, ...]) -> dict[str, list[str]]:
    """Where product code defines a class or constant of each name (module paths relative to ``root``)."""
    found: dict[str, list[str]] = {n: [] for n in names}
    for layer in LAYERS:
        for path in (root / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                defined = [node.name] if isinstance(node, ast.ClassDef) else [
                    t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)] if isinstance(
                    node, ast.Assign) else []
                for name in defined:
                    if name in found:
                        found[name].append(str(path.relative_to(root)))
    return found


def test_each_concept_has_one_home():
    """The time phase's figure, the verdict and its parts, a run's request and setup are each defined once
    (issue 61: two ``Timed`` classes with different fields answered two timers)."""
    many = {name: where for name, where in homes(ROOT, ONE_HOME).items() if len(where) != 1}
    assert not many, many


def test_a_second_home_is_seen(tmp_path):
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "engine" / "judge.py").write_text("class Timed:\n    pass\n")
    (tmp_path / "analysis" / "timed.py").write_text("from dataclasses import dataclass\n@dataclass\nclass Timed:\n    x: int\n")
    assert sorted(homes(tmp_path, ("Timed",))["Timed"]) == ["analysis/timed.py", "engine/judge.py"]
