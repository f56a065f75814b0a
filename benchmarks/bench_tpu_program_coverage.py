"""How much of the real Pallas kernels the judge's interpreter of the TPU program runs, and how fast.

Every kernel found below is exported for the TPU (runner/program/program_export.export_program, TPU only) and
each ``tpu_custom_call`` of it run by ``pallasite.runner.tpu_program.run_call`` on the operands jax's
own TPU interpret mode passed its pallas_call, then compared with what jax's interpret mode returned
(benchmarks/tpu_program_check.py: exact for integers, 2e-2 relative for bf16, 2e-3 for f32). Per
kernel: whole and agreeing ("ok"), "mismatch" (with the largest relative difference), "unsupported:
<op> (<where>)", "fault: ..." or "error: ..." (the kernel did not export or jax's interpret mode failed
on it), and the interpreter's seconds (first run: decode + compile + run; warm: a second run). Then the
totals and the wall time.

Kernels:
- the project's fixtures with example inputs: examples/, tests/data (tune, module_cost, real, megacore,
  the timing ladder's JAXBench-like kernels) and tests/data/tpu_program (this interpreter's own);
- jax's ops/tpu kernels at small sizes: flash attention, splash attention, paged attention, megablox
  gmm, ragged paged attention;
- JAXBench's hand-tuned kernels (``*p_*/optimized.py`` with their ``baseline.py`` CONFIG) at the judge's
  reduced CONFIG size (runner/measure/timing_ladder.py; where none fits the judge's budget, the ladder's smallest
  at a larger budget): ``--jaxbench PATH`` or ``JAXBENCH_DIR``; skipped with a message when absent.

    python benchmarks/bench_tpu_program_coverage.py [--jaxbench PATH/JAXBench/benchmark] [--only TEXT]

CPU only: no figure here is TPU time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import tpu_program_check as check_mod  # noqa: E402  (sets the CPU-only environment first)

DATA = os.path.join(ROOT, "tests", "data")
# (label, file, entry or None for the file's task, inputs function or None)
FIXTURES = [
    ("examples add", os.path.join(ROOT, "examples", "add.py"), None, None),
    ("examples matmul", os.path.join(ROOT, "examples", "matmul.py"), "matmul", None),
    ("optimize add", os.path.join(DATA, "optimize", "add.py"), None, None),
    ("tune matmul", os.path.join(DATA, "tune", "matmul.py"), "matmul", None),
    ("tune elementwise exp", os.path.join(DATA, "tune", "elementwise.py"), "fused", None),
    ("tune row reduction", os.path.join(DATA, "tune", "reduction.py"), "rowsum", None),
    ("tune fixed blocks", os.path.join(DATA, "tune", "fixed_blocks.py"), "scale", None),
    ("tune scalar prefetch", os.path.join(DATA, "tune", "prefetch.py"), "gather", None),
    ("tune pl.ANY + manual DMA", os.path.join(DATA, "tune", "manual_dma.py"), "chunk_sum", "inputs"),
    ("tune dynamic grid", os.path.join(DATA, "tune", "dynamic_grid.py"), "scale_active", "inputs"),
    ("megacore row sums", os.path.join(DATA, "megacore", "row_sums.py"), None, None),
    ("module_cost int8 matmul", os.path.join(DATA, "module_cost", "int8_matmul.py"), "int8_matmul", None),
    ("module_cost chunk loop", os.path.join(DATA, "module_cost", "chunk_loop.py"), "chunk_sums", None),
    ("real flash attention (causal)", os.path.join(DATA, "real", "flash_attention_causal.py"), None, None),
    ("real blocked matmul", os.path.join(DATA, "real", "matmul_blocked.py"), None, None),
    ("real paged attention", os.path.join(DATA, "real", "paged_attention_decode.py"), None, None),
    ("real megablox gmm", os.path.join(DATA, "real", "megablox_gmm.py"), None, None),
] + [(f"ladder {n}", os.path.join(DATA, "timing", "ladder", n, "optimized.py"), None, None)
     for n in ("attention", "gemm", "gmm", "gqa", "mla", "paged", "paged_attention", "ragged_paged", "rmsnorm",
               "splash")]


def _random_like(leaf: Any, key: int) -> Any:
    """A concrete array for an abstract input: normal floats, small ints (integer inputs the task makes
    concretely are kept: page tables, group sizes)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    if not isinstance(leaf, jax.ShapeDtypeStruct):
        return leaf
    k = jax.random.key(key)
    if jnp.issubdtype(leaf.dtype, jnp.floating):
        return jax.random.normal(k, leaf.shape, jnp.float32).astype(leaf.dtype)
    if jnp.issubdtype(leaf.dtype, jnp.integer):
        return jax.random.randint(k, leaf.shape, -100, 100).astype(leaf.dtype)
    return jnp.asarray(np.zeros(leaf.shape, leaf.dtype))


def flat_task(made: Any, fn: Callable[..., Any]) -> tuple[Callable[..., Any], list[Any]]:
    """``fn`` over the array leaves of its inputs ``made`` (other leaves fixed), and those arrays."""
    import jax

    made = tuple(made) if isinstance(made, (list, tuple)) else (made,)
    leaves, tree = jax.tree_util.tree_flatten(made)
    arrays = [i for i, x in enumerate(leaves) if hasattr(x, "shape")]
    statics = {i: x for i, x in enumerate(leaves) if not hasattr(x, "shape")}

    def flat(*xs: Any) -> Any:
        it = iter(xs)
        full = [statics[i] if i in statics else next(it) for i in range(len(leaves))]
        return fn(*jax.tree_util.tree_unflatten(tree, full))

    return flat, [_random_like(leaves[i], n) for n, i in enumerate(arrays)]


def fixture(path: str, entry: str | None, inputs: str | None) -> tuple[Callable[..., Any], list[Any]]:
    from pallasite.runner.tasks import tasks_runtime
    from pallasite.runner.loader import user_module

    with user_module(path) as module:
        if entry is not None:
            fn = getattr(module, entry)
            made = getattr(module, inputs or "example_inputs")()
        else:
            task = tasks_runtime.discover(module, path)[0]
            fn, made = task.entry, task.inputs()
        if path.endswith("paged_attention_decode.py"):  # abstract index tables: valid ones
            made = _paged_tables(module, made)
    return flat_task(made, fn)


def _paged_tables(module: Any, made: Any) -> Any:
    """Lengths within a sequence's pages and page indices that name pages (the fixture gives shapes)."""
    import numpy as np

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, module.PAGES_PER_SEQ * module.PAGE_SIZE + 1, module.BATCH).astype(np.int32)
    pages = rng.integers(0, module.PAGES, (module.BATCH, module.PAGES_PER_SEQ)).astype(np.int32)
    return (*made[:3], lengths, pages)


def own_fixtures() -> list[tuple[str, str, str | None, str | None]]:
    """tests/data/tpu_program: each file's ``CASES`` (name -> (entry, inputs function))."""
    import importlib.util

    folder = os.path.join(DATA, "tpu_program")
    out = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not name.endswith(".py"):
            continue
        spec = importlib.util.spec_from_file_location(f"tpu_program_{name[:-3]}", os.path.join(folder, name))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for case, (entry, inputs, _) in getattr(module, "CASES", {}).items():
            if not case.startswith("bad"):
                out.append((f"tpu_program {case}", os.path.join(folder, name), entry, inputs))
    return out


def jax_kernels() -> list[tuple[str, Callable[[], tuple[Callable[..., Any], list[Any]]]]]:
    """jax's own TPU kernels at small sizes: (label, maker of (fn, args))."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def rnd(i: int, shape: tuple[int, ...], dtype: Any = jnp.bfloat16) -> Any:
        return jax.random.normal(jax.random.key(i), shape, jnp.float32).astype(dtype)

    def flash() -> Any:
        from jax.experimental.pallas.ops.tpu import flash_attention as fa

        sizes = fa.BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1)
        return (lambda q, k, v: fa.flash_attention(q, k, v, causal=True, block_sizes=sizes),
                [rnd(i, (1, 2, 256, 128)) for i in range(3)])

    def splash() -> Any:
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm

        mask = sm.MultiHeadMask([sm.CausalMask((256, 256)) for _ in range(2)])
        sizes = sk.BlockSizes(block_q=128, block_kv=128, block_kv_compute=128)
        kernel = sk.make_splash_mha_single_device(mask, block_sizes=sizes)
        return (lambda q, k, v: kernel(q, k, v), [rnd(i, (2, 256, 128)) for i in range(3)])

    def paged() -> Any:
        from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention

        lengths = np.array([100, 256, 17, 64], np.int32)
        pages = np.random.default_rng(0).permutation(4 * 16).astype(np.int32).reshape(4, 16)
        return (lambda q, k, v, l, p: paged_attention(q, k, v, l, p, pages_per_compute_block=4),
                [rnd(0, (4, 8, 128)), rnd(1, (8, 64, 16, 128)), rnd(2, (8, 64, 16, 128)), lengths, pages])

    def gmm() -> Any:
        from jax.experimental.pallas.ops.tpu.megablox import gmm as megablox_gmm

        groups = np.array([128, 64, 0, 64], np.int32)
        return (lambda a, b, g: megablox_gmm(a, b, g, preferred_element_type=jnp.float32, tiling=(128, 128, 128)),
                [rnd(0, (256, 256)), rnd(1, (4, 256, 256)), groups])

    return [("jax flash_attention (causal)", flash), ("jax splash_attention (causal)", splash),
            ("jax paged_attention", paged), ("jax megablox gmm", gmm), ("jax ragged_paged_attention", _ragged)]


def _ragged() -> Any:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa

    seqs, pages_per_seq, page, heads, kv_heads, dim = 3, 4, 16, 4, 2, 128
    kv_lens = np.array([40, 17, 64], np.int32)
    q_lens = np.array([1, 5, 16], np.int32)
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    tokens = int(cu_q[-1])
    page_indices = np.arange(seqs * pages_per_seq, dtype=np.int32).reshape(seqs, pages_per_seq)
    q = jax.random.normal(jax.random.key(0), (tokens, heads, dim), jnp.float32).astype(jnp.bfloat16)
    kv = jax.random.normal(jax.random.key(1), (seqs * pages_per_seq, page, 2 * kv_heads, dim),
                           jnp.float32).astype(jnp.bfloat16)

    def entry(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
        return rpa.ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                                          num_kv_pages_per_block=2, num_queries_per_block=8)

    return entry, [q, kv, kv_lens, page_indices, cu_q, np.array([seqs], np.int32)]


def jaxbench_kernels(root: str) -> list[tuple[str, Callable[[], Any]]]:
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "optimized.py")
        if "p_" in name and os.path.exists(path):
            out.append((f"JAXBench {name}", lambda path=path: _jaxbench(path)))
    return out


def _jaxbench(path: str) -> tuple[Callable[..., Any], list[Any]]:
    """The task's entry and its own inputs at the judge's reduced CONFIG size."""
    from pallasite.runner.measure import timing, timing_inputs, timing_ladder

    params = {"path": path, "reference_path": os.path.join(os.path.dirname(path), "baseline.py")}
    with timing.prepared(params) as prep:
        full = prep.task.abstract_args()
        sized, _ = timing._config_size(prep, full)
        if not isinstance(sized, timing_ladder.ConfigSize):  # none fits the judge's budget: the smallest it takes
            budget = timing_ladder.budget_bytes
            timing_ladder.budget_bytes = lambda: 16 << 30
            try:
                sized, _ = timing._config_size(prep, full)
            finally:
                timing_ladder.budget_bytes = budget
        scaled = sized.scaled if isinstance(sized, timing_ladder.ConfigSize) else {}
        with timing_inputs.config_scaled(timing_ladder.spaces_of(prep), scaled):
            made = timing_ladder.concrete_at(prep, scaled)
            fn = timing_ladder.scaled_probe(prep, scaled)
            flat, args = flat_task(made, fn)
            return flat, args


def measure(label: str, make: Callable[[], tuple[Callable[..., Any], list[Any]]]) -> list[check_mod.Compared]:
    started = time.perf_counter()
    try:
        fn, args = make()
        rows = check_mod.check(fn, list(args))
    except Exception as exc:  # noqa: BLE001 - the row says what failed (export, jax's interpret mode)
        detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        rows = [check_mod.Compared("?", f"error: {detail[:240]}")]
    wall = time.perf_counter() - started
    for r in rows:
        timing = f"{r.first_s:6.2f} s first, {r.warm_s:6.2f} s warm" if r.outcome in ("ok", "mismatch") else ""
        diff = f"max rel diff {r.max_diff:.2e}" if r.outcome in ("ok", "mismatch") else ""
        print(f"{label[:40]:40s} {r.name[:34]:34s} {r.outcome[:150]:12s} {diff:24s} {timing}  ({wall:.0f} s in all)",
              flush=True)
        if r.outcome in ("ok", "mismatch") and r.against != "TPU interpret mode":
            print(f"{'':40s} compared with {r.against}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jaxbench", default=os.environ.get("JAXBENCH_DIR",
                                                             "/work/ext/accelerator-agents/JAXBench/benchmark"))
    parser.add_argument("--only", default="", help="only the kernels whose label contains this text")
    args = parser.parse_args()
    kernels: list[tuple[str, Callable[[], Any]]] = []
    for label, path, entry, inputs in FIXTURES + own_fixtures():
        kernels.append((label, lambda p=path, e=entry, i=inputs: fixture(p, e, i)))
    kernels += jax_kernels()
    if os.path.isdir(args.jaxbench):
        kernels += jaxbench_kernels(args.jaxbench)
    else:
        print(f"JAXBench not found at {args.jaxbench} (--jaxbench or JAXBENCH_DIR): its kernels are skipped")
    started = time.perf_counter()
    outcomes: list[tuple[str, check_mod.Compared]] = []
    for label, make in kernels:
        if args.only and args.only not in label:
            continue
        outcomes.extend((label, r) for r in measure(label, make))
    report(outcomes, time.perf_counter() - started)


def report(outcomes: list[tuple[str, Any]], wall: float) -> None:
    total = len(outcomes)
    counts: dict[str, int] = {}
    for _, r in outcomes:
        kind = r.outcome.split(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
    ok = counts.get("ok", 0)
    warm = sorted(r.warm_s for _, r in outcomes if r.outcome == "ok")
    print(f"\n{total} kernels: {ok} run whole and agree ({100 * ok / max(total, 1):.0f}%), "
          + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()) if k != "ok"))
    if warm:
        print(f"interpreter time per kernel, warm: median {warm[len(warm) // 2]:.3f} s, max {warm[-1]:.2f} s; "
              f"wall time of the whole benchmark {wall:.0f} s (jax's interpret mode and the exports included)")


if __name__ == "__main__":
    main()
