"""The cost model fitted on published TPU times and checked leave-family-out on others.

Truth: benchmarks/data/public_tpu_timings.json, every point with the URL (at a commit) and the cell
that printed it, grouped into **families** (one source, one chip, one way of timing): jax's Pallas
matmul guide (21 v5e times), its block-sparse guide (4 v5e times), JAXBench's README (2 v6e times),
jax's SparseCore guide (4 7x times: not fitted on; its TensorCore gather derives
``gather_cycles_per_row``, its SparseCore kernels check that the model says why it cannot price them).

What the model counted for each point (a kernel's counted calls, XLA's compiled module for the chip)
is in benchmarks/data/public_tpu_components.json.gz, made by ``--count`` (libtpu for the deviceless
compiles; ``--jaxbench DIR`` for JAXBench's kernel): the default run needs neither, prices those
components with the model's current code and takes a few seconds, offline. Printed:

- **fitted** (in-sample): ``mxu_efficiency``, ``xla_cycles_scale``, ``step_overhead_s`` and the
  ``timeit`` dispatch (a nuisance parameter: the figures of the guides include Python dispatch)
  by least squares on log time over every point of the fit families, and each point's error;
- **leave-family-out** (out of sample): each fit family predicted by factors fitted on the others:
  per point, per family (median and max abs error), the Pallas/XLA ratios (on the published side of
  1.0, within 2x), and tune's choice among a kernel's published configurations (top-1 slowdown);
- the error bands an estimate's interval comes from (estimate / published over the leave-family-out
  points, per side: kernel, XLA) and whether runner/program/cost_model.FACTORS and ERROR_BANDS still match
  (exit 1 when a factor moved by more than 2% or a band no longer covers the errors);
- the SparseCore guide's points: the derived gather factor, the TensorCore add (dispatch-bound),
  and the SparseCore kernels' "not estimated" reasons.

Run: ``python benchmarks/bench_public_timings.py [--json]``; recount: ``--count [--jaxbench DIR]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "public_tpu_timings.json")
COMPONENTS = os.path.join(HERE, "data", "public_tpu_components.json.gz")
WITHIN = 2.0  # a ratio "within 2x" of the published one
for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)


# --------------------------------------------------------------------------- counting (--count)


def count_point(point: dict, chip_name: str, jaxbench: str | None) -> dict:
    """What the model counts for one point: a kernel's calls (or why it cannot), XLA's compiled module. Each
    program is exported for the chip's TPU and its module counted (runner/program/program_price.py: the one model)."""
    from pallasite.analysis.types import chip_target, to_json
    from pallasite.runner.program import cost_model
    from pallasite.runner.chip_probe import spec_from_jax
    from pallasite.runner.program.program_price import price_program
    from pallasite.runner.target_chip import target_chip
    from pallasite.runner.tune_ops import _topology_device

    import public_programs

    chip = spec_from_jax(chip_target(chip_name))
    with target_chip(chip_name):
        fn, args = public_programs.program(point, jaxbench)
    parts: list = []
    est = price_program(fn, args, chip, parts=parts)
    if point["side"] == "xla":
        device = _topology_device(chip_name)
        if device is None:
            raise SystemExit(f"libtpu is needed to compile {point['id']} for {chip_name}")
        _, text = cost_model.xla_reference_cost(fn, args, device, chip_name, want_text=True)
        if not text:
            raise SystemExit(f"{point['id']}: no compiled module for {chip_name}")
        return {"hlo": text, "floor_s": cost_model.peak_compute_s(parts[0][1], chip) if parts else 0.0,
                "module_status": est.status}
    if est.status != "ok":
        return {"not_estimated": (est.error or "").removeprefix("no estimate: ")}
    counted, xla = parts[0]
    return {"calls": [to_json(c) for c, _ in counted], "dots": [[list(d) for d in b.dots] for _, b in counted],
            "xla": {"flops": xla.flops, "mxu_flops": xla.mxu_flops, "transcendentals": xla.transcendentals,
                    "dots": [list(d) for d in xla.dots], "hbm_bytes": xla.hbm_bytes, "launches": xla.launches}}


COUNTING_CODE = ("runner/program/body_counts.py", "runner/program/step_counts.py", "runner/program/loop_bounds.py", "runner/program/mosaic_counts.py",
                 "runner/program/kernel_cost.py", "runner/program/module_cost.py", "runner/program/module_xla.py", "runner/program/module_values.py",
                 "runner/program/program_price.py", "runner/program/roofline.py")


def counting_digest() -> str:
    """A digest of the code that counted the kernels' components (the XLA points are re-read live)."""
    import hashlib

    h = hashlib.sha256()
    for name in COUNTING_CODE:
        with open(os.path.join(HERE, "..", name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def count(jaxbench: str | None) -> None:
    from pallasite.analysis.types import chip_target, to_json
    from pallasite.runner.chip_probe import spec_from_jax

    data = json.load(open(DATA))
    out: dict = {"chips": {}, "points": {}, "counted_by": counting_digest()}
    for fam in data["families"]:
        out["chips"][fam["chip"]] = to_json(spec_from_jax(chip_target(fam["chip"])))
        for point in fam["points"]:
            print(f"counting {point['id']} ({fam['chip']})", file=sys.stderr, flush=True)
            out["points"][point["id"]] = count_point(point, fam["chip"], jaxbench)
    with gzip.open(COMPONENTS, "wt") as f:
        json.dump(out, f)
    print(f"wrote {COMPONENTS}", file=sys.stderr)


# --------------------------------------------------------------------------- pricing


def load() -> tuple[list[dict], dict]:
    """The published points (each with its family's fields) and their counted components."""
    data = json.load(open(DATA))
    with gzip.open(COMPONENTS, "rt") as f:
        comp = json.load(f)
    points = []
    for fam in data["families"]:
        for p in fam["points"]:
            points.append({**p, "family": fam["family"], "chip": fam["chip"], "timing": fam["timing"],
                           "fit": fam["fit"], "components": comp["points"].get(p["id"])})
    return points, comp


def priced(point: dict, chips: dict, factors) -> dict | None:
    """The model's figure for one point under ``factors`` (None: not estimated)."""
    from pallasite.analysis.types import CallCost, ChipSpec, from_json
    from pallasite.runner.program import cost_model
    from pallasite.runner.program.body_counts import BodyCounts
    from pallasite.runner.program.compiled_ops import hlo_ops
    from pallasite.runner.program.module_xla import XlaOps

    comp, chip = point["components"], from_json(ChipSpec, chips[point["chip"]])
    if comp is None or "not_estimated" in comp:
        return None
    if "hlo" in comp:
        if "ops" not in comp:
            comp["ops"] = hlo_ops(comp["hlo"])[0]
        return cost_model.price_hlo(comp["ops"], chip, factors, floor_s=comp["floor_s"])
    calls = [(from_json(CallCost, c), BodyCounts(dots=[tuple(d) for d in dots]))
             for c, dots in zip(comp["calls"], comp["dots"])]
    x = comp["xla"]
    xla = XlaOps(flops=x["flops"], mxu_flops=x["mxu_flops"], transcendentals=x["transcendentals"],
                 dots=[tuple(d) for d in x["dots"]], hbm_bytes=x["hbm_bytes"], launches=x["launches"])
    return cost_model.roofline(calls, chip, xla, factors)


def predicted(point: dict, chips: dict, factors, dispatch: float) -> float | None:
    """The published figure as the model predicts it: its estimate plus the dispatch a timeit includes."""
    got = priced(point, chips, factors)
    if got is None:
        return None
    return got["seconds"] + (dispatch if point["timing"] == "timeit" else 0.0)


def dispatch_of(points: list[dict], chips: dict) -> float:
    """What a ``timeit`` figure adds to the device time: the SparseCore guide's trivial TensorCore op (x + 1 on
    2 MiB) under %timeit, less the model's figure for it. Measured, not fitted: every fit and every
    leave-family-out prediction uses this one value, so no family's dispatch is learnt from its own times."""
    from pallasite.runner.program.cost_model import FACTORS

    p = next(q for q in points if q["id"] == "sc-guide-tc-add-one")
    return p["published_s"] - priced(p, chips, FACTORS)["seconds"]


def fit(points: list[dict], chips: dict, dispatch: float) -> object:
    """The factors minimising the squared log error over ``points`` (``dispatch`` added to timeit figures)."""
    import dataclasses

    import numpy as np
    from scipy.optimize import least_squares

    from pallasite.runner.program.cost_model import FACTORS

    use = [p for p in points if priced(p, chips, FACTORS) is not None]

    def factors_of(x):
        return dataclasses.replace(FACTORS, mxu_efficiency=x[0], xla_cycles_scale=x[1], step_overhead_s=x[2] * 1e-6)

    def residuals(x):
        f = factors_of(x)
        return np.array([math.log(predicted(p, chips, f, dispatch)) - math.log(p["published_s"]) for p in use])

    got = least_squares(residuals, [0.95, 0.93, 0.35], bounds=([0.3, 0.3, 0.05], [1.0, 3.0, 3.0]),
                        x_scale=[0.1, 0.1, 0.1])
    return factors_of(got.x)


# --------------------------------------------------------------------------- scoring


def ratios(points: list[dict], est: dict[str, float]) -> list[dict]:
    """Pallas/XLA ratios within a family, published vs estimated: each kernel against the XLA point of its
    own workload (the matmul guide: same size; the sparse guide: same cell; the README: its one GEMM)."""
    out = []
    for p in points:
        if p["side"] != "kernel" or p["id"] not in est:
            continue
        ref = next((q for q in points if q["side"] == "xla" and q["family"] == p["family"] and q["id"] in est
                    and (q.get("args", {}).get("size") == p.get("args", {}).get("size")
                         if p["family"] == "jax-matmul-guide" else q.get("cell") == p.get("cell")
                         if p["family"] == "jax-sparse-guide" else True)), None)
        if ref is None:
            continue
        pub, got = p["published_s"] / ref["published_s"], est[p["id"]] / est[ref["id"]]
        measure = _straddles(got)
        out.append({"kernel": p["id"], "reference": ref["id"], "published": pub, "estimated": got,
                    "same_side": (got > 1) == (pub > 1), "measure_on_device": measure,
                    "held": (got > 1) == (pub > 1) or measure, "within_2x": 1 / WITHIN <= got / pub <= WITHIN})
    return out


def _straddles(ratio: float) -> bool:
    """Whether an estimated kernel/XLA ratio's range (each side over runner/program/cost_model.ERROR_BANDS, as every
    estimate's interval) holds 1.0: the estimate then says "measure this on a device" instead of a side."""
    from pallasite.runner.program.cost_model import ERROR_BANDS

    (k_lo, k_hi), (x_lo, x_hi) = ERROR_BANDS["kernel"], ERROR_BANDS["xla"]
    return ratio * x_lo / k_hi <= 1.0 <= ratio * x_hi / k_lo


def top1(points: list[dict], est: dict[str, float]) -> list[dict]:
    """Tune's choice (the lowest estimate) among a workload's published configurations: its published time
    over the published best (1.0: tune picked the fastest). Groups: the matmul guide's (variant, size)."""
    groups: dict[tuple, list[dict]] = {}
    for p in points:
        if p["family"] == "jax-matmul-guide" and p["side"] == "kernel" and p["id"] in est:
            groups.setdefault((p["args"]["variant"], p["args"]["size"]), []).append(p)
    out = []
    for key, members in sorted(groups.items()):
        chosen = min(members, key=lambda q: est[q["id"]])
        best = min(q["published_s"] for q in members)
        out.append({"group": f"{key[0]} {key[1]}^3", "configs": len(members), "slowdown": chosen["published_s"] / best})
    return out


def summary(points: list[dict], est: dict[str, float]) -> dict:
    errs = {p["id"]: est[p["id"]] / p["published_s"] for p in points if p["id"] in est}
    absd = sorted(abs(math.log(e)) for e in errs.values())
    r = ratios(points, est)
    return {"errors": errs, "median_abs_error": math.exp(absd[len(absd) // 2]) - 1 if absd else None,
            "max_abs_error": math.exp(absd[-1]) - 1 if absd else None, "ratios": r,
            "same_side": sum(x["same_side"] for x in r), "held": sum(x["held"] for x in r),
            "within_2x": sum(x["within_2x"] for x in r)}


def leave_family_out(points: list[dict], chips: dict, dispatch: float) -> dict[str, dict]:
    """Each fit family predicted by factors fitted on the other fit families."""
    fams = sorted({p["family"] for p in points if p["fit"]})
    out = {}
    for held in fams:
        factors = fit([p for p in points if p["fit"] and p["family"] != held], chips, dispatch)
        mine = [p for p in points if p["family"] == held]
        est = {p["id"]: predicted(p, chips, factors, dispatch) for p in mine}
        out[held] = {"factors": factors, "dispatch": dispatch, "estimates": {k: v for k, v in est.items() if v},
                     **summary(mine, {k: v for k, v in est.items() if v})}
    return out


def bands(points: list[dict], lfo: dict[str, dict]) -> dict[str, tuple[float, float]]:
    """estimate / published over the leave-family-out points, per side: [min, max]."""
    out: dict[str, list[float]] = {"kernel": [], "xla": []}
    for fam in lfo.values():
        for pid, e in fam["errors"].items():
            side = next(p["side"] for p in points if p["id"] == pid)
            out[side].append(e)
    return {k: (min(v), max(v)) for k, v in out.items() if v}


def derive_gather(points: list[dict], chips: dict, factors, dispatch: float) -> float | None:
    """gather_cycles_per_row from the SparseCore guide's TensorCore gather: the published time less the
    dispatch and the module's other ops, over its rows, in TensorCore cycles."""
    import dataclasses

    from pallasite.analysis.types import ChipSpec, from_json
    from pallasite.runner.program.cost_model import tensorcore_clock_hz

    p = next((q for q in points if q["id"] == "sc-guide-tc-gather"), None)
    if p is None or p["components"] is None:
        return None
    no_rows = dataclasses.replace(factors, gather_cycles_per_row=0.0)
    got = priced(p, chips, no_rows)
    ops = p["components"]["ops"]
    rows = sum(o.slices * o.times for o in ops if o.klass == "gather")
    gather_s = sum(max(o.hbm_bytes * o.times / from_json(ChipSpec, chips[p["chip"]]).hbm_bytes_per_s, 0.0)
                   for o in ops if o.klass == "gather")
    left = p["published_s"] - dispatch - (got["seconds"] - gather_s)
    return left / rows * tensorcore_clock_hz(from_json(ChipSpec, chips[p["chip"]])) if rows and left > 0 else None


# --------------------------------------------------------------------------- the run


def checks(fitted, bands_now: dict, gather: float | None) -> list[str]:
    """Where runner/program/cost_model's typed-in factors and bands no longer match this run (empty: they match)."""
    from pallasite.runner.program.cost_model import ERROR_BANDS, FACTORS

    out = []
    for name in ("mxu_efficiency", "xla_cycles_scale", "step_overhead_s"):
        typed, got = getattr(FACTORS, name), getattr(fitted, name)
        if abs(got / typed - 1) > 0.02:
            out.append(f"FACTORS.{name} is {typed:.4g}, the fit says {got:.4g}")
    if gather is not None and abs(gather / max(FACTORS.gather_cycles_per_row, 1e-9) - 1) > 0.02:
        out.append(f"FACTORS.gather_cycles_per_row is {FACTORS.gather_cycles_per_row:.4g}, derived {gather:.4g}")
    for side, (lo, hi) in bands_now.items():
        t_lo, t_hi = ERROR_BANDS[side]
        if lo < t_lo * 0.98 or hi > t_hi * 1.02 or lo > t_lo * 1.1 or hi < t_hi / 1.1:
            out.append(f"ERROR_BANDS[{side!r}] is ({t_lo:.3f}, {t_hi:.3f}), leave-family-out says ({lo:.3f}, {hi:.3f})")
    return out


def report(points: list[dict], chips: dict) -> dict:
    from pallasite.runner.program.cost_model import FACTORS

    dispatch = dispatch_of(points, chips)
    fitted = fit([p for p in points if p["fit"]], chips, dispatch)
    est = {p["id"]: predicted(p, chips, fitted, dispatch) for p in points}
    ins = summary([p for p in points if p["fit"]], {k: v for k, v in est.items() if v})
    lfo = leave_family_out(points, chips, dispatch)
    band = bands(points, lfo)
    lfo_est = {k: v for fam in lfo.values() for k, v in fam["estimates"].items()}
    gather = derive_gather(points, chips, fitted, dispatch)
    typed = {p["id"]: predicted(p, chips, FACTORS, dispatch) for p in points if not p["fit"]}
    other = [{"id": p["id"], "published_s": p["published_s"], "estimate_s": typed.get(p["id"]),
              "why": (p["components"] or {}).get("not_estimated")} for p in points if not p["fit"]]
    moved = checks(fitted, band, gather) + [
        f"the held-out {x['kernel']}/{x['reference']} ratio is {x['estimated']:.3f} where {x['published']:.3f} was "
        "published: on the other side of 1.0 and no 'measure this on a device' range"
        for fam in lfo.values() for x in fam["ratios"] if not x["held"]]
    return {"fitted": fitted, "dispatch_s": dispatch, "in_sample": ins, "leave_family_out": lfo, "bands": band,
            "top1_in_sample": top1(points, {k: v for k, v in est.items() if v}), "top1_lfo": top1(points, lfo_est),
            "gather_cycles_per_row": gather, "not_fitted": other, "moved": moved}


def _print(points: list[dict], r: dict) -> None:
    f = r["fitted"]
    print(f"FITTED on {sum(p['fit'] for p in points)} points of {len({p['family'] for p in points if p['fit']})} "
          f"families: mxu_efficiency {f.mxu_efficiency:.3f}, xla_cycles_scale {f.xla_cycles_scale:.3f}, "
          f"step_overhead {f.step_overhead_s * 1e6:.3f} us; timeit dispatch {r['dispatch_s'] * 1e6:.1f} us (measured: "
          "the SparseCore guide's x + 1 under %timeit, less its estimate)")
    lfo_err = {k: v for fam in r["leave_family_out"].values() for k, v in fam["errors"].items()}
    print(f"{'point':42} {'family':18} {'chip':4} {'published':>10} {'in-sample':>9} {'LFO':>8}")
    for p in points:
        e_in = r["in_sample"]["errors"].get(p["id"])
        e_out = lfo_err.get(p["id"])
        print(f"{p['id']:42} {p['family'][:18]:18} {p['chip']:4} {p['published_s'] * 1e3:8.3f}ms "
              f"{(f'{e_in - 1:+8.1%}' if e_in else '       -'):>9} {(f'{e_out - 1:+7.1%}' if e_out else '      -'):>8}")
    s = r["in_sample"]
    print(f"IN-SAMPLE (fitted on these points): median |error| {s['median_abs_error']:.1%}, max {s['max_abs_error']:.1%}; "
          f"Pallas/XLA ratios on the published side of 1.0: {s['same_side']}/{len(s['ratios'])}, within 2x: "
          f"{s['within_2x']}/{len(s['ratios'])}")
    for fam, x in r["leave_family_out"].items():
        print(f"LEAVE-FAMILY-OUT {fam}: factors from the other families (mxu {x['factors'].mxu_efficiency:.3f}, "
              f"xla scale {x['factors'].xla_cycles_scale:.3f}, step {x['factors'].step_overhead_s * 1e6:.3f} us"
              f"): median |error| {x['median_abs_error']:.1%}, max "
              f"{x['max_abs_error']:.1%}; ratios on the published side {x['same_side']}/{len(x['ratios'])} (or "
              f"'measure this on a device': {x['held']}/{len(x['ratios'])}), within 2x "
              f"{x['within_2x']}/{len(x['ratios'])}")
    for name in ("top1_in_sample", "top1_lfo"):
        rows = r[name]
        right = sum(t["slowdown"] == 1.0 for t in rows)
        print(f"TUNE'S CHOICE ({'in-sample' if name.endswith('sample') else 'leave-family-out'}): the published "
              f"fastest in {right}/{len(rows)} groups of {rows[0]['configs'] if rows else 0} configurations; "
              f"top-1 slowdown max {max((t['slowdown'] for t in rows), default=1.0):.3f}x (no family publishes >= 3 "
              "configurations of one workload: top-5 is the whole group)")
    b = r["bands"]
    print("ERROR BANDS (estimate / published, leave-family-out): "
          + "; ".join(f"{k} [{lo:.3f}, {hi:.3f}]" for k, (lo, hi) in b.items()))
    g = r["gather_cycles_per_row"]
    print(f"DERIVED gather_cycles_per_row: {g:.2f} (from the SparseCore guide's TensorCore gather)" if g else
          "DERIVED gather_cycles_per_row: none (no gather point counted)")
    for o in r["not_fitted"]:
        what = (f"estimated {o['estimate_s'] * 1e3:.3f} ms ({o['estimate_s'] / o['published_s'] - 1:+.1%}, typed factors)"
                if o["estimate_s"] else f"not estimated: {o['why']}")
        print(f"NOT FITTED {o['id']}: published {o['published_s'] * 1e3:.3f} ms; {what}")
    print("runner/program/cost_model FACTORS and ERROR_BANDS " + ("match this run" if not r["moved"] else
                                                          "DO NOT MATCH: " + "; ".join(r["moved"])))


def main() -> int:
    import dataclasses

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--count", action="store_true", help="recount every point's components (libtpu needed)")
    ap.add_argument("--jaxbench", default=os.environ.get("JAXBENCH_DIR"),
                    help="JAXBench benchmark folder (the README's 8p_GEMM kernel, for --count)")
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    if args.count:
        count(args.jaxbench)
    points, comp = load()
    missing = [p["id"] for p in points if p["components"] is None]
    if missing:
        print(f"no counted components for {missing}: run with --count", file=sys.stderr)
        return 1
    if comp.get("counted_by") != counting_digest():
        print("note: the kernels' components were counted by other code than this checkout's "
              f"({', '.join(COUNTING_CODE)}): rerun with --count to count them again", file=sys.stderr)
    r = report(points, comp["chips"])
    if args.json:
        def plain(v):
            return dataclasses.asdict(v) if dataclasses.is_dataclass(v) else str(v)
        print(json.dumps(r, default=plain, indent=1))
    else:
        _print(points, r)
    return 1 if r["moved"] else 0


if __name__ == "__main__":
    sys.exit(main())
