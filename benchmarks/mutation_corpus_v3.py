"""The files of the third public mutation corpus (issue 57): six codebases this project does not own, two of them
not used before (pytorch/xla, apple/axlearn), read where they are (nothing of them is copied here), and the
harness each file is checked with. Only files whose harness has a reference are in it.

Which files, by ``grep``-like tests of their text and path (never by running pallasite), written down with the
site rules (``benchmarks/mutation_rules_v3.py``) before any mutant was checked:

- ``jax-ops``, ``jaxbench``, ``tpu-inference``, ``sglang-jax``: corpus v2's rules (``mutation_corpus_v2``), the same
  revisions (jax 0.10.2, JAXBench c4f3b17, tpu-inference b8692ff, sglang-jax cddbf6f1);
- ``pytorch-xla`` (new): every ``*.py`` under ``torch_xla/experimental/pallas_kernels/`` of a pytorch/xla checkout
  that contains ``pallas_call`` and whose name contains neither ``test`` nor ``bench`` (they import only jax, numpy
  and the standard library). Checkout 41398bf (2026-04-23).
- ``axlearn`` (new): every ``*.py`` under ``axlearn/common/`` of an apple/axlearn checkout that contains
  ``pallas_call`` and a TPU Pallas import (``pallas.tpu`` / ``pltpu``), no GPU one (``triton``, ``mosaic_gpu``,
  ``plgpu``), and whose name contains none of ``test``, ``bench``, ``gpu``. Checkout 34aed43c (2026-07-08); its
  root and a folder of its dependencies (einops, absl-py, chex, toolz, optax, aqtp, flax, msgpack, rich,
  installed with ``pip install --target DIR --no-deps``) on the worker's ``PYTHONPATH``.

**Only files with a reference**: a file is in the corpus when its harness defines ``reference`` (JAXBench: its own
task, ``baseline.py`` the reference). Harnesses: ``benchmarks/mutation_harnesses_v3/*.py`` first (written for this
corpus from each file's signature, docstrings and its repository's tests, each with a plain-JAX reference, tried
only with jax: ``benchmarks/try_harness.py``), then corpus v2's. A file without one is listed, not checked.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import mutation_corpus_public as v1
import mutation_corpus_v2 as v2
from mutation_corpus_public import File

HERE = Path(__file__).resolve().parent
HARNESSES = HERE / "mutation_harnesses_v3"
CODEBASES = ("jax-ops", "jaxbench", "tpu-inference", "sglang-jax", "pytorch-xla", "axlearn")
_GPU = re.compile(r"triton|mosaic_gpu|plgpu")


def select_pytorch_xla(root: Path) -> list[Path]:
    folder = root / "torch_xla" / "experimental" / "pallas_kernels"
    return sorted(p for p in folder.rglob("*.py")
                  if "pallas_call" in p.read_text() and not any(w in p.name for w in ("test", "bench")))


def select_axlearn(root: Path) -> list[Path]:
    found = []
    for p in (root / "axlearn" / "common").rglob("*.py"):
        if any(w in p.name for w in ("test", "bench", "gpu")):
            continue
        text = p.read_text()
        if "pallas_call" in text and re.search(r"pallas\.tpu|pltpu", text) and not _GPU.search(text):
            found.append(p)
    return sorted(found)


def revision(codebase: str, root: Path) -> str:
    if codebase not in ("pytorch-xla", "axlearn"):
        return v2.revision(codebase, root)
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown (not a git checkout)"


def harnesses() -> dict[str, tuple[str, str]]:
    return v1.harnesses(HARNESSES)


def has_reference(f: File) -> bool:
    return f.codebase == "jaxbench" or re.search(r"^def reference\(", f.harness, re.M) is not None


def every_file(roots: dict[str, Path]) -> list[File]:
    """Every file the rules select, with its harness ("" when none), reference or not."""
    mine = harnesses()
    out = []
    for f in v2.files({k: v for k, v in roots.items() if k in v2.CODEBASES}):
        text, origin = mine.get(f.id, (f.harness, f.harness_from))
        out.append(File(f.codebase, f.rel, f.path, text, origin, f.baseline))
    for codebase, select in (("pytorch-xla", select_pytorch_xla), ("axlearn", select_axlearn)):
        root = roots.get(codebase)
        for path in select(root) if root is not None else ():
            rel = path.relative_to(root).as_posix()
            text, origin = mine.get(f"{codebase}:{rel}", ("", ""))
            out.append(File(codebase, rel, path, text, origin, None))
    return out


def files(roots: dict[str, Path]) -> list[File]:
    """The corpus: the files with a reference."""
    return [f for f in every_file(roots) if has_reference(f)]
