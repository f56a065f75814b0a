"""The import rules of the README's architecture section, enforced over the package's source (AST).

- layers import downward only: ``server`` -> ``agents``, ``engine``, ``knowledge``, ``analysis``;
  ``agents`` -> ``engine``, ``knowledge``, ``analysis``; ``engine`` -> ``knowledge``, ``analysis``
  and ``wire`` (the contract the client shares with the worker: ``wire.protocol``, ``wire.messages``,
  ``wire.env``); ``runner`` -> ``wire`` and ``analysis.types``; ``wire`` -> ``analysis.types`` only;
  ``knowledge`` -> ``analysis``; ``analysis`` -> nothing of ours;
- JAX (jax, jaxlib, libtpu) only in ``runner/``, the code that ships to a TPU host;
- the worker side (``runner``, ``wire``) imports nothing beyond the standard library, numpy and JAX
  (the user's project environment on a TPU host needs nothing but ``pip install pallasite``);
- pygls/lsprotocol only in the server's LSP modules (``LSP_MODULES``), so the CLI never loads them;
- no import circle between our modules (``circles(root)``: a module that needs another which needs it
  back, also through lazy imports, is one design split in two files; move what both need down).

Every import counts, also those inside functions (lazy imports are still dependencies), and
relative imports are resolved. ``violations(root)`` is the checker; the tests below run it on the
package and on synthetic trees that break each rule, so the checker is known to catch them.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("analysis", "wire", "knowledge", "runner", "engine", "agents", "server")

# layer -> the module prefixes it may import (besides its own layer and the root package)
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "analysis": (),
    "knowledge": ("analysis",),
    "wire": ("analysis.types",),
    "runner": ("analysis.types", "wire"),
    "engine": ("knowledge", "analysis", "wire"),
    "agents": ("engine", "knowledge", "analysis"),
    "server": ("agents", "engine", "knowledge", "analysis"),
}
JAX = ("jax", "jaxlib", "libtpu")
LSP = ("pygls", "lsprotocol")
# the server modules that speak LSP (everything else in server/ is CLI or plain logic)
LSP_MODULES = {"server.lsp", "server.lsp_convert", "server.session", "server.session_settings",
               "server.progress", "server.editor.actions", "server.editor.fix_command", "server.editor.tune_lsp", "server.lsp_protocol",
               "server.editor.search_lsp", "server.editor.optimize_lsp", "server.editor.job_command", "server.checks",
               "server.tier0_runs"}
# what the worker side may import from outside the standard library
RUNNER_THIRD_PARTY = ("jax", "jaxlib", "libtpu", "numpy")


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, dotted target) of every import in the file; ``from a import b`` gives ``a.b``."""
    package = module.rsplit(".", 1)[0] if not path.name == "__init__.py" else module
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            out.extend((node.lineno, f"{prefix}.{alias.name}") for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
              and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(root: Path) -> list[str]:
    """Every import in the package at ``root`` (folders named as LAYERS) that breaks a rule, as
    ``layer/file.py:line: what``."""
    found = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            rel = path.relative_to(root)
            module = ".".join(rel.with_suffix("").parts)
            module = module.removesuffix(".__init__")
            for line, target in _imports(path, f"pallasite.{module}"):
                where = f"{rel.as_posix()}:{line}"
                top = target.split(".")[0]
                if top == "pallasite":
                    inner = target.removeprefix("pallasite.")
                    if target == "pallasite" or inner == "__version__" or _under(inner, layer):
                        continue
                    if not any(_under(inner, allowed) for allowed in MAY_IMPORT[layer]):
                        found.append(f"{where}: {layer} may not import {target} "
                                     f"(allowed: {', '.join(MAY_IMPORT[layer]) or 'nothing of ours'})")
                elif top in JAX and layer != "runner":
                    found.append(f"{where}: {target} imported outside runner/ (only the worker side imports JAX)")
                elif top in LSP and module not in LSP_MODULES:
                    found.append(f"{where}: {target} imported outside the server's LSP modules")
                elif (layer in ("runner", "wire") and top not in sys.stdlib_module_names and top not in RUNNER_THIRD_PARTY
                      and top != "__future__"):
                    found.append(f"{where}: the worker side imports {target} (only the standard library, "
                                 f"{', '.join(RUNNER_THIRD_PARTY)})")
    return found


def _module_graph(root: Path) -> dict[str, set[str]]:
    """Our module -> the modules of ours it imports (a ``from m import name`` counts as importing ``m``)."""
    files = {}
    for layer in LAYERS:
        for path in (root / layer).rglob("*.py"):
            files["pallasite." + ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        graph[module] = set()
        for _, target in _imports(path, module):
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    return graph


def circles(root: Path) -> list[list[str]]:
    """Every import circle of the package at ``root``: the strongly connected groups of its module
    graph with more than one module (Tarjan's algorithm, iterative), each sorted."""
    graph = _module_graph(root)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in order:
            continue
        work = [(start, iter(sorted(graph[start])))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, rest = work[-1]
            for nxt in rest:
                if nxt not in order:
                    order[nxt] = low[nxt] = len(order)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], order[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return sorted(found)


def test_the_package_keeps_the_import_rules():
    found = violations(PACKAGE_ROOT)
    assert not found, "import rules broken (README, Architecture):\n" + "\n".join(found)


def test_every_package_folder_is_a_layer():
    folders = {p.parent.name for p in PACKAGE_ROOT.glob("*/__init__.py")}
    assert folders - {"tests"} == set(LAYERS), "a new package folder needs its place in the layer rules"


def test_no_import_circles():
    found = circles(PACKAGE_ROOT)
    assert not found, "import circles (move what both modules need into a module below them):\n" + \
        "\n".join(" <-> ".join(group) for group in found)


def test_imports_within_the_package_are_relative():
    """The tree alone shows who imports whom: no module of the package imports it by its installed name
    (``from pallasite.x import y``), which a tool reading the source without the install cannot place."""
    absolute = []
    for layer in LAYERS:
        for path in sorted((PACKAGE_ROOT / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                         else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                absolute += [f"{path.relative_to(PACKAGE_ROOT)}:{node.lineno}" for n in names
                             if n == "pallasite" or n.startswith("pallasite.")]
    assert absolute == []


def test_every_package_folder_is_installed():
    listed = re.search(r"^packages = \[(.*?)\]", (PACKAGE_ROOT / "pyproject.toml").read_text(), re.S | re.M)
    packages = set(re.findall(r'"([^"]+)"', listed.group(1)))
    folders = {"pallasite." + ".".join(p.parent.relative_to(PACKAGE_ROOT).parts)
               for layer in LAYERS for p in (PACKAGE_ROOT / layer).rglob("__init__.py")}
    assert folders - packages == set(), "pyproject.toml's packages must list every package folder (or a wheel lacks it)"


# --------------------------------------------------------------------------- the checker catches


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for layer in LAYERS:
        (tmp_path / layer).mkdir(exist_ok=True)
        (tmp_path / layer / "__init__.py").write_text("")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_clean_synthetic_tree_passes(tmp_path):
    root = _tree(tmp_path, {
        "analysis/types.py": "import dataclasses\n",
        "runner/worker.py": "import jax\nimport numpy\nfrom pallasite.analysis.types import Span\nfrom ..wire import protocol\n",
        "wire/protocol.py": "import json\nfrom pallasite.analysis.types import to_json\n",
        "engine/workers/client.py": "from pallasite.wire import protocol, env\nfrom ..knowledge import store\n",
        "server/lsp.py": "from lsprotocol import types\nfrom pallasite.engine import client\n",
    })
    assert violations(root) == []


def test_upward_and_sideways_imports_are_caught(tmp_path):
    root = _tree(tmp_path, {
        "analysis/tasks.py": "from pallasite.knowledge import catalog\n",
        "knowledge/store.py": "def f():\n    from ..engine import checker\n",  # lazy and relative
        "engine/checker.py": "from pallasite.runner import chips\n",
        "wire/messages.py": "from pallasite.runner import loader\n",
        "runner/tasks.py": "from pallasite.analysis.callgraph import reaching\n",
        "agents/loop.py": "from pallasite.server import session\n",
    })
    found = violations(root)
    assert len(found) == 6, found
    assert any("wire may not import pallasite.runner.loader" in v for v in found)
    assert any(v.startswith("analysis/tasks.py:1: analysis may not import pallasite.knowledge.catalog") for v in found)
    assert any(v.startswith("knowledge/store.py:2: knowledge may not import pallasite.engine.checker") for v in found)
    assert any("engine may not import pallasite.runner.chips" in v for v in found)
    assert any("runner may not import pallasite.analysis.callgraph.reaching" in v for v in found)
    assert any("agents may not import pallasite.server.session" in v for v in found)


def test_jax_outside_runner_is_caught(tmp_path):
    root = _tree(tmp_path, {
        "engine/workers/client.py": "def f():\n    import jax.numpy as jnp\n",
        "knowledge/chips.py": "from jax.experimental import pallas\n",
        "analysis/x.py": "import importlib\nimportlib.import_module('libtpu')\n",
    })
    found = violations(root)
    assert len(found) == 3 and all("outside runner/" in v for v in found), found


def test_lsp_outside_the_lsp_modules_and_foreign_packages_in_the_worker_are_caught(tmp_path):
    root = _tree(tmp_path, {
        "server/commands/cmd_check.py": "from pygls.lsp.server import LanguageServer\n",
        "engine/jobs.py": "import lsprotocol\n",
        "runner/worker.py": "import psutil\nimport yaml\n",
    })
    found = violations(root)
    assert sum("outside the server's LSP modules" in v for v in found) == 2, found
    assert sum("the worker side imports" in v for v in found) == 2, found


def test_one_reader_of_installed_versions():
    """jax/libtpu versions key verdicts, stored results and the chip cache: one function reads them
    (``analysis.types.installed_versions``), so the worker and the client cannot read them apart."""
    readers = sorted(str(p.relative_to(PACKAGE_ROOT)) for layer in LAYERS for p in (PACKAGE_ROOT / layer).rglob("*.py")
                     if "metadata.version(" in p.read_text(encoding="utf-8"))
    assert readers == ["analysis/types.py"], readers


def test_circles_are_found_also_through_lazy_imports_and_packages(tmp_path):
    root = _tree(tmp_path, {
        "analysis/a.py": "from .b import x\n",
        "analysis/b.py": "def f():\n    from . import a\n",
        "analysis/c.py": "from . import a\n",
    })
    (root / "analysis" / "pkg").mkdir()
    (root / "analysis" / "pkg" / "__init__.py").write_text("def rules():\n    from . import one\n")
    (root / "analysis" / "pkg" / "one.py").write_text("from . import helper\nfrom .. import pkg\n")
    (root / "analysis" / "pkg" / "helper.py").write_text("")
    assert circles(root) == [["pallasite.analysis.a", "pallasite.analysis.b"],
                             ["pallasite.analysis.pkg", "pallasite.analysis.pkg.one"]]
    (root / "analysis" / "b.py").write_text("")
    (root / "analysis" / "pkg" / "one.py").write_text("from .helper import y\n")
    assert circles(root) == []
