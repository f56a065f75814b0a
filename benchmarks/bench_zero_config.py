"""How many real third-party Pallas TPU files get the compiler tiers with no configuration.

Checks (tiers 0-2, one warm worker, target v5e) every Pallas TPU file found under the given
folders — by default jax's own ``jax/experimental/pallas/ops/tpu`` from the installed jax, plus
tokamax's kernels when unpacked (``pip download --no-deps tokamax -d /tmp/tok`` and unzip the
wheel; pass the folder with ``--tokamax``, which also goes on the worker's PYTHONPATH so the files
import), plus any ``--extra`` folders (e.g. a JAXBench checkout). Test files are skipped: they are
not kernels. Each file is checked twice:

- before: by the pallasite at ``--before-root`` (a checkout of the code before this change, e.g.
  ``git worktree add /tmp/before <commit>``), run in a subprocess (its worker too);
- after: by the pallasite importable here.

Prints per file which tiers ran and what was found, then the figures: files checked past tier 0
before and after, and every error-severity finding after (jax's and tokamax's files are hand-tuned
kernels shipped by their authors: an error there is a false error unless it names a real bug;
JAXBench's generated files are LLM output and may well be wrong). Wall clock on this host's CPU;
the compiler runs deviceless. Outside CI:

    python benchmarks/bench_zero_config.py --before-root /tmp/before [--tokamax DIR] [--extra DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def jax_ops_folder() -> str:
    import importlib.util

    spec = importlib.util.find_spec("jax")
    assert spec is not None and spec.origin is not None, "jax is not installed"
    return os.path.join(os.path.dirname(spec.origin), "experimental", "pallas", "ops", "tpu")


def tpu_kernel_files(folder: str) -> list[str]:
    """Files that use Pallas and have a pallas_call that is not a GPU kernel; tests left out."""
    from pallasite.analysis.tier0 import analyze

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


# --------------------------------------------------------------------------- one side (a subprocess)


async def collect(files: list[str], target: str, pythonpath: str | None, time_limit: float) -> dict:
    """Per file: the tiers that gave a verdict, the findings, the time (with whatever pallasite imports)."""
    from pallasite.engine.checker import Checker, CheckOptions
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig

    env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    client = WorkerClient(WorkerConfig(timeout_s=time_limit, memory_mb=6144, env=env))
    checker = Checker(CheckOptions(target=target, tiers=(0, 1, 2), time_limit_s=time_limit), client=client)
    out = {}
    try:
        for path in files:
            started = time.perf_counter()
            report = await checker.check(path)
            out[path] = {
                "seconds": round(time.perf_counter() - started, 2),
                "tiers": sorted({t for k in report.kernels for t, s in k.tiers if s in ("ok", "error")}),
                "past_tier0": any(dict(k.tiers).get(1) in ("ok", "error") for k in report.kernels),
                "findings": [[f.severity, f.code, f.span.line + 1, f.message[:200]] for f in report.findings
                             if f.severity in ("error", "warning")],
                "inferred": [n.split(":", 1)[0] for n in report.notes if "checked with shapes from line" in n],
            }
    finally:
        await checker.close()
        await client.close()
    return out


def run_side(files: list[str], args: argparse.Namespace, root: str | None) -> dict:
    """``collect`` in a subprocess whose ``pallasite`` is the checkout at ``root`` (None: this one)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root:
            (Path(tmp) / "pallasite").symlink_to(Path(root).resolve())  # the package-dir layout, by hand
            paths = [tmp]
        if args.tokamax:
            paths.append(args.tokamax)
        env["PYTHONPATH"] = os.pathsep.join(paths)
        listing = Path(tmp) / "files.json"
        listing.write_text(json.dumps(files))
        proc = subprocess.run([sys.executable, __file__, "--collect", str(listing), "--target", args.target,
                               "--time-limit", str(args.time_limit)], env=env, capture_output=True, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("COLLECTED ")]
        if not lines:
            raise SystemExit(f"the {'before' if root else 'after'} run failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
        return json.loads(lines[-1][len("COLLECTED "):])


# --------------------------------------------------------------------------- the report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-root", help="a checkout of pallasite before the change (its repository root)")
    parser.add_argument("--tokamax", help="folder holding the unpacked tokamax wheel (its tokamax/ package)")
    parser.add_argument("--extra", action="append", default=[], help="another folder of Pallas files (repeatable)")
    parser.add_argument("--target", default="v5e")
    parser.add_argument("--time-limit", type=float, default=240.0)
    parser.add_argument("--collect", help=argparse.SUPPRESS)  # internal: one side, in a subprocess
    args = parser.parse_args()
    if args.collect:
        files = json.loads(Path(args.collect).read_text())
        pythonpath = os.environ.get("PYTHONPATH")
        result = asyncio.run(collect(files, args.target, pythonpath, args.time_limit))
        print("COLLECTED " + json.dumps(result))
        return 0

    groups = {"jax ops/tpu": tpu_kernel_files(jax_ops_folder())}
    if args.tokamax:
        groups["tokamax"] = tpu_kernel_files(os.path.join(args.tokamax, "tokamax"))
    for extra in args.extra:
        groups[os.path.basename(os.path.normpath(extra))] = tpu_kernel_files(extra)
    files = [f for group in groups.values() for f in group]
    print(f"{len(files)} Pallas TPU files: " + ", ".join(f"{name} {len(g)}" for name, g in groups.items()))
    after = run_side(files, args, None)
    before = run_side(files, args, args.before_root) if args.before_root else None

    errors = []
    for name, group in groups.items():
        print(f"\n== {name}")
        for path in group:
            a = after[path]
            was = before[path]["past_tier0"] if before else None
            mark = ("tier 0 only" if not a["past_tier0"] else
                    "before+after" if was else "after only" if was is False else "past tier 0")
            print(f"  {os.path.relpath(path, os.path.dirname(os.path.dirname(path))):<58} {mark:<13} tiers "
                  f"{','.join(map(str, a['tiers'])) or '-':<6} {a['seconds']:6.1f} s"
                  + (f"  inferred: {', '.join(a['inferred'])}" if a["inferred"] else "")
                  + "".join(f"\n      {sev} {code} line {line}: {msg[:150]}" for sev, code, line, msg in a["findings"]))
            errors += [(path, f) for f in a["findings"] if f[0] == "error"]
    total = len(files)
    n_after = sum(after[p]["past_tier0"] for p in files)
    line = f"\nfiles checked past tier 0 with no configuration: after {n_after}/{total} ({100 * n_after / max(total, 1):.0f}%)"
    if before:
        n_before = sum(before[p]["past_tier0"] for p in files)
        line += f", before {n_before}/{total} ({100 * n_before / max(total, 1):.0f}%)"
    print(line)
    for name, group in groups.items():
        na = sum(after[p]["past_tier0"] for p in group)
        nb = sum(before[p]["past_tier0"] for p in group) if before else None
        print(f"  {name}: after {na}/{len(group)}" + (f", before {nb}/{len(group)}" if before else ""))
    for name, group in groups.items():
        mine = [(p, f) for p, f in errors if p in group]
        print(f"error findings after, {name}: {len(mine)} in {len({p for p, _ in mine})} file(s)"
              + "".join(f"\n  {p}:{f[2]}: {f[1]} {f[3][:160]}" for p, f in mine[:40]))
    print(f"(target {args.target}; python {sys.version.split()[0]}; CPU only, deviceless compile)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
