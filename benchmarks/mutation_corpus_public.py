"""The files of the public mutation corpus (issue 50): four codebases this project does not own, read where
they are (nothing of them is copied here), and the harness each file is checked with.

Which files, decided by ``grep``-like tests of their text and path (never by running pallasite), written
down with the site rules (``benchmarks/mutation_rules.py``) before any mutant was checked:

- ``jax-ops``: every ``*.py`` under the installed jax's ``experimental/pallas/ops/tpu`` that contains
  ``pallas_call`` and whose name does not contain ``test``.
- ``jaxbench``: every ``benchmark/*/optimized.py`` of a JAXBench checkout (AI-Hypercomputer/accelerator-agents)
  that contains ``pallas_call`` (the hand-tuned kernels 1p..11p; ``baseline.py`` beside it is the reference).
- ``tokamax``: every ``*.py`` under ``tokamax/`` of an openxla/tokamax checkout that contains ``pallas_call``
  and a TPU Pallas import (``pallas.tpu``/``pltpu``), contains no GPU one (``triton``, ``mosaic_gpu``,
  ``plgpu``), and whose name does not contain ``test``. Checkout 173417d (2026-07-16): the last commit before
  tokamax required jax 0.11 and Python 3.12 (52cd5c6); this project runs jax 0.10.2 on Python 3.11.
  Its imports (``tokamax._src...``, qwix, flax, jaxtyping, ...) come from ``PYTHONPATH`` (``--pythonpath``).
- ``tpu-inference``: every ``*.py`` under ``tpu_inference/kernels/`` of a vllm-project/tpu-inference checkout
  that contains ``pallas_call``, whose name does not contain ``test``, that is not under ``collectives/``
  (multi-device code reaches no ``pallas_call`` on one CPU device), and whose top-level imports are only
  jax, numpy and the standard library (the ``tpu_inference`` package imports vllm on import, which this
  machine does not have).

A file is checked as a copy in a folder of its own (the mutant beside nothing but, for JAXBench, its
``baseline.py``), with its harness appended when it has one: a task (``PALLASITE_ENTRY``, ``example_inputs``,
optionally ``reference``) written for this corpus from the file's own signature, docstrings and tests
(``benchmarks/mutation_harnesses/*.py``, each naming its files on its first line: ``# harness for: ID ...``), or one an earlier benchmark
already wrote for the same file (``generalisation_corpus``, ``bench_planted_bugs``). JAXBench files carry their
own task. A file with no harness is checked at tier 0 only in effect (tiers 1-3 need inputs: PLS900).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARNESSES = HERE / "mutation_harnesses"
CODEBASES = ("jax-ops", "jaxbench", "tokamax", "tpu-inference")
_STDLIB_OR_JAX = re.compile(
    r"^(?:import|from)\s+(?:jax|jaxlib|numpy|__future__|abc|collections|contextlib|copy|dataclasses|enum|"
    r"functools|inspect|itertools|logging|math|operator|os|re|sys|time|typing|warnings)\b")


@dataclass(frozen=True)
class File:
    codebase: str
    rel: str  # path inside the codebase's root
    path: Path  # where it is read from
    harness: str  # appended to the file ("" when none)
    harness_from: str  # where the harness comes from ("" when none)
    baseline: Path | None = None  # JAXBench: the reference file put beside the copy

    @property
    def id(self) -> str:
        return f"{self.codebase}:{self.rel}"


def jax_ops_root() -> Path:
    spec = importlib.util.find_spec("jax")
    assert spec is not None and spec.origin is not None, "jax is not installed"
    return Path(spec.origin).parent / "experimental" / "pallas" / "ops" / "tpu"


def revision(codebase: str, root: Path) -> str:
    """The codebase's commit (jax: the installed version)."""
    if codebase == "jax-ops":
        import jax

        return f"jax {jax.__version__} (installed)"
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown (not a git checkout)"


def _top_imports_plain(text: str) -> bool:
    return all(_STDLIB_OR_JAX.match(line) for line in text.splitlines() if re.match(r"^(?:import|from)\s", line))


def select(codebase: str, root: Path) -> list[Path]:
    """The corpus's files of one codebase (the rule in the module doc), sorted."""
    if codebase == "jax-ops":
        found = [p for p in root.rglob("*.py") if "test" not in p.name and "pallas_call" in p.read_text()]
    elif codebase == "jaxbench":
        found = [p for p in (root / "benchmark").glob("*/optimized.py") if "pallas_call" in p.read_text()]
    elif codebase == "tokamax":
        found = []
        for p in (root / "tokamax").rglob("*.py"):
            text = p.read_text()
            if "test" not in p.name and "pallas_call" in text and re.search(r"pallas\.tpu|pltpu", text) \
                    and not re.search(r"triton|mosaic_gpu|plgpu", text):
                found.append(p)
    elif codebase == "tpu-inference":
        found = []
        for p in (root / "tpu_inference" / "kernels").rglob("*.py"):
            text = p.read_text()
            if "test" not in p.name and "pallas_call" in text and "collectives" not in p.relative_to(root).parts \
                    and _top_imports_plain(text):
                found.append(p)
    else:
        raise ValueError(f"unknown codebase {codebase!r}: one of {', '.join(CODEBASES)}")
    return sorted(found)


def _earlier_tasks() -> dict[str, tuple[str, str]]:
    """Tasks earlier benchmarks wrote, by the file's path tail: (text, where from)."""
    import sys

    sys.path.insert(0, str(HERE))
    import bench_planted_bugs
    import generalisation_corpus

    out = {"experimental/pallas/ops/tpu/matmul.py": (bench_planted_bugs.MATMUL_TASK, "bench_planted_bugs.MATMUL_TASK")}
    for k in generalisation_corpus.KERNELS:
        if k.task:
            out[k.base.rpartition(":")[2]] = (k.task, f"generalisation_corpus {k.id}")
    return out


def harnesses(folder: Path | None = None) -> dict[str, tuple[str, str]]:
    """A corpus's harness files (this one's: ``HARNESSES``) by the file ids on their first line (``# harness for:
    <id> [<id> ...]``): (text, where from)."""
    folder = folder or HARNESSES
    out = {}
    for p in sorted(folder.glob("*.py")):
        text = p.read_text()
        m = re.match(r"#\s*harness for:\s*(.+)", text)
        for file_id in m.group(1).split() if m else ():
            out[file_id] = (text, f"{folder.name}/{p.name}")
    return out


def files(roots: dict[str, Path]) -> list[File]:
    """Every file of the corpus for the codebases given a root."""
    mine, earlier = harnesses(), _earlier_tasks()
    out = []
    for codebase in CODEBASES:
        root = roots.get(codebase)
        if root is None:
            continue
        for path in select(codebase, root):
            rel = path.relative_to(root).as_posix()
            file_id = f"{codebase}:{rel}"
            text, origin = mine.get(file_id, ("", ""))
            if not text:
                key = f"experimental/pallas/ops/tpu/{rel}" if codebase == "jax-ops" else rel
                text, origin = earlier.get(key, ("", "")) if codebase in ("jax-ops", "tpu-inference") else ("", "")
            baseline = path.parent / "baseline.py" if codebase == "jaxbench" else None
            out.append(File(codebase, rel, path, text, origin, baseline))
    return out
