"""Try a mutation-corpus harness with jax alone (no pallasite check): the kernel file with the harness appended,
its entry run once in jax's TPU interpret mode and compared with its reference.

    .venv/bin/python benchmarks/try_harness.py KERNEL.py HARNESS.py [--chip v6e] [--pythonpath DIR ...]

For corpus authors writing a harness before the corpus's rules are committed: only jax runs the kernel
(``pltpu.force_tpu_interpret_mode``), and only pallasite's ``runner.target_chip`` answers the chip queries a
file may make (``pltpu.get_tpu_info()`` fails on a CPU). Prints the outputs' shapes, the largest difference
from the reference and whether it is within the harness's ``TOLERANCE``; exits 1 when it is not, or when the
entry or the reference raises.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _load(kernel: Path, harness: Path):
    folder = Path(tempfile.mkdtemp(prefix="try-harness-"))
    for sibling in ("baseline.py",):
        if (kernel.parent / sibling).exists():
            (folder / sibling).write_text((kernel.parent / sibling).read_text())
    path = folder / kernel.name
    path.write_text(kernel.read_text() + "\n" + harness.read_text())
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("_harnessed", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["_harnessed"] = module
    spec.loader.exec_module(module)
    return module


def _compare(out, ref, tolerance: dict) -> tuple[float, bool]:
    import jax
    import numpy as np

    worst, ok = 0.0, True
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(ref), strict=True):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a.shape != b.shape:
            print(f"  shape {a.shape} != reference {b.shape}")
            return float("inf"), False
        worst = max(worst, float(np.nanmax(np.abs(a - b))) if a.size else 0.0)
        ok = ok and bool(np.allclose(a, b, atol=tolerance.get("atol", 1e-5), rtol=tolerance.get("rtol", 1e-5),
                                     equal_nan=True))
    return worst, ok


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernel", type=Path)
    parser.add_argument("harness", type=Path)
    parser.add_argument("--chip", default="v6e")
    parser.add_argument("--pythonpath", action="append", default=[])
    args = parser.parse_args(argv)
    sys.path[:0] = [str(Path(p).resolve()) for p in args.pythonpath]
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's parent: pallasite importable
    import jax
    from jax.experimental.pallas import tpu as pltpu

    from pallasite.runner.target_chip import target_chip

    module = _load(args.kernel.resolve(), args.harness.resolve())
    entry = getattr(module, module.PALLASITE_ENTRY)
    inputs = tuple(module.example_inputs())
    t0 = time.perf_counter()
    with target_chip(args.chip), pltpu.force_tpu_interpret_mode():
        out = jax.block_until_ready(entry(*inputs))
    print(f"entry ran in {time.perf_counter() - t0:.1f} s (TPU interpret mode, {args.chip}'s chip queries): "
          f"{[getattr(o, 'shape', o) for o in jax.tree.leaves(out)]}")
    reference = getattr(module, "reference", None)
    if reference is None:
        print("no reference")
        return 0
    worst, ok = _compare(out, reference(*inputs), getattr(module, "TOLERANCE", {}))
    print(f"largest difference from the reference {worst:.3g}: {'within' if ok else 'OUTSIDE'} "
          f"the tolerance {getattr(module, 'TOLERANCE', {})}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
