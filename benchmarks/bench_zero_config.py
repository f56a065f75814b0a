"""How many real third-party Pallas TPU files get the compiler tiers with no configuration.

Runs ``Checker.check`` (tiers 0-2, one warm worker) over every Pallas TPU file found under the
given folders — by default jax's own ``jax/experimental/pallas/ops/tpu`` from the installed jax,
plus tokamax's kernels when unpacked (``pip download --no-deps tokamax -d /tmp/tok`` and unzip the
wheel; pass the folder with ``--tokamax``, which also goes on the worker's PYTHONPATH so the files
import), plus any ``--extra`` folders (e.g. a JAXBench checkout). Test files are skipped: they are
not kernels. Each file is checked twice:

- before: the checker without zero-configuration shapes (tiers 1-2 only for files that state a task
  by the native, JAXBench or MaxKernel conventions);
- after: with shapes inferred from the file's own calls (``analysis/inferred_inputs.py``) and
  KernelBench-style files (``class Model`` + ``get_inputs()``) read as tasks.

Prints per file which tiers ran and what was found, then the figures: files checked past tier 0
before and after, and every error-severity finding (these files are hand-tuned kernels shipped by
their authors: an error on one of them is a false error unless it names a real bug). Wall clock on
this host's CPU; the compiler runs deviceless. Outside CI:

    python benchmarks/bench_zero_config.py [--tokamax /tmp/e13/tokamax] [--extra DIR] [--target v5e]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from pallasite.analysis.tier0 import analyze
from pallasite.engine import zero_config
from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.client import WorkerClient, WorkerConfig


def jax_ops_folder() -> str:
    import importlib.util

    spec = importlib.util.find_spec("jax")
    assert spec is not None and spec.origin is not None, "jax is not installed"
    return os.path.join(os.path.dirname(spec.origin), "experimental", "pallas", "ops", "tpu")


def tpu_kernel_files(folder: str) -> list[str]:
    """Files that use Pallas and have a pallas_call that is not a GPU kernel; tests left out."""
    found = []
    for path in sorted(Path(folder).rglob("*.py")):
        if path.name.endswith("_test.py") or path.name.startswith("test_") or "__pycache__" in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "pallas" not in text:
            continue
        analysis = analyze(text, str(path))
        if analysis.sites and not all(s.backend == "gpu" for s in analysis.sites):
            found.append(str(path))
    return found


def ran_past_tier0(report) -> bool:
    return any(dict(k.tiers).get(1) in ("ok", "error") for k in report.kernels)


async def run(files: list[str], target: str, infer: bool, pythonpath: str | None, time_limit: float) -> dict:
    from pallasite.analysis import tasks as static_tasks

    saved, saved_model = zero_config.inference_for, static_tasks._has_model_forward
    if not infer:  # the checker before: no inferred shapes, KernelBench files not read as tasks
        zero_config.inference_for = lambda text, path: zero_config.Inference((), ())
        static_tasks._has_model_forward = lambda source: False
    env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    client = WorkerClient(WorkerConfig(timeout_s=time_limit, memory_mb=6144, env=env))
    checker = Checker(CheckOptions(target=target, tiers=(0, 1, 2), time_limit_s=time_limit), client=client)
    out = {}
    try:
        for path in files:
            started = time.perf_counter()
            report = await checker.check(path)
            out[path] = (report, time.perf_counter() - started)
    finally:
        await checker.close()
        await client.close()
        zero_config.inference_for, static_tasks._has_model_forward = saved, saved_model
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokamax", help="folder holding the unpacked tokamax wheel (its tokamax/ package)")
    parser.add_argument("--extra", action="append", default=[], help="another folder of Pallas files (repeatable)")
    parser.add_argument("--target", default="v5e")
    parser.add_argument("--time-limit", type=float, default=240.0)
    args = parser.parse_args()

    groups = {"jax ops/tpu": tpu_kernel_files(jax_ops_folder())}
    if args.tokamax:
        groups["tokamax"] = tpu_kernel_files(os.path.join(args.tokamax, "tokamax"))
    for extra in args.extra:
        groups[os.path.basename(os.path.normpath(extra))] = tpu_kernel_files(extra)
    files = [f for group in groups.values() for f in group]
    print(f"{len(files)} Pallas TPU files: " + ", ".join(f"{name} {len(g)}" for name, g in groups.items()))
    before = asyncio.run(run(files, args.target, False, args.tokamax, args.time_limit))
    after = asyncio.run(run(files, args.target, True, args.tokamax, args.time_limit))

    errors = []
    for name, group in groups.items():
        print(f"\n== {name}")
        for path in group:
            (b, _), (a, seconds) = before[path], after[path]
            tiers = sorted({t for k in a.kernels for t, s in k.tiers if s in ("ok", "error")})
            found = [f for f in a.findings if f.severity in ("error", "warning")]
            inferred = [n.split(":", 1)[0] for n in a.notes if "checked with shapes from line" in n]
            mark = ("before+after" if ran_past_tier0(b) else "after only") if ran_past_tier0(a) else "tier 0 only"
            print(f"  {os.path.relpath(path, os.path.dirname(os.path.dirname(path))):<58} {mark:<13} tiers "
                  f"{','.join(map(str, tiers)) or '-':<6} {seconds:6.1f} s"
                  + (f"  inferred: {', '.join(inferred)}" if inferred else "")
                  + "".join(f"\n      {f.severity} {f.code} line {f.span.line + 1}: {f.message[:160]}" for f in found))
            errors += [(path, f) for f in a.findings if f.severity == "error"]
    total = len(files)
    n_before = sum(ran_past_tier0(before[p][0]) for p in files)
    n_after = sum(ran_past_tier0(after[p][0]) for p in files)
    print(f"\nfiles checked past tier 0 with no configuration: before {n_before}/{total} "
          f"({100 * n_before / max(total, 1):.0f}%), after {n_after}/{total} ({100 * n_after / max(total, 1):.0f}%)")
    for name, group in groups.items():
        nb = sum(ran_past_tier0(before[p][0]) for p in group)
        na = sum(ran_past_tier0(after[p][0]) for p in group)
        print(f"  {name}: before {nb}/{len(group)}, after {na}/{len(group)}")
    print(f"error findings on these hand-tuned files: {len(errors)}")
    for path, f in errors:
        print(f"  {path}:{f.span.line + 1}: {f.code} {f.message[:200]}")
    print(f"(target {args.target}; python {sys.version.split()[0]}; CPU only, deviceless compile)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
