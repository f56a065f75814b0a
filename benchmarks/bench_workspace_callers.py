"""Kernels of a public repository checked through their callers, with no configuration (issue 50).

Checks (``pallasite check`` as the CLI does it: tiers 0-2, ``--target``, no results store) every Python
file under ``KERNELS`` (a folder of ``WORKSPACE``) and prints, per kernel (a ``pallas_call`` site's
verdict row), its tier 1 and tier 2 states and where its shapes came from, then the figures: kernels
found (each TPU ``pallas_call`` written in the files; a GPU kernel's row, and a row for an entry of a file
that writes none, megablox's ``ops.py``, are shown and not counted; test files are callers, not checked), reaching tier 1, reaching tier 2 (the tier ran on it: "ok" or
"error"), and every error-severity
finding. The files are a library's shipped kernels (jax's ``ops/tpu``): an error there is a false error
unless it names a real bug, so each is printed for reading.

The workspace used for the figures in docs/checker.md (outside the repository, not in the test run):

- ``/work/ext/jaxops/ops/tpu``: a copy of ``jax/experimental/pallas/ops/tpu`` from the installed jax
  0.10.2; ``/work/ext/jaxops/tests/pallas``: ``tests/pallas/*tpu*.py`` of jax-ml/jax at tag jax-v0.10.2;
- the worker's interpreter (``--interpreter``) is a venv over this project's environment plus what
  those tests import and the jax wheel does not ship: ``absl-py``, ``hypothesis``, and jax's
  ``jax/_src/pallas/pallas_test_util.py`` and ``jax/_src/hypothesis_test_util.py`` from the same tag,
  served by a path hook (a jax source checkout has them).

    python benchmarks/bench_workspace_callers.py /work/ext/jaxops --kernels ops/tpu \\
        --interpreter /work/ext/benchenv/bin/python [--no-callers] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace", help="the repository checkout (its root: where callers are searched)")
    parser.add_argument("--kernels", default=".", help="the folder of kernel files, relative to the workspace")
    parser.add_argument("--interpreter", default=sys.executable, help="the worker's Python")
    parser.add_argument("--target", default="v6e")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-callers", action="store_true", help="do not search the workspace (the 'before' run)")
    args = parser.parse_args(argv)

    from pallasite.engine.checker import CheckOptions
    from pallasite.engine.engine import check_paths_sync

    root = os.path.abspath(args.workspace)
    folder = Path(root) / args.kernels
    paths = sorted(str(p) for p in folder.rglob("*.py") if "__pycache__" not in p.parts
                   and not (p.name.endswith("_test.py") or p.name.startswith("test_")))  # tests are callers
    options = CheckOptions(target=args.target, tiers=(0, 1, 2), interpreter=args.interpreter,
                           callers=not args.no_callers, workspace=root)
    started = time.monotonic()
    reports = check_paths_sync(paths, options, jobs=args.jobs, use_store=False)
    wall = time.monotonic() - started
    kernels = tier1 = tier2 = 0
    errors = []
    for report in reports:
        shown = os.path.relpath(report.path, root)
        where = next((n for n in report.notes if n.startswith("shapes from")), "")
        sites = _sites(report.path)  # a report's first rows are its pallas_call sites; later ones, entries
        for i, kernel in enumerate(report.kernels):
            states = dict(kernel.tiers)
            site = i < len(sites) and sites[i] != "gpu"  # a GPU kernel's tiers 1-2 are not for a TPU
            kernels += site
            tier1 += site and states.get(1) in ("ok", "error")
            tier2 += site and states.get(2) in ("ok", "error")
            print(f"{shown:58} {kernel.name[:34]:34} tier1 {states.get(1, '-')[:36]:36} tier2 {states.get(2, '-')[:36]}"
                  + ("" if site else "  (not counted: a GPU kernel, or an entry of a file that writes no pallas_call)"))
        if where and report.kernels:
            print(f"    {where}")
        errors += [(shown, f) for f in report.findings if f.severity == "error"]
    print(f"\n{kernels} kernels (pallas_call sites) in {len(paths)} files; tier 1 ran on {tier1}, tier 2 on {tier2} "
          f"({'callers off' if args.no_callers else 'callers searched'}; target {args.target}; "
          f"{wall:.0f} s wall on this host, {args.jobs} workers)")
    print(f"{len(errors)} error(s):")
    for shown, f in errors:
        print(f"  {shown}:{f.span.line + 1}: {f.code}: {f.message[:300]}")
    return 0


def _sites(path: str) -> list[str]:
    """The backend of each pallas_call site of the file ("tpu", "gpu", ...), in order."""
    from pallasite.analysis.tier0 import analyze

    with open(path, encoding="utf-8", errors="replace") as f:
        return [site.backend for site in analyze(f.read(), path).sites]


if __name__ == "__main__":
    raise SystemExit(main())
