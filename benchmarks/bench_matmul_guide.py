"""The cost model's factors, fitted on the TPU v5e times jax's Pallas matmul guide publishes, and its error.

Truth: the outputs of ``docs/pallas/tpu/matmul.ipynb`` in jax-ml/jax (read at commit
cec06d116c05, Aug 2026), typed in below with the id of the cell that printed each figure. Every
figure is the guide's ``timeit`` of 100 calls of ``jax.block_until_ready(f(x, y))`` on a TPU v5e,
bf16 inputs of ``jnp.ones``; the guide notes this includes Python dispatch:

- cell ``RjU3sSTUWzIk``: its blocked matmul (f32 VMEM accumulator, ``pl.when`` init and
  write-back) at bm=bk=bn=128 and at bm=512, bk=1024, bn=1024, for 1024^3, 4096^3 and 8192^3;
- cell ``OpU7I7BNXQYg``: XLA's ``jnp.matmul`` at the same three sizes;
- cell ``AcBMHhKLhkDp``: the kernel with ``transpose_rhs=True`` (the wrapper swaps y's axes first);
- cell ``BOu7WBCBlHpN``: the kernel with a fused ``jax.nn.relu`` before the write-back.
(The guide's float32 cells print no timings: there is no published f32 point.)

The kernels here are written for this benchmark from the guide's description (the same grid, block
specs, accumulator and branches), not copied. Each kernel is exported for the TPU and its module counted
(``runner/program/program_price.price_program``: the one cost model)
and ``jnp.matmul`` is compiled deviceless for v5e and read op by op (``estimate_reference``), once;
then the model's factors (runner/program/cost_model.Factors) are **fitted** on these 21 points: least squares
on log time of ``estimate(factors) + dispatch`` against the published time, over ``mxu_efficiency``
(the Pallas points' matmuls), ``xla_cycles_scale`` (XLA's own cycle estimates, the XLA points),
``step_overhead_s`` (the 128-block points) and ``dispatch`` (the guide's Python dispatch in every
figure: the measurement's, not the model's). ``hbm_efficiency`` stays at the model's assumed value
(no point is bandwidth-bound). Printed:

- **in-sample** (the factors were fitted on these very points, so this is the fit's residual, not
  a test): each point's estimate vs published, the Pallas/XLA ratios, the Spearman correlation;
- **leave-one-out**: each point predicted by factors fitted on the other 20 (out of sample for that
  point);
- how far this fit on the guide alone is from the factors typed into runner/program/cost_model.FACTORS (those
  are fitted over three families of published times by bench_public_timings.py, which fails when they
  move; this benchmark only prints the difference);
- outside this guide-only fit (but inside the typed factors' three-family fit, whose out-of-sample
  check is bench_public_timings.py's leave-family-out): the block-sparse guide's published
  DSD-kernel/dense ratio (``HELD_OUT``), and the v6e 8192x8192x28672 bf16 GEMM's XLA time printed as an
  example output in JAXBench's README (``README_V6E_GEMM``: a README example, possibly illustrative).

No TPU is used. Run: ``python benchmarks/bench_matmul_guide.py [--json]`` (about 15 s).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                     "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():  # libtpu refuses a second process otherwise
    os.environ.setdefault(_name, _value)

# (cell id, variant, (bm, bk, bn) or None for XLA, size, published seconds)
PUBLISHED = [
    ("RjU3sSTUWzIk", "plain", (128, 128, 128), 1024, 0.00029766598949208854),
    ("RjU3sSTUWzIk", "plain", (128, 128, 128), 4096, 0.011771515250438824),
    ("RjU3sSTUWzIk", "plain", (128, 128, 128), 8192, 0.09183577066054567),
    ("RjU3sSTUWzIk", "plain", (512, 1024, 1024), 1024, 0.00012708659982308746),
    ("RjU3sSTUWzIk", "plain", (512, 1024, 1024), 4096, 0.00088908776990138),
    ("RjU3sSTUWzIk", "plain", (512, 1024, 1024), 8192, 0.006099433819763363),
    ("OpU7I7BNXQYg", "xla", None, 1024, 0.00011943008983507753),
    ("OpU7I7BNXQYg", "xla", None, 4096, 0.0008272899803705514),
    ("OpU7I7BNXQYg", "xla", None, 8192, 0.006047147869830951),
    ("AcBMHhKLhkDp", "transpose_rhs", (128, 128, 128), 1024, 0.0003029372810851783),
    ("AcBMHhKLhkDp", "transpose_rhs", (128, 128, 128), 4096, 0.012017967159627005),
    ("AcBMHhKLhkDp", "transpose_rhs", (128, 128, 128), 8192, 0.09500920018996112),
    ("AcBMHhKLhkDp", "transpose_rhs", (512, 1024, 1024), 1024, 0.00012131539988331496),
    ("AcBMHhKLhkDp", "transpose_rhs", (512, 1024, 1024), 4096, 0.0008790623804088682),
    ("AcBMHhKLhkDp", "transpose_rhs", (512, 1024, 1024), 8192, 0.006107717020204291),
    ("BOu7WBCBlHpN", "relu", (128, 128, 128), 1024, 0.00030103540048003196),
    ("BOu7WBCBlHpN", "relu", (128, 128, 128), 4096, 0.011807117109419778),
    ("BOu7WBCBlHpN", "relu", (128, 128, 128), 8192, 0.09181861146935262),
    ("BOu7WBCBlHpN", "relu", (512, 1024, 1024), 1024, 0.00012622540001757442),
    ("BOu7WBCBlHpN", "relu", (512, 1024, 1024), 4096, 0.000896632740041241),
    ("BOu7WBCBlHpN", "relu", (512, 1024, 1024), 8192, 0.006130605939542875),
]
WITHIN = 0.25

# Held out (never looked at while choosing the model's constants): jax's block-sparse guide,
# docs/pallas/tpu/sparse.md, cell CkzjqnekpZbx, TPU v5e: its DSD kernel (a 16384^3 bf16 product whose
# left operand keeps 10% of its 512 x 512 blocks, sampled with jax.random.key(0)) vs a dense ``x @ y``.
HELD_OUT = {"cell": "CkzjqnekpZbx", "kernel_s": 8.136e-3, "reference_s": 46.953e-3}
# JAXBench's README (accelerator-agents, "Output (with --json)"): 8p_GEMM (M=K=8192, N=28672, bf16 jnp.dot)
# on v6e, "baseline": {"median_ms": 5.32, ...}: device-side profiler time (no dispatch). An example in a README.
README_V6E_GEMM = {"m": 8192, "k": 8192, "n": 28672, "seconds": 5.32e-3}


def blocked_matmul(x, y, *, bm: int, bk: int, bn: int, transpose_rhs: bool = False, activation=None):
    """C = activation(x @ y) over a (m/bm, n/bn, k/bk) grid with an f32 accumulator in VMEM."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    m, k = x.shape
    n = y.shape[0] if transpose_rhs else y.shape[1]
    steps_k = k // bk
    contract = (((1,), (1,)), ((), ())) if transpose_rhs else (((1,), (0,)), ((), ()))

    def body(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _zero():
            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

        acc_ref[...] += jax.lax.dot_general(x_ref[...], y_ref[...], contract, preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == steps_k - 1)
        def _store():
            result = acc_ref[...]
            if activation is not None:
                result = activation(result)
            o_ref[...] = result.astype(o_ref.dtype)

    y_spec = (pl.BlockSpec((bn, bk), lambda i, j, kk: (j, kk)) if transpose_rhs
              else pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)))
    return pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // bm, n // bn, steps_k),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), y_spec],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def program(variant: str, blocks):
    import jax
    import jax.numpy as jnp

    if variant == "xla":
        return jnp.matmul
    bm, bk, bn = blocks
    if variant == "transpose_rhs":  # as the guide's wrapper: y given (n, k), axes swapped, then transposed in-kernel
        return lambda x, y: blocked_matmul(x, y.swapaxes(0, 1), bm=bm, bk=bk, bn=bn, transpose_rhs=True)
    act = jax.nn.relu if variant == "relu" else None
    return functools.partial(blocked_matmul, bm=bm, bk=bk, bn=bn, activation=act)


def sparse_points():
    """The block-sparse guide's DSD kernel (written here from its description: a (N/bn, blocks) grid,
    scalar-prefetched block indices, an f32 accumulator zeroed at each new output row block) and its
    dense reference, with the guide's block mask reproduced from its seed."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    size, blk = 16384, 512
    mask = np.asarray(jax.random.bernoulli(jax.random.split(jax.random.key(0))[0], p=0.1, shape=(size // blk,) * 2))
    rows, cols = (a.astype(np.int32) for a in np.nonzero(mask))
    blocks = len(rows)

    def body(rows_ref, cols_ref, x_ref, y_ref, _zeros, o_ref, acc_ref):
        b = pl.program_id(1)
        first = (b == 0) | (rows_ref[b] != rows_ref[jnp.maximum(b - 1, 0)])
        last = (b == blocks - 1) | (rows_ref[b] != rows_ref[jnp.minimum(b + 1, blocks - 1)])

        @pl.when(first)
        def _zero():
            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

        acc_ref[...] += jnp.dot(x_ref[0], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(last)
        def _store():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    out_map = lambda j, b, r, c: (r[b], j)  # noqa: E731
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2, grid=(size // blk, blocks),
        in_specs=[pl.BlockSpec((1, blk, blk), lambda j, b, r, c: (b, 0, 0)),
                  pl.BlockSpec((blk, blk), lambda j, b, r, c: (c[b], j)),
                  pl.BlockSpec((blk, blk), out_map)],
        out_specs=pl.BlockSpec((blk, blk), out_map),
        scratch_shapes=[pltpu.VMEM((blk, blk), jnp.float32)])
    call = pl.pallas_call(body, grid_spec=spec, out_shape=jax.ShapeDtypeStruct((size, size), jnp.bfloat16),
                          input_output_aliases={4: 0})
    kernel_args = [rows, cols, jax.ShapeDtypeStruct((blocks, blk, blk), jnp.bfloat16),
                   jax.ShapeDtypeStruct((size, size), jnp.bfloat16), jax.ShapeDtypeStruct((size, size), jnp.bfloat16)]
    dense = [jax.ShapeDtypeStruct((size, size), jnp.bfloat16)] * 2
    return call, kernel_args, (lambda x, y: x @ y), dense, blocks


def held_out(factors, dispatch: float, chip_name: str = "v5e") -> dict:
    from pallasite.analysis.types import chip_target
    from pallasite.runner.program import cost_model
    from pallasite.runner.chip_probe import spec_from_jax
    from pallasite.runner.program.program_price import price_program
    from pallasite.runner.tune_ops import _topology_device

    chip = spec_from_jax(chip_target(chip_name))
    call, kargs, ref, rargs, blocks = sparse_points()
    est = price_program(call, kargs, chip, factors=factors)
    if est.status != "ok":
        raise SystemExit(f"sparse kernel: {est.error}")
    ref_s = cost_model.estimate_reference(ref, rargs, chip, _topology_device(chip_name), factors=factors)["seconds"]
    published = HELD_OUT["kernel_s"] / HELD_OUT["reference_s"]
    ratio = (est.seconds + dispatch) / (ref_s + dispatch)
    return {"blocks": blocks, "kernel_s": est.seconds, "reference_s": ref_s, "published_ratio": published,
            "estimated_ratio": ratio, "ok": abs(ratio / published - 1) <= WITHIN, "kernel_bound": est.bound}


def readme_gemm(factors) -> dict:
    import jax
    import jax.numpy as jnp

    from pallasite.analysis.types import chip_target
    from pallasite.runner.program import cost_model
    from pallasite.runner.chip_probe import spec_from_jax
    from pallasite.runner.tune_ops import _topology_device

    chip = spec_from_jax(chip_target("v6e"))
    g = README_V6E_GEMM
    args = [jax.ShapeDtypeStruct((g["m"], g["k"]), jnp.bfloat16), jax.ShapeDtypeStruct((g["k"], g["n"]), jnp.bfloat16)]
    ref = cost_model.estimate_reference(jnp.dot, args, chip, _topology_device("v6e"), factors=factors)
    v2_peak = 2 * g["m"] * g["k"] * g["n"] / chip.bf16_flops
    return {"published_s": g["seconds"], "estimate_s": ref.get("seconds"), "bound": ref.get("bound"),
            "priced_by": ref.get("priced_by"), "at_peak_s": v2_peak}


def ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            out[order[t]] = (i + j) / 2
        i = j + 1
    return out


def spearman(xs: list[float], ys: list[float]) -> float:
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else 0.0


def components(chip_name: str = "v5e") -> tuple[list[dict], object]:
    """Every published point with what the model counted for it, once (the fit re-prices these)."""
    import jax
    import jax.numpy as jnp

    from pallasite.analysis.types import chip_target
    from pallasite.runner.program import cost_model
    from pallasite.runner.chip_probe import spec_from_jax
    from pallasite.runner.program.compiled_ops import hlo_ops
    from pallasite.runner.program.program_price import price_program
    from pallasite.runner.tune_ops import _topology_device

    chip = spec_from_jax(chip_target(chip_name))
    device = _topology_device(chip_name)
    for _ in range(3):  # libtpu can refuse a topology while another process starts it: ask again
        if device is not None:
            break
        import time

        time.sleep(2)
        device = _topology_device(chip_name)
    if device is None:
        from pallasite.runner.tiers import tier2_unavailable

        raise SystemExit("libtpu is needed: the XLA points are priced from XLA's deviceless compile for v5e "
                         f"({tier2_unavailable(chip_name)})")
    out = []
    for cell, variant, blocks, size, published in PUBLISHED:
        args = [jax.ShapeDtypeStruct((size, size), jnp.bfloat16)] * 2
        point = {"cell": cell, "variant": variant, "blocks": blocks, "size": size, "published_s": published}
        parts: list = []
        est = price_program(jnp.matmul if variant == "xla" else program(variant, blocks), args, chip, parts=parts)
        if est.status != "ok":
            raise SystemExit(f"{variant} {blocks} {size}: {est.error}")
        if variant == "xla":
            _, text = cost_model.xla_reference_cost(jnp.matmul, args, device, chip_name, want_text=True)
            ops, _ = hlo_ops(text or "")
            if not ops:
                raise SystemExit(f"XLA {size}: no ops read from the compiled module")
            point["hlo"] = (ops, cost_model.peak_compute_s(parts[0][1], chip))
        else:
            point["parts"] = parts[0]
        out.append(point)
    return out, chip


def price(point: dict, chip, factors) -> tuple[float, str]:
    from pallasite.runner.program import cost_model

    if "hlo" in point:
        ops, floor = point["hlo"]
        got = cost_model.price_hlo(ops, chip, factors, floor_s=floor)
    else:
        counted, xla = point["parts"]
        got = cost_model.roofline(counted, chip, xla, factors)
    return got["seconds"], got["bound"]


def fit(points: list[dict], chip, skip: int | None = None) -> tuple[object, float]:
    """(factors, dispatch) minimising the squared log error over the points (but ``skip``)."""
    import math

    import numpy as np
    from scipy.optimize import least_squares

    from pallasite.runner.program.cost_model import FACTORS, Factors

    use = [p for i, p in enumerate(points) if i != skip]

    def factors_of(x):
        return Factors(mxu_efficiency=x[1], xla_cycles_scale=x[2], step_overhead_s=x[3] * 1e-6,
                       hbm_efficiency=FACTORS.hbm_efficiency)

    def residuals(x):
        f = factors_of(x)
        return np.array([math.log(price(p, chip, f)[0] + x[0] * 1e-6) - math.log(p["published_s"]) for p in use])

    x0 = [90.0, 0.9, 1.0, 0.35]
    got = least_squares(residuals, x0, bounds=([0.0, 0.3, 0.3, 0.05], [1000.0, 1.0, 3.0, 3.0]),
                        x_scale=[50, 0.1, 0.1, 0.1])
    return factors_of(got.x), got.x[0] * 1e-6


def table(points: list[dict], chip, predicted: list[float], dispatch: list[float]) -> dict:
    """Errors and Pallas/XLA ratios of ``predicted`` (device seconds) + ``dispatch`` against the published."""
    with_d = [s + d for s, d in zip(predicted, dispatch)]
    errors = [w / p["published_s"] - 1 for w, p in zip(with_d, points)]
    xla = {p["size"]: i for i, p in enumerate(points) if p["variant"] == "xla"}
    rows = []
    for i, p in enumerate(points):
        if p["variant"] == "xla":
            continue
        j = xla[p["size"]]
        pub = p["published_s"] / points[j]["published_s"]
        est = with_d[i] / with_d[j]
        rows.append({"point": i, "published_ratio": pub, "estimated_ratio": est, "ok": abs(est / pub - 1) <= WITHIN,
                     "same_side": (est > 1) == (pub > 1)})
    abs_err = sorted(abs(e) for e in errors)
    return {"errors": errors, "median_abs_error": abs_err[len(abs_err) // 2], "max_abs_error": abs_err[-1],
            "spearman": spearman([p["published_s"] for p in points], with_d), "ratios": rows,
            "ratios_within": sum(r["ok"] for r in rows), "ratios_same_side": sum(r["same_side"] for r in rows)}


def main() -> int:
    import dataclasses

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-loo", action="store_true", help="skip the leave-one-out refits")
    args = parser.parse_args()
    from pallasite.runner.program.cost_model import FACTORS, MODEL

    points, chip = components()
    factors, dispatch = fit(points, chip)
    in_sample = [price(p, chip, factors) for p in points]
    ins = table(points, chip, [s for s, _ in in_sample], [dispatch] * len(points))
    loo_pred, loo_d = [], []
    if not args.no_loo:
        for i, p in enumerate(points):
            f_i, d_i = fit(points, chip, skip=i)
            loo_pred.append(price(p, chip, f_i)[0])
            loo_d.append(d_i)
    loo = table(points, chip, loo_pred, loo_d) if loo_pred else None
    typed = dataclasses.asdict(FACTORS)
    moved = {k: (typed[k], v) for k, v in dataclasses.asdict(factors).items()
             if k in ("mxu_efficiency", "xla_cycles_scale", "step_overhead_s") and abs(v / typed[k] - 1) > 0.02}
    sparse = held_out(FACTORS, dispatch)
    gemm = readme_gemm(FACTORS)
    if args.json:
        print(json.dumps({"model": MODEL, "fitted": dataclasses.asdict(factors), "dispatch_s": dispatch,
                          "typed_in": typed, "moved": moved, "in_sample": ins, "leave_one_out": loo,
                          "held_out_sparse": sparse, "readme_v6e_gemm": gemm,
                          "points": [{k: v for k, v in p.items() if k not in ("parts", "hlo")} for p in points]},
                         default=str, indent=1))
        return 0
    print(f"model: {MODEL}, chip v5e; truth: the guide's published TPU v5e times (timeit, dispatch included)")
    print(f"fitted on all 21 points: mxu_efficiency {factors.mxu_efficiency:.3f}, xla_cycles_scale "
          f"{factors.xla_cycles_scale:.3f}, step_overhead {factors.step_overhead_s * 1e6:.3f} us, dispatch "
          f"{dispatch * 1e6:.1f} us; hbm_efficiency {factors.hbm_efficiency:g} (assumed, not fitted)")
    print(f"{'cell':13} {'variant':13} {'blocks':15} {'size':>5} {'published':>10} {'estimate':>10} {'+dispatch':>10} "
          f"{'error':>7} {'bound':>8} {'LOO err':>8}")
    for i, (p, (sec, bound)) in enumerate(zip(points, in_sample)):
        loo_err = f"{loo['errors'][i]:+8.1%}" if loo else ""
        print(f"{p['cell']:13} {p['variant']:13} {str(p['blocks'] or 'XLA'):15} {p['size']:>5} "
              f"{p['published_s'] * 1e3:8.3f}ms {sec * 1e3:8.3f}ms {(sec + dispatch) * 1e3:8.3f}ms "
              f"{ins['errors'][i]:+7.1%} {bound:>8} {loo_err}")
    print(f"IN-SAMPLE (fitted on these points): median |error| {ins['median_abs_error']:.1%}, max "
          f"{ins['max_abs_error']:.1%}; Spearman {ins['spearman']:.3f}; Pallas/XLA ratio within {WITHIN:.0%} on "
          f"{ins['ratios_within']}/{len(ins['ratios'])}, on the published side of 1.0 on "
          f"{ins['ratios_same_side']}/{len(ins['ratios'])}")
    if loo:
        print(f"LEAVE-ONE-OUT (each point predicted by factors fitted on the other 20): median |error| "
              f"{loo['median_abs_error']:.1%}, max {loo['max_abs_error']:.1%}; Spearman {loo['spearman']:.3f}; "
              f"ratio within {WITHIN:.0%} on {loo['ratios_within']}/{len(loo['ratios'])}, same side of 1.0 on "
              f"{loo['ratios_same_side']}/{len(loo['ratios'])}")
    print("runner/program/cost_model.FACTORS (fitted over three families by bench_public_timings.py) "
          + ("match this fit on the guide alone (within 2%)" if not moved else
             f"differ from this fit on the guide alone by more than 2%: {moved}"))
    h = sparse
    print(f"NOT IN THIS GUIDE-ONLY FIT (the typed factors are fitted on it too: bench_public_timings.py), sparse guide (cell {HELD_OUT['cell']}, {h['blocks']} of 1024 blocks): published "
          f"kernel/reference {h['published_ratio']:.3f}; estimated {h['kernel_s'] * 1e3:.3f} / "
          f"{h['reference_s'] * 1e3:.3f} ms = {h['estimated_ratio']:.3f} with the dispatch "
          f"({'within' if h['ok'] else 'NOT within'} {WITHIN:.0%})")
    g = gemm
    print(f"NOT IN THIS GUIDE-ONLY FIT (in the typed factors' fit), JAXBench README example, XLA 8192x8192x28672 bf16 GEMM on v6e: published "
          f"{g['published_s'] * 1e3:.2f} ms; estimated {g['estimate_s'] * 1e3:.2f} ms "
          f"({g['estimate_s'] / g['published_s'] - 1:+.1%}, "
          f"{g['bound']}-bound; at the chip's peak, as v2 priced it: {g['at_peak_s'] * 1e3:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
