"""The one cost model on real kernels: each exported for the TPU and its module priced, with and without the
inputs' values, against the floor of moving the bytes it moves.

Every figure pallasite makes comes from ``runner/program/module_cost.price_exported`` over the module a program exports
(issue 56). This benchmark exports each kernel's entry for the chip's TPU (``runner/program/program_export.
export_program``, platforms ``("tpu",)``, inside ``runner/target_chip.target_chip``) at its task's own size
and prices the module twice: with the task's integer inputs as the judge's values (page tables, lengths,
group sizes: what scalar-prefetch index maps, dynamic grids and data-dependent loops read) and without any
(the bounds the model then states). Printed per kernel and way: the figure, what bounds it, whether its DMA
and work counts are exact or bounds, the HBM floor (the bytes its blocks and DMAs move at the chip's
bandwidth: no figure may be below it) and the time the pricing took (warm, this host's CPU).

Kernels: the pallasite fixtures under tests/data, jax's own TPU kernels in this environment
(jax.experimental.pallas.ops.tpu) at example shapes, and - given a JAXBench checkout - its 8 hand-tuned Pallas
kernels (``optimized.py`` of 1p..11p, their own ``create_inputs``).

    python benchmarks/bench_module_cost.py [--jaxbench PATH/JAXBench/benchmark] [--chip v6e]
                                           [--only NAME] [--json OUT]

It uses only ``export_program``, ``price_exported`` and ``target_chip``, so the same script prices a checkout
of an older commit (``PYTHONPATH`` at a copy of it): docs/timing.md's before/after table is this script run
on both. No TPU is used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
# (label, file under tests/data, entry or None for the file's task, inputs function or None)
FIXTURES = [
    ("add", "optimize/add.py", None, None),
    ("matmul", "tune/matmul.py", "matmul", None),
    ("elementwise exp", "tune/elementwise.py", "fused", None),
    ("row reduction", "tune/reduction.py", "rowsum", None),
    ("scalar prefetch", "tune/prefetch.py", "gather", None),
    ("pl.ANY + manual DMA", "tune/manual_dma.py", "chunk_sum", "inputs"),
    ("dynamic grid", "tune/dynamic_grid.py", "scale_active", "inputs"),
    ("megacore parallel", "megacore/row_sums.py", None, None),
    ("flash attention (causal)", "real/flash_attention_causal.py", None, None),
    ("paged attention", "real/paged_attention_decode.py", None, None),
    ("megablox gmm", "real/megablox_gmm.py", None, None),
    ("sparse MoE", "moe/sparse_moe.py", None, None),
]
JAXBENCH = ("1p_Flash_Attention", "2p_GQA_Attention", "3p_MLA_Attention", "4p_Sparse_Attention",
            "6p_Paged_Attention", "7p_Ragged_Paged_Attention", "8p_GEMM", "11p_Megablox_GMM")


def task_args(path: str, entry: str | None, inputs: str | None):
    """(entry function over flat arrays, its args): integer inputs concrete (the task's own values), float
    inputs abstract, as the estimate op and the judge hold them."""
    import jax
    import numpy as np

    from pallasite.runner.tasks import tasks_runtime
    from pallasite.runner.loader import user_module

    with user_module(path) as module:
        if entry is not None:
            fn = getattr(module, entry)
            made = getattr(module, inputs or "example_inputs")()
        else:
            task = tasks_runtime.discover(module, path)[0]
            fn, made = task.entry, task.inputs()
    made = tuple(made) if isinstance(made, (list, tuple)) else (made,)
    leaves, tree = jax.tree_util.tree_flatten(made)
    arrays = [i for i, x in enumerate(leaves) if hasattr(x, "shape")]
    statics = {i: x for i, x in enumerate(leaves) if not hasattr(x, "shape")}

    def flat(*xs):
        it = iter(xs)
        full = [statics[i] if i in statics else next(it) for i in range(len(leaves))]
        return fn(*jax.tree_util.tree_unflatten(tree, full))

    args = []
    for i in arrays:
        x = leaves[i]
        integer = np.issubdtype(np.dtype(x.dtype), np.integer)
        args.append(np.asarray(x) if integer and not isinstance(x, jax.ShapeDtypeStruct)
                    else jax.ShapeDtypeStruct(x.shape, x.dtype))
    return flat, args


def jax_kernels():
    """jax's own TPU kernels at example shapes: (label, entry, args)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    from jax.experimental.pallas.ops.tpu.megablox import gmm
    from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention

    s = jax.ShapeDtypeStruct
    qkv = [s((1, 4, 1024, 128), jnp.bfloat16)] * 3
    lengths = np.array([300, 1000, 64, 512], np.int32)
    pages = np.arange(4 * 16, dtype=np.int32).reshape(4, 16)
    groups = np.array([128, 256, 0, 128], np.int32)
    return [
        ("jax flash_attention", lambda q, k, v: fa.flash_attention(q, k, v, causal=False), qkv),
        ("jax paged_attention", lambda q, k, v, l, p: paged_attention(q, k, v, l, p, pages_per_compute_block=4),
         [s((4, 8, 128), jnp.bfloat16), s((8, 64, 64, 128), jnp.bfloat16), s((8, 64, 64, 128), jnp.bfloat16),
          lengths, pages]),
        ("jax megablox gmm", lambda a, b, g: gmm(a, b, g, preferred_element_type=jnp.bfloat16, tiling=(128, 128, 128)),
         [s((512, 256), jnp.bfloat16), s((4, 256, 512), jnp.bfloat16), groups]),
    ]


def export(fn, args, chip):
    """(the module's bytes, the judge's values: the concrete inputs, None for the abstract ones)."""
    import jax
    import numpy as np

    from pallasite.runner.program.program_export import export_program
    from pallasite.runner.target_chip import target_chip

    sig = [[list(a.shape), jax.numpy.dtype(a.dtype).name] for a in args]
    with target_chip(chip.name):
        blob = export_program(fn, sig, chip.device_kind, platforms=("tpu",)).serialize()
    return blob, [None if isinstance(a, jax.ShapeDtypeStruct) else np.asarray(a) for a in args]


def priced(blob, chip, values) -> dict:
    """One pricing in words and numbers (the figure, its bound, its counts' kinds, the HBM floor)."""
    from pallasite.runner.program.module_cost import price_exported

    t = time.perf_counter()
    est = price_exported(blob, chip, values=values)
    took = time.perf_counter() - t
    if est.status != "ok":
        return {"status": est.status, "why": (est.error or "")[:400], "pricing_s": took}
    moved = sum(c.hbm_bytes + c.dma_bytes for c in est.calls) + (est.xla_bytes or 0)
    kinds = sorted({c.dma_count for c in est.calls if c.dma_copies} | {c.flops_count for c in est.calls})
    return {"status": "ok", "seconds": est.seconds, "bound": est.bound, "counts": kinds or ["exact"],
            "floor_s": moved / chip.hbm_bytes_per_s, "dma_bytes": sum(c.dma_bytes for c in est.calls),
            "pricing_s": took, "notes": sorted({n[:160] for c in est.calls for n in c.notes
                                                if "bound" in n or "not estimated" in n or "scalar work" in n})}


def row(label: str, fn, args, chip) -> dict:
    out = {"label": label}
    try:
        blob, values = export(fn, args, chip)
    except Exception as exc:  # noqa: BLE001 - one kernel's failure is a row, not the end
        out["error"] = f"export: {type(exc).__name__}: {str(exc)[:200]}"
        return out
    out["with_values"] = priced(blob, chip, values)
    out["without_values"] = priced(blob, chip, None) if any(v is not None for v in values) else out["with_values"]
    return out


def _words(p: dict) -> str:
    if p.get("status") != "ok":
        return f"no estimate: {p.get('why', '')[:90]}"
    floor = "" if p["seconds"] >= p["floor_s"] * (1 - 1e-9) else f" BELOW THE FLOOR {p['floor_s'] * 1e6:.1f} us"
    return (f"{p['seconds'] * 1e6:11.2f} us {p['bound']:8s} {'/'.join(p['counts']):24s} floor "
            f"{p['floor_s'] * 1e6:9.2f} us{floor}  ({p['pricing_s']:.1f} s)")


def report(r: dict) -> None:
    if "error" in r:
        print(f"{r['label']:34s} {r['error']}")
        return
    print(f"{r['label']:34s} values:    {_words(r['with_values'])}")
    if r["without_values"] is not r["with_values"]:
        print(f"{'':34s} no values: {_words(r['without_values'])}")
    for n in (r["without_values"].get("notes") or [])[:3]:
        print(f"{'':36s}- {n}")


def below_floor(rows: list[dict]) -> list[str]:
    """Rows whose figure, with or without the values, is below the bytes the kernel moves with them."""
    out = []
    for r in rows:
        known = r.get("with_values") or {}
        if known.get("status") != "ok":
            continue
        for way in ("with_values", "without_values"):
            p = r.get(way) or {}
            if p.get("status") == "ok" and p["seconds"] < known["floor_s"] * (1 - 1e-9):
                out.append(f"{r['label']} ({way.replace('_', ' ')}: {p['seconds'] * 1e6:.1f} us < "
                           f"{known['floor_s'] * 1e6:.1f} us)")
    return out


def cases(args) -> list:
    out = [(label, lambda r=rel, e=entry, i=inputs: task_args(os.path.join(DATA, r), e, i))
           for label, rel, entry, inputs in FIXTURES]
    out.append(("jax kernels", None))
    if args.jaxbench:
        for name in JAXBENCH:
            path = os.path.join(args.jaxbench, name, "optimized.py")
            out.append((f"JAXBench {name}", lambda p=path: task_args(p, None, None)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jaxbench", default=os.environ.get("JAXBENCH_DIR"))
    parser.add_argument("--chip", default="v6e")
    parser.add_argument("--only", default=None, help="only the kernels whose label contains this")
    parser.add_argument("--json", default=None, help="write the rows to this file")
    args = parser.parse_args(argv)
    from pallasite.analysis.types import chip_target
    from pallasite.runner.chip_probe import spec_from_jax

    chip = spec_from_jax(chip_target(args.chip))
    rows = []
    for label, make in cases(args):
        try:
            todo = jax_kernels() if make is None else [(label, None, None)]
        except Exception as exc:  # noqa: BLE001 - jax's kernels missing from this jax: said, not fatal
            print(f"{label:34s} failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        for name, fn, fargs in todo:
            if args.only and args.only not in name:
                continue
            try:
                if make is not None:
                    fn, fargs = make()
                r = row(name, fn, fargs, chip)
            except Exception as exc:  # noqa: BLE001 - one kernel's failure is a row, not the end
                r = {"label": name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                traceback.print_exc(limit=2, file=sys.stderr)
            report(r)
            rows.append(r)
            sys.stdout.flush()
    print(f"\n{len(rows)} kernels ({args.chip}); figures below the bytes the kernel moves (counted with the "
          f"inputs' values) at the HBM bandwidth: {', '.join(below_floor(rows)) or 'none'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"chip": args.chip, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
