"""Signposts that resolve (issue 61): every path of this repository that a product docstring or comment, the
README or a docs page names exists. A module named with an attribute (``runner/program/cost_model.MODEL``) resolves
to its module; ``file:line`` and ``page.md#anchor`` to their file (anchors: tests/test_doc_pointers.py).
Paths of other repositories (jax's own docs and tests) and examples of a user's file names are listed in
``ELSEWHERE``: each says why it is not ours."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("runner", "engine", "agents", "server", "analysis", "knowledge", "wire")
PATH = re.compile(r"(?<![\w./-])((?:runner|engine|agents|server|analysis|knowledge|wire|tests|benchmarks|editor_clients"
                  r"|docs|examples|\.ci)/[\w./-]*\w)")
DOTTED = re.compile(r"(?<![\w.])pallasite((?:\.\w+)+)")  # pallasite.engine.workers.spawn, pallasite.x.y.ATTR
ELSEWHERE = {
    "docs/pallas/tpu/matmul.ipynb": "jax's own Pallas guide (jax-ml/jax)",
    "docs/pallas/tpu/sparse.md": "jax's own Pallas guide (jax-ml/jax)",
    "tests/pallas": "jax's own Pallas tests (jax-ml/jax)",
    "tests/pallas/tpu_paged_attention_kernel_test.py": "jax's own Pallas tests (jax-ml/jax)",
    "tests/test_flash.py": "an example of a user's test file that calls a kernel",
    "tests/x.py": "an example of a user's test file",
    "server/commands/cmd_": "the prefix of the command front ends, named as a family",
    "tests/data/classes43/paged_": "the prefix of a family of fixtures",
}


def resolves(ref: str) -> bool:
    base = re.split(r"[:#]", ref)[0]
    if (ROOT / base).exists() or (ROOT / f"{base}.py").exists():
        return True
    folder, _, name = base.rpartition("/")
    module = name.split(".")[0]  # runner/program/cost_model.MODEL -> runner/program/cost_model.py
    return (ROOT / folder / f"{module}.py").exists() or (ROOT / folder / module).is_dir()


def mentions() -> dict[str, set[str]]:
    files = [p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")]
    files += [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "editor_clients").rglob("*.md")]
    found: dict[str, set[str]] = {}
    for path in files:
        if ".venv" in path.parts or "node_modules" in path.parts:
            continue
        text = path.read_text(errors="replace")
        for match in PATH.finditer(text):
            found.setdefault(match.group(1).rstrip("."), set()).add(str(path.relative_to(ROOT)))
        for match in DOTTED.finditer(text):
            found.setdefault(dotted_path(match.group(1)), set()).add(str(path.relative_to(ROOT)))
    return found


def dotted_path(name: str) -> str:
    """``.engine.workers.spawn.Spawner`` -> ``engine/workers/spawn.Spawner``: a module named the dotted way, as a path
    (after a module, an attribute; after a package, a name its ``__init__`` defines; a name under no layer is
    returned starred, not checked). What does not resolve comes back whole, so ``resolves`` says so."""
    parts = name.strip(".").split(".")
    if parts[0] not in LAYERS:
        return "*" + name
    for cut in range(len(parts), 0, -1):
        base, rest = ROOT.joinpath(*parts[:cut]), parts[cut:]
        if base.with_suffix(".py").exists() or (base.is_dir() and not rest):
            return "/".join(parts[:cut]) + "".join("." + p for p in rest[:1])
        if base.is_dir() and rest[0] in (base / "__init__.py").read_text(errors="replace"):
            return "/".join(parts[:cut])
    return "/".join(parts)


def test_every_path_a_docstring_comment_or_page_names_exists():
    found = mentions()
    assert len(found) > 200  # the walk saw the project's signposts
    broken = {ref: sorted(where) for ref, where in found.items()
              if "*" not in ref and "<" not in ref and ref not in ELSEWHERE and not resolves(ref)}
    assert not broken, broken


def test_the_check_sees_a_missing_path():
    assert not resolves("runner/judge.py") and resolves("runner/judging/judge.py")
    assert dotted_path(".server.results_cache") == "server/results_cache" and not resolves("server/results_cache")
    assert resolves(dotted_path(".engine.workers.spawn.Spawner"))
    assert resolves("runner/program/cost_model.MODEL") and resolves("docs/safety.md#anchor") and resolves("runner/tiers.py:12")
