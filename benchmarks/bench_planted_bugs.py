"""Planted bugs in real kernels: how many the checker catches, and how many it places at the line
where the mistake was made (±1 line). Prints figures; asserts nothing.

    python benchmarks/bench_planted_bugs.py [--jaxbench PATH/TO/JAXBench] [--tiers 0-2] [--target v5e]
    PYTHONPATH=OLD_CHECKOUT.pp python benchmarks/bench_planted_bugs.py ...   # the same bugs, an older checker

Each bug is one textual change to a real kernel file: jax's own Pallas TPU kernels as installed
(``jax/experimental/pallas/ops/tpu/matmul.py``, with a small task appended so the compiler tiers
know its shapes), this project's fixture kernels, and, with ``--jaxbench``, JAXBench's hand-tuned
kernels from a local checkout (nothing of JAXBench is copied into this project). The true line of
each bug was written down with the bug, before any checker ran on it: ``true`` is a text that
appears on exactly that line of the changed file (by default the replacement itself).

For every bug the unchanged file is checked first; findings it already has (none, for these
bases) are not counted. "caught": the changed file has a new error or warning finding. "located":
one of those new findings is at the true line ±1 (its primary position; related places are listed
separately). A bug in a file that does not change is a harness error, reported as such.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPO = ROOT / "tests" / "data"

MATMUL_TASK = '''

# --- task appended by benchmarks/bench_planted_bugs.py (not part of jax's file) ---
BENCH_TUNED = {"block_shape": (512, 512)}
PALLASITE_ENTRY = "bench_matmul"


def bench_matmul(x, y):
    return matmul(x, y, block_shape=BENCH_TUNED["block_shape"])


def example_inputs():
    s = jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16)
    return (s, s)
'''


@dataclass(frozen=True)
class Bug:
    id: str
    kind: str
    base: str  # "jax:<path under jax/>", "repo:<path under tests/data>", "jaxbench:<path under JAXBench/benchmark>"
    find: str
    replace: str
    true: str = ""  # a text on the true line of the changed file (default: the replacement)
    append: str = ""  # a task appended to the base (jax's kernels have none)
    base_fix: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # make a fixture's base correct first


JAX_MATMUL = "jax:experimental/pallas/ops/tpu/matmul.py"
BUGS: tuple[Bug, ...] = (
    # ---- jax's blocked matmul (installed), with a task appended
    Bug("matmul-default", "keyword default", JAX_MATMUL, "block_k: int = 256,", "block_k: int = 200,", append=MATMUL_TASK),
    Bug("matmul-dict", "dict entry", JAX_MATMUL, 'BENCH_TUNED = {"block_shape": (512, 512)}',
        'BENCH_TUNED = {"block_shape": (512, 500)}', append=MATMUL_TASK),
    Bug("matmul-index-map", "index_map arity", JAX_MATMUL, "pl.BlockSpec((l, block_k), lambda i, _, k: (i, k)),",
        "pl.BlockSpec((l, block_k), lambda i, k: (i, k)),", append=MATMUL_TASK),
    Bug("matmul-semantics", "dimension_semantics", JAX_MATMUL, 'dimension_semantics=("parallel", "parallel", "arbitrary"))',
        'dimension_semantics=("parallel", "arbitrary"))', append=MATMUL_TASK),
    Bug("matmul-store-dtype", "store dtype", JAX_MATMUL, "o_tile_ref[...] = acc_ref[...].astype(o_tile_ref.dtype)",
        "o_tile_ref[...] = acc_ref[...]", append=MATMUL_TASK),
    Bug("matmul-kernel-params", "kernel signature", JAX_MATMUL,
        "def matmul_kernel(x_tile_ref, y_tile_ref, o_tile_ref, acc_ref):",
        "def matmul_kernel(x_tile_ref, y_tile_ref, acc_ref):", append=MATMUL_TASK),
    # ---- this project's real-size GEMM (PrefetchScalarGridSpec, tuned dict splatted into a jitted call)
    Bug("gemm-dict", "dict entry", "repo:honest/gemm_4096.py", 'TUNED = {"block_m": 512, "block_n": 512, "block_k": 512}',
        'TUNED = {"block_m": 512, "block_n": 512, "block_k": 500}'),
    Bug("gemm-vmem", "VMEM overflow", "repo:honest/gemm_4096.py", 'TUNED = {"block_m": 512, "block_n": 512, "block_k": 512}',
        'TUNED = {"block_m": 4096, "block_n": 4096, "block_k": 4096}'),
    Bug("gemm-scratch-shape", "scratch shape", "repo:honest/gemm_4096.py",
        "scratch_shapes=[pltpu.VMEM((block_m, block_n), jnp.float32)],",
        "scratch_shapes=[pltpu.VMEM((block_m, block_n // 2), jnp.float32)],"),
    Bug("gemm-index-map-results", "index_map results", "repo:honest/gemm_4096.py",
        "pl.BlockSpec((block_k, block_n), lambda i, j, kk: (kk, j))]",
        "pl.BlockSpec((block_k, block_n), lambda i, j, kk: (kk, j, 0))]"),
    Bug("gemm-grid-rank", "grid", "repo:honest/gemm_4096.py", "grid=(m // block_m, n // block_n, k // block_k),",
        "grid=(m // block_m, n // block_n),"),
    # ---- an accumulating matmul fixture (keyword-only tunables)
    Bug("acc-default", "keyword default", "repo:runtime/acc_uninit_fixed.py",
        "def matmul(x, y, *, bm: int = 128, bn: int = 128, bk: int = 128):",
        "def matmul(x, y, *, bm: int = 128, bn: int = 100, bk: int = 128):"),
    Bug("acc-store-dtype", "store dtype", "repo:runtime/acc_uninit_fixed.py", "o_ref[...] = acc_ref[...].astype(o_ref.dtype)",
        "o_ref[...] = acc_ref[...].astype(jnp.int8)"),
    Bug("acc-scratch-shape", "scratch shape", "repo:runtime/acc_uninit_fixed.py",
        "scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],", "scratch_shapes=[pltpu.VMEM((bm, bn // 2), jnp.float32)],"),
    # ---- block sizes in a config dataclass
    Bug("rmsnorm-dataclass", "dataclass field", "repo:honest/origin_dataclass_field.py", "block_rows: int = 128",
        "block_rows: int = 124", base_fix=(("block_rows: int = 100", "block_rows: int = 128"),)),
    # ---- kernels launched through the project's own pallas_call wrapper (no task: tier 0 only)
    Bug("wrapper-arity", "index_map arity (wrapper)", "repo:honest/wrapper_site.py",
        "in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],", "in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],",
        base_fix=(("out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),", "out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),"),)),
    Bug("wrapper-results", "index_map results (wrapper)", "repo:honest/wrapper_site.py",
        "in_specs=[pl.BlockSpec((8, cols), lambda i: (i, 0))],", "in_specs=[pl.BlockSpec((8, cols), lambda i: (i, 0, 0))],",
        base_fix=(("out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),", "out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),"),)),
    # ---- static slices of refs
    Bug("halves-slice", "static slice past the block", "repo:tier0/pls013_static_bounds_ok.py", "right = x_ref[:, HALF:256]",
        "right = x_ref[:, HALF:384]"),
    Bug("halves-ds", "pl.ds past the block", "repo:tier0/pls013_static_bounds_ok.py", "acc_ref[pl.ds(0, 8), :] = left + right",
        "acc_ref[pl.ds(4, 8), :] = left + right"),
    # ---- a JAXBench-style file (module constant, grid)
    Bug("scale-constant", "module constant", "repo:honest/forward_only_task.py", "BLOCK_ROWS = 64", "BLOCK_ROWS = 60"),
    Bug("scale-grid-float", "grid", "repo:honest/forward_only_task.py", "        grid=(rows // BLOCK_ROWS,),\n        in_specs=[_row_spec(cols), pl.BlockSpec((1, cols), lambda i: (0, 0))],\n        out_specs=_row_spec(cols),\n        out_shape=jax.ShapeDtypeStruct(x.shape",
        "        grid=(rows / BLOCK_ROWS,),\n        in_specs=[_row_spec(cols), pl.BlockSpec((1, cols), lambda i: (0, 0))],\n        out_specs=_row_spec(cols),\n        out_shape=jax.ShapeDtypeStruct(x.shape",
        true="grid=(rows / BLOCK_ROWS,)"),
    # ---- JAXBench's hand-tuned kernels (a local checkout: --jaxbench)
    Bug("jaxbench-gemm-block-k", "dict entry", "jaxbench:8p_GEMM/optimized.py",
        "TUNED_PARAMS = {'block_shape': [1024, 2048], 'block_k': 1024}", "TUNED_PARAMS = {'block_shape': [1024, 2048], 'block_k': 1000}"),
    Bug("jaxbench-gemm-rows", "dict entry", "jaxbench:8p_GEMM/optimized.py",
        "TUNED_PARAMS = {'block_shape': [1024, 2048], 'block_k': 1024}", "TUNED_PARAMS = {'block_shape': [1020, 2048], 'block_k': 1024}"),
    Bug("jaxbench-gemm-vmem", "VMEM overflow", "jaxbench:8p_GEMM/optimized.py",
        "TUNED_PARAMS = {'block_shape': [1024, 2048], 'block_k': 1024}", "TUNED_PARAMS = {'block_shape': [4096, 4096], 'block_k': 8192}"),
    Bug("jaxbench-gemm-store", "store dtype", "jaxbench:8p_GEMM/optimized.py",
        "o_tile_ref[...] = acc_ref[...].astype(o_tile_ref.dtype)", "o_tile_ref[...] = acc_ref[...]"),
    Bug("jaxbench-paged-pages", "dict entry", "jaxbench:6p_Paged_Attention/optimized.py",
        "TUNED_PARAMS = {'pages_per_compute_block': 128}", "TUNED_PARAMS = {'pages_per_compute_block': 96}"),
)


def base_text(bug: Bug, jaxbench: Path | None) -> str | None:
    kind, _, rel = bug.base.partition(":")
    if kind == "jax":
        import importlib.util

        spec = importlib.util.find_spec("jax")
        path = Path(spec.origin).parent / rel
    elif kind == "repo":
        path = REPO / rel
    elif kind == "jaxbench":
        if jaxbench is None:
            return None
        path = jaxbench / "benchmark" / rel
    else:
        raise ValueError(bug.base)
    text = path.read_text(encoding="utf-8") + bug.append
    for old, new in bug.base_fix:
        assert old in text, f"{bug.id}: base fix text not found"
        text = text.replace(old, new, 1)
    return text


def true_line(text: str, marker: str) -> int:
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if marker.splitlines()[0].strip() in line]
    if len(lines) != 1:
        raise ValueError(f"true-line marker {marker!r} is on {len(lines)} lines")
    return lines[0]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jaxbench", type=Path, help="a local checkout's JAXBench folder (holding benchmark/)")
    parser.add_argument("--tiers", default="0-2")
    parser.add_argument("--target", default="v5e")
    parser.add_argument("--only", nargs="*", help="bug ids")
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args(argv)
    lo, _, hi = args.tiers.partition("-")
    tiers = tuple(range(int(lo), int(hi or lo) + 1))

    import pallasite
    from pallasite.engine.checker import CheckOptions
    from pallasite.engine.engine import check_paths

    bugs = [b for b in BUGS if not args.only or b.id in args.only]
    work = Path(tempfile.mkdtemp(prefix="pallasite-planted-"))
    cases = []
    for bug in bugs:
        base = base_text(bug, args.jaxbench)
        if base is None:
            continue
        assert bug.find in base, f"{bug.id}: text to change not found in {bug.base}"
        changed = base.replace(bug.find, bug.replace, 1)
        line = true_line(changed, bug.true or bug.replace)
        folder = work / bug.id
        (folder / "base").mkdir(parents=True)
        (folder / "bug").mkdir()
        name = Path(bug.base.partition(":")[2]).name
        (folder / "base" / name).write_text(base, encoding="utf-8")
        (folder / "bug" / name).write_text(changed, encoding="utf-8")
        cases.append((bug, folder / "base" / name, folder / "bug" / name, line))

    options = CheckOptions(target=args.target, tiers=tiers, time_limit_s=args.time_limit)
    started = time.perf_counter()
    paths = [str(p) for _, b, c, _ in cases for p in (b, c)]
    reports = {r.path: r for r in check_paths(paths, options)}
    seconds = time.perf_counter() - started

    print(f"planted bugs: pallasite at {Path(pallasite.__file__).parent}, target {args.target}, tiers {args.tiers}, "
          f"{len(cases)} bugs, {seconds:.0f} s")
    print(f"{'bug':26} {'kind':30} {'true':>4}  {'caught':6} {'located':7} first new finding (line)")
    caught = located = related_hit = 0
    for bug, base_path, bug_path, line in cases:
        before = {(f.code, f.span.line, f.message) for f in reports[str(base_path)].findings}
        new = [f for f in reports[str(bug_path)].findings
               if f.severity in ("error", "warning") and (f.code, f.span.line, f.message) not in before]
        base_errors = [f for f in reports[str(base_path)].findings if f.severity == "error"]
        hit = [f for f in new if abs(f.span.line + 1 - line) <= 1]
        near = [f for f in new if any(abs(r.span.line + 1 - line) <= 1 for r in f.related)]
        caught += bool(new)
        located += bool(hit)
        related_hit += bool(hit or near)
        first = (hit or new)[0] if new else None
        shown = f"{first.code} ({first.span.line + 1}) {first.message[:60]}" if first else "-"
        flag = " [base has errors]" if base_errors else ""
        print(f"{bug.id:26} {bug.kind:30} {line:>4}  {'yes' if new else 'no':6} {'yes' if hit else 'no':7} {shown}{flag}")
    n = len(cases) or 1
    print(f"\ncaught {caught}/{len(cases)} = {caught / n:.0%}; located at the true line ±1: {located}/{len(cases)} = "
          f"{located / n:.0%} (counting related places too: {related_hit}/{len(cases)} = {related_hit / n:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
