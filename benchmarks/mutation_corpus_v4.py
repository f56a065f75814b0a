"""The files of the fourth public mutation corpus (issue 57): corpus v3's six codebases and one not used before
(sdh1014/pallas-kernel, the package ``tops``: gated linear attention kernels; google-deepmind/recurrentgemma's LRU
scan kernel), read where they are (nothing of them
is copied here), and the harness each file is checked with. Only files whose harness has a reference are in it.

Which files, by ``grep``-like tests of their text and path (never by running pallasite), written down with the
site rules (``benchmarks/mutation_rules_v4.py``) before any mutant was checked:

- corpus v3's files (``mutation_corpus_v3.files``): the same revisions, the same harnesses;
- ``tops`` (new): every ``*.py`` under ``tops/`` of an sdh1014/pallas-kernel checkout (upstream
  primatrix/pallas-kernel) that contains ``pallas_call`` and whose name contains neither ``test`` nor ``bench``.
  Checkout a8e38dc (2026); its root on the worker's ``PYTHONPATH``. Harnesses: ``benchmarks/mutation_harnesses_v4/``,
  written for this corpus from each file's signature and its repository's tests, each with a plain-JAX reference
  (the package's naive recurrences, which are other files, never mutated), tried only with jax
  (``benchmarks/try_harness.py``).
- ``recurrentgemma`` (new): every ``*.py`` under ``recurrentgemma/jax/`` of a google-deepmind/recurrentgemma checkout
  that contains ``pallas_call`` and whose name contains neither ``test`` nor ``bench``. Checkout 2efa84d; its root
  and a folder of the packages its ``recurrentgemma.jax`` imports (jaxtyping, typeguard, orbax-checkpoint,
  sentencepiece and theirs, ``pip install --target DIR --no-deps``) on the worker's ``PYTHONPATH``. The reference:
  the package's plain-JAX ``scan.lru_linear_scan`` (another file, never mutated).

Corpus v3's files are mutated again at sites v2 and v3 did not take (``mutation_rules_v4``); fixes were made after
reading corpus v3's misses on those files, so their figures are reported apart from the two new codebases'.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import mutation_corpus_public as v1
import mutation_corpus_v3 as v3
from mutation_corpus_public import File

HERE = Path(__file__).resolve().parent
HARNESSES = HERE / "mutation_harnesses_v4"
has_reference = v3.has_reference
CODEBASES = (*v3.CODEBASES, "tops", "recurrentgemma")
_NEW = {"tops": "tops", "recurrentgemma": "recurrentgemma/jax"}  # codebase: the folder its files are found under


def select(codebase: str, root: Path) -> list[Path]:
    return sorted(p for p in (root / _NEW[codebase]).rglob("*.py")
                  if "pallas_call" in p.read_text() and not any(w in p.name for w in ("test", "bench")))


def revision(codebase: str, root: Path) -> str:
    if codebase not in _NEW:
        return v3.revision(codebase, root)
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown (not a git checkout)"


def harnesses() -> dict[str, tuple[str, str]]:
    return v1.harnesses(HARNESSES)


def every_file(roots: dict[str, Path]) -> list[File]:
    """Every file the rules select, with its harness ("" when none), reference or not."""
    out = v3.every_file({k: v for k, v in roots.items() if k in v3.CODEBASES})
    mine = harnesses()
    for codebase in _NEW:
        root = roots.get(codebase)
        for path in select(codebase, root) if root is not None else ():
            rel = path.relative_to(root).as_posix()
            text, origin = mine.get(f"{codebase}:{rel}", ("", ""))
            out.append(File(codebase, rel, path, text, origin, None))
    return out


def files(roots: dict[str, Path]) -> list[File]:
    """The corpus: the files with a reference."""
    return [f for f in every_file(roots) if has_reference(f)]
