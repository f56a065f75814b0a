"""False findings of tier 0's PLS017 (an output written on no path) and PLS018 (a scratch read on
the first grid step before any write), analysis/rules/writes.py, on kernels written by others.

Scanned: the installed jax's own TPU kernels (``jax/experimental/pallas/ops/tpu``), and with
``--jax DIR`` (a jax-ml/jax checkout) that checkout's TPU kernels, its Pallas tests
(``tests/pallas/*.py``, hundreds of small kernels) and its Pallas guides (``docs/pallas/**/*.md``,
each one's code cells pasted into one script as ``bench_guides.py`` does). Printed per group: the
files, those with a pallas_call, the call sites, the sites whose kernel the rules read in full (refs
placed, body visible: the others they stay silent on), the output and data-scratch refs checked,
and every finding, for a person to judge (a test of uninitialised memory is meant to read one).

    python benchmarks/bench_writes_rules.py [--jax /path/to/jax] [--folder DIR ...] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pallasite.analysis import sites as sites_mod
from pallasite.analysis.rules import writes
from pallasite.analysis.rules.context import RuleContext, python_tree
from pallasite.analysis.source import Source
from pallasite.analysis.tier0 import analyze

CODES = ("PLS017", "PLS018")


def installed_jax_ops() -> list[Path]:
    spec = importlib.util.find_spec("jax")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations))) / "experimental" / "pallas" / "ops" / "tpu"
    return sorted(root.rglob("*.py"))


def guide_scripts(checkout: Path, folder: Path) -> list[Path]:
    from bench_guides import guide_script

    out = []
    for md in sorted((checkout / "docs" / "pallas").rglob("*.md")):
        script = folder / f"{md.parent.name}_{md.stem}.py"
        script.write_text(guide_script(md.read_text(), md.stem))
        out.append(script)
    return out


def scan(paths: list[Path]) -> dict:
    row = {"files": len(paths), "with_pallas_call": 0, "sites": 0, "read_in_full": 0, "outputs": 0,
           "data_scratch": 0, "findings": []}
    for path in paths:
        text = path.read_text(errors="replace")
        result = analyze(text, str(path))
        if not result.sites:
            continue
        row["with_pallas_call"] += 1
        row["sites"] += len(result.sites)
        row["findings"] += [f"{path}:{f.span.line + 1}: {f.code} {f.message}" for f in result.findings if f.code in CODES]
        source = Source(text)
        tree = python_tree(source)
        if tree is None:
            continue
        ctx = RuleContext(source=source, sites=sites_mod.find_sites(source), tasks=(), target="v6e")
        for site in ctx.sites:
            view = writes._kernel_view(ctx, tree, site)
            if view is not None:
                row["read_in_full"] += 1
                row["outputs"] += len(view.outputs or ())
                row["data_scratch"] += sum(info.kind in ("VMEM", "SMEM") for info, _ in view.scratch)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jax", type=Path, help="a jax-ml/jax checkout: its TPU kernels, Pallas tests and guides")
    parser.add_argument("--folder", type=Path, action="append", default=[],
                        help="another folder of kernel files (each *.py under it; repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    groups = {"installed jax ops/tpu": installed_jax_ops()}
    with tempfile.TemporaryDirectory() as tmp:
        if args.jax is not None:
            groups["checkout ops/tpu"] = sorted((args.jax / "jax" / "experimental" / "pallas" / "ops" / "tpu").rglob("*.py"))
            groups["checkout tests/pallas"] = sorted((args.jax / "tests" / "pallas").glob("*.py"))
            groups["checkout guides"] = guide_scripts(args.jax, Path(tmp))
        for folder in args.folder:
            groups[str(folder)] = sorted(folder.rglob("*.py"))
        start = time.perf_counter()
        rows = {name: scan(paths) for name, paths in groups.items()}
        seconds = time.perf_counter() - start
    if args.json:
        print(json.dumps({"groups": rows, "seconds": round(seconds, 2)}, indent=2))
        return 0
    for name, row in rows.items():
        print(f"{name}: {row['files']} files, {row['with_pallas_call']} with a pallas_call, {row['sites']} sites, "
              f"{row['read_in_full']} read in full ({row['outputs']} outputs, {row['data_scratch']} data scratch refs), "
              f"{len(row['findings'])} findings")
        for line in row["findings"]:
            print("   ", line)
    print(f"{seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
