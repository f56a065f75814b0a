"""The files of the second public mutation corpus (issue 57): four codebases this project does not own, one of
them not used before (sgl-project/sglang-jax), read where they are (nothing of them is copied here), and the
harness each file is checked with.

Which files, by ``grep``-like tests of their text and path (never by running pallasite), written down with the
site rules (``benchmarks/mutation_rules_v2.py``) before any mutant was checked:

- ``jax-ops``, ``jaxbench``, ``tpu-inference``: issue 50's rules (``benchmarks/mutation_corpus_public.py``), the
  installed jax 0.10.2, JAXBench at c4f3b17, tpu-inference at b8692ff;
- ``sglang-jax`` (new): every ``*.py`` under ``python/sgl_jax/srt/kernels/`` or ``python/sgl_jax/srt/multimodal/kernels/``
  of an sgl-project/sglang-jax checkout that contains ``pallas_call`` and a TPU Pallas import (``pallas.tpu`` /
  ``pltpu``, or ``jax.experimental.pallas as pl`` with no GPU one), contains no GPU one (``triton``, ``mosaic_gpu``,
  ``plgpu``), whose name contains none of ``test``, ``bench``, ``tuned``, and whose top-level imports are jax,
  numpy, the standard library, relative ones, or modules under ``sgl_jax.srt.kernels`` / ``sgl_jax.srt.multimodal.kernels``
  and whose sgl_jax imports (followed through the modules they name) never reach ``sgl_jax.srt.utils`` (which
  imports zmq and fastapi, not installed here). Checkout cddbf6f (2026-08-21); its ``python/`` folder on the
  worker's ``PYTHONPATH``.

Harnesses: issue 50's for the first three codebases (``mutation_corpus_public.files``); for sglang-jax, the files of
``benchmarks/mutation_harnesses_v2/`` (first line ``# harness for: ID ...``), written for this corpus from each file's
signature, docstrings and its repository's tests, each with a plain-JAX reference where one was short to write. A file
with no harness is checked at tier 0 only in effect (PLS900), as before.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import mutation_corpus_public as v1
from mutation_corpus_public import File

HERE = Path(__file__).resolve().parent
HARNESSES = HERE / "mutation_harnesses_v2"
CODEBASES = ("jax-ops", "jaxbench", "tpu-inference", "sglang-jax")
_PLAIN = re.compile(
    r"^(?:import|from)\s+(?:jax|jaxlib|numpy|__future__|abc|collections|contextlib|copy|dataclasses|enum|functools|"
    r"inspect|itertools|logging|math|operator|os|re|sys|time|typing|warnings|\.|sgl_jax\.srt\.kernels|"
    r"sgl_jax\.srt\.multimodal\.kernels)\b")
_KERNEL_DIRS = ("python/sgl_jax/srt/kernels", "python/sgl_jax/srt/multimodal/kernels")


def _top_imports_plain(text: str) -> bool:
    return all(_PLAIN.match(line) for line in text.splitlines() if re.match(r"^(?:import|from)\s", line))


def select_sglang(root: Path) -> list[Path]:
    found = []
    for folder in _KERNEL_DIRS:
        for p in (root / folder).rglob("*.py"):
            text = p.read_text()
            if any(w in p.name for w in ("test", "bench", "tuned")) or "pallas_call" not in text:
                continue
            if re.search(r"triton|mosaic_gpu|plgpu", text) or not re.search(r"pallas\.tpu|pltpu|pallas as pl\b", text):
                continue
            if _top_imports_plain(text) and not _reaches_utils(p, root, set()):
                found.append(p)
    return sorted(found)


def _reaches_utils(path: Path, root: Path, seen: set[Path]) -> bool:
    """Whether the file's imports of sgl_jax modules (or relative ones) reach ``sgl_jax.srt.utils``, whose
    imports need packages this machine does not have (zmq, fastapi)."""
    if path in seen or not path.exists():
        return False
    seen.add(path)
    for line in path.read_text().splitlines():
        m = re.match(r"^(?:from|import)\s+(\.+[\w.]*|sgl_jax[\w.]*)", line)
        if not m:
            continue
        name = m.group(1)
        if name.startswith("sgl_jax.srt.utils"):
            return True
        if name.startswith("."):
            dots = len(name) - len(name.lstrip("."))
            base = path.parent
            for _ in range(dots - 1):
                base = base.parent
            target = base.joinpath(*name.lstrip(".").split(".")) if name.lstrip(".") else base
        else:
            target = root / "python" / Path(*name.split("."))
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if _reaches_utils(candidate, root, seen):
                return True
    return False


def revision(codebase: str, root: Path) -> str:
    if codebase != "sglang-jax":
        return v1.revision(codebase, root)
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown (not a git checkout)"


def harnesses() -> dict[str, tuple[str, str]]:
    return v1.harnesses(HARNESSES)


def files(roots: dict[str, Path]) -> list[File]:
    """Every file of the corpus for the codebases given a root."""
    out = [f for f in v1.files({k: v for k, v in roots.items() if k != "sglang-jax"}) if f.codebase in CODEBASES]
    root = roots.get("sglang-jax")
    if root is not None:
        mine = harnesses()
        for path in select_sglang(root):
            rel = path.relative_to(root).as_posix()
            text, origin = mine.get(f"sglang-jax:{rel}", ("", ""))
            out.append(File("sglang-jax", rel, path, text, origin, None))
    return out
