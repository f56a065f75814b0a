"""How many kernels of jax's own Pallas TPU guides reach the TPU compiler with no configuration.

A new user pastes a guide's code into one file and runs ``pallasite check`` on it. This benchmark
does the same for every guide under ``docs/pallas/tpu/*.md`` of a jax-ml/jax checkout (fetched, or
``--guides DIR``): each guide's executed code cells (MyST ``{code-cell}``; for guides written
without them, its ``python`` blocks) are pasted in order into ``<guide>.py``, IPython magics
(``%timeit``, ``!pip``) commented out. Then ``pallasite check --format json`` (tiers 0-2, target
v5e, no settings, no flags) runs on the folder of scripts, and once more with ``--script``:

- after: the pallasite importable here;
- before (``--before-root DIR``): a checkout of pallasite before the change (``git worktree add
  /tmp/before <commit>``), run the same way.

Printed per guide: the kernels (the file's ``pallas_call`` sites, and entries the worker named) and
how many got a tier-2 verdict (the compiler ran on them: ``ok`` or ``error``), with the findings of
error and warning severity; then the totals. The figures come from this host's CPU with libtpu's
deviceless compiler (no TPU). Outside CI:

    python benchmarks/bench_guides.py --guides /path/to/jax/docs/pallas/tpu [--before-root /tmp/before]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)
_OPTION = re.compile(r"^:[\w-]+:.*$")


def guide_cells(markdown: str) -> list[tuple[int, str]]:
    """(1-based line of the fence, code) of each cell a reader would run, in order: the MyST
    ``{code-cell}`` cells, or, in a guide that has none, its ``python`` blocks."""
    cells: list[tuple[int, str, bool]] = []
    for m in _FENCE.finditer(markdown):
        info = m.group("info").strip()
        executed = info.startswith("{code-cell}")
        if not executed and info not in ("python", "py", "python3"):
            continue
        lines = m.group("body").splitlines()
        if executed and lines and lines[0].strip() == "---" and "---" in (row.strip() for row in lines[1:]):
            lines = lines[[row.strip() for row in lines].index("---", 1) + 1:]  # the cell's options as YAML
        while executed and lines and (_OPTION.match(lines[0]) or not lines[0].strip()):
            lines.pop(0)  # the cell's options (:id:, :outputId:, :tags:) and the blank line after them
        cells.append((markdown.count("\n", 0, m.start()) + 1, "\n".join(lines), executed))
    if any(executed for _, _, executed in cells):
        cells = [c for c in cells if c[2]]
    return [(line, code) for line, code, _ in cells]


def guide_script(markdown: str, name: str) -> str:
    """One script: the guide's cells pasted in order, magics commented out."""
    parts = [f'"""jax docs/pallas/tpu/{name}.md, its code cells pasted in order (benchmarks/bench_guides.py)."""\n']
    for line, code in guide_cells(markdown):
        body = "\n".join(f"# {row}" if row.lstrip().startswith(("%", "!")) else row for row in code.splitlines())
        parts.append(f"# --- cell at {name}.md line {line}\n{body}\n")
    return "\n".join(parts)


def write_scripts(guides: Path, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for md in sorted(guides.glob("*.md")):
        text = md.read_text(encoding="utf-8")
        if not guide_cells(text):
            continue
        path = out / f"{md.stem}.py"
        path.write_text(guide_script(text, md.stem), encoding="utf-8")
        written.append(path)
    return written


# --------------------------------------------------------------------------- one side


def run_check(folder: Path, root: str | None, script: bool, target: str | None,
              time_limit: float | None) -> tuple[dict, float]:
    """``pallasite check --format json`` on the folder, with ``root``'s pallasite (None: this one);
    no option but the format unless ``target`` / ``time_limit`` are given."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if root:
            (Path(tmp) / "pallasite").symlink_to(Path(root).resolve())  # the package-dir layout, by hand
            env["PYTHONPATH"] = tmp
        command = [sys.executable, "-m", "pallasite.server.cli", "check", str(folder), "--format", "json", "--no-cache"]
        command += ["--target", target] if target else []
        command += ["--time-limit", str(time_limit)] if time_limit else []
        if script:
            command.append("--script")
        started = time.perf_counter()
        proc = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp)
        seconds = time.perf_counter() - started
    try:
        return json.loads(proc.stdout), seconds
    except json.JSONDecodeError:
        raise SystemExit(f"check failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}") from None


def tally(doc: dict) -> dict[str, dict]:
    """Per script: kernels, kernels the TPU compiler gave a verdict (tier 2 "ok", or "error" with a
    tier-2 finding in the file: a worker stopped by a limit marks its tiers "error" too), findings."""
    out = {}
    for entry in doc["files"]:
        kernels = entry["kernels"]
        compiler_said = any(f["tier"] == 2 and f["code"].startswith("PLS2") for f in entry["findings"])
        reached = [k for k in kernels if k["tiers"].get("2") == "ok" or (k["tiers"].get("2") == "error" and compiler_said)]
        out[Path(entry["path"]).stem] = {
            "kernels": len(kernels),
            "tier2": len(reached),
            "tier2_ok": sum(k["tiers"].get("2") == "ok" for k in reached),
            "serious": [(f["severity"], f["code"], f["line"], f["message"][:140]) for f in entry["findings"]
                        if f["severity"] in ("error", "warning")],
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guides", required=True, help="jax's docs/pallas/tpu folder (a jax-ml/jax checkout)")
    parser.add_argument("--before-root", help="a checkout of pallasite before the change (its repository root)")
    parser.add_argument("--out", help="where to write the scripts (default: a temporary folder)")
    parser.add_argument("--target", help="default: none given (pallasite's default chip)")
    parser.add_argument("--time-limit", type=float, help="seconds per file; default: none given (pallasite's default)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out or tmp) / "guides"
        scripts = write_scripts(Path(args.guides), folder)
        print(f"{len(scripts)} guide scripts in {folder}: {', '.join(p.stem for p in scripts)}")
        sides = {"after": None, **({"before": args.before_root} if args.before_root else {})}
        results: dict[tuple[str, bool], dict] = {}
        for side, root in sides.items():
            for script in (False, True):
                doc, seconds = run_check(folder, root, script, args.target, args.time_limit)
                results[(side, script)] = tally(doc)
                print(f"{side}{' --script' if script else ''}: {seconds:.0f} s wall")
        for side in sides:
            for script in (False, True):
                per = results[(side, script)]
                flag = " --script" if script else " (no flags)"
                print(f"\n== {side}{flag}")
                for name, t in sorted(per.items()):
                    print(f"  {name:<12} kernels {t['kernels']:>3}  tier 2 reached {t['tier2']:>3} (ok {t['tier2_ok']})"
                          + "".join(f"\n      {sev} {code} line {line}: {msg}" for sev, code, line, msg in t["serious"]))
                total = sum(t["kernels"] for t in per.values())
                reached = sum(t["tier2"] for t in per.values())
                errors = sum(1 for t in per.values() for s in t["serious"] if s[0] == "error")
                print(f"  total: {reached}/{total} kernels reach tier 2; {errors} error finding(s)")
    print(f"(target {args.target or 'default'}, time limit {args.time_limit or 'default'}; CPU host, libtpu "
          f"deviceless compile; python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
