"""The public mutation corpus (issue 50): bugs planted by rule into four codebases this project does not own,
checked with ``pallasite check --format json``; prints caught and at-the-line per class, per codebase and
overall, and the false findings on the unmutated files. Asserts nothing; not part of the test run.

    .venv/bin/python benchmarks/bench_mutations_public.py --jaxbench /path/JAXBench --tokamax /path/tokamax \\
        --tpu-inference /path/tpu-inference --pythonpath /path/deps [--tiers 0-3] [--only SUBSTR,..] \\
        [--classes a,b] [--cap N] [--time-limit S] [--out results.json] [--list] [--no-reach] [--rescore] [--score-only]

Which files: ``benchmarks/mutation_corpus_public.py``; which sites, and how a check is scored:
``benchmarks/mutation_rules.py`` (both committed before any mutant was checked; the dated note
``benchmarks/mutation_rules_2026-12-06.md`` says at which commit). jax's ``ops/tpu`` comes from the installed
jax; the other three from the checkouts given (a codebase not given is left out). tokamax's imports need its
root and its dependencies (qwix, flax, jaxtyping, ...: ``--pythonpath``) on the worker's ``PYTHONPATH``.

Each file and each mutant is written to a folder of its own under ``--work`` (JAXBench: with its
``baseline.py`` beside it), its harness appended, and checked (``--tiers``, the class's chip, ``--no-store``,
``--time-limit`` per file in the worker). Every outcome is saved in ``--out`` as soon as it is known, so a
rerun resumes where the last stopped (``--rescore`` checks again). ``--only`` keeps the mutants whose id
(``codebase:path|class|line:col``) contains one of the strings; ``--cap`` keeps the first N sites per file and
class of the rules' order (at most the rules' ``CAP``). Before checking, jax's own trace of each harnessed
file (``benchmarks/mutation_oracle.py``, not pallasite) records which lines its task runs: a mutant is
*reached* when an edited line ran (``--no-reach`` skips this).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mutation_corpus_public as corpus
import mutation_rules as rules

LIMIT_CODES = {"PLS903", "PLS904", "PLS205", "PLS307"}  # the check ran into a time or memory limit


def _slug(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def corpus_v1_root() -> Path:
    import mutation_corpus_public

    return mutation_corpus_public.jax_ops_root()


def build(args: argparse.Namespace, saved: dict) -> tuple[list[corpus.File], list[dict]]:
    """The corpus's files and the mutants the rules make of them (``--cap`` applied)."""
    roots = {"jax-ops": corpus_v1_root()}
    for codebase in ("jaxbench", "tokamax", "tpu-inference", "sglang-jax", "pytorch-xla", "axlearn", "tops",
                     "recurrentgemma"):
        root = getattr(args, codebase.replace("-", "_"), None)
        if root is not None:
            roots[codebase] = root.resolve()
    files = corpus.files(roots)
    if hasattr(rules, "candidates"):  # corpus v3: sites on the lines the task runs (jax's trace), cap by rule
        return files, _mutants_on_reach(files, args, saved)
    mutants = []
    for f in files:
        text = f.path.read_text(encoding="utf-8")
        mutants += [_mutant(f, site, new) for site, new in rules.mutants(f.id, text, min(args.cap, rules.CAP))]
    return files, mutants


def _mutant(f: corpus.File, site, new: str) -> dict:
    return {"id": f"{f.id}|{site.cls}|{site.line}:{site.col}", "file": f.id, "codebase": f.codebase, "class": site.cls,
            "what": site.what, "true_lines": list(site.true_lines), "edited": sorted({e.line for e in site.edits}),
            "target": rules.TARGETS.get(site.cls, "v6e"), "text": new}


def _mutants_on_reach(files: list[corpus.File], args: argparse.Namespace, saved: dict) -> list[dict]:
    """Corpus v3 and v4 (``mutation_rules_vN``): jax's reach first, then the sites on it, the cap by rule."""
    reached = reach(files, args, saved)
    args.work.mkdir(parents=True, exist_ok=True)
    (args.out or args.work / "results.json").resolve().write_text(json.dumps(saved, indent=1))  # the reach, kept
    texts = {f.id: f.path.read_text(encoding="utf-8") for f in files}
    found = {f.id: _candidates(f, texts[f.id], set(reached.get(f.id) or ())) for f in files}
    cap = min(args.cap, rules.cap_for(list(found.values())))
    saved["cap"] = cap
    print(f"corpus {args.corpus}: cap {cap} per file and class (the rule's smallest giving {rules.AT_LEAST})")
    return [_mutant(f, site, new) for f in files for site, new in rules.mutants(f.id, texts[f.id], found[f.id], cap)]


def _candidates(f: corpus.File, text: str, reach: set[int]) -> dict:
    if rules.__name__.endswith("v3"):  # v3 excludes corpus v2's mutants of the codebases v2 had
        return rules.candidates(f.id, text, reach, f.codebase in ("jax-ops", "jaxbench", "tpu-inference", "sglang-jax"))
    return rules.candidates(f.id, text, reach)  # v4 knows which earlier corpora each codebase was in


def selected(mutants: list[dict], args: argparse.Namespace) -> list[dict]:
    """The mutants ``--only`` and ``--classes`` keep."""
    classes = args.classes.split(",") if args.classes else list(rules.CLASSES)
    only = [s for s in args.only.split(",") if s]
    return [m for m in mutants if m["class"] in classes and (not only or any(s in m["id"] for s in only))]


def place(f: corpus.File, text: str, folder: Path) -> Path:
    """The file's copy (with its harness) in a folder of its own; JAXBench's baseline beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    if f.baseline is not None and f.baseline.exists():
        shutil.copy(f.baseline, folder / "baseline.py")
    path = folder / f.path.name
    path.write_text(text + f.harness, encoding="utf-8")
    return path


def environment(args: argparse.Namespace) -> dict[str, str]:
    extra = [str(args.tokamax.resolve())] if args.tokamax else []
    if getattr(args, "axlearn", None):
        extra.append(str(args.axlearn.resolve()))  # the axlearn package its kernels import
    if getattr(args, "sglang_jax", None):
        extra.append(str((args.sglang_jax / "python").resolve()))  # the sgl_jax package its kernels import
    for codebase in ("tops", "recurrentgemma"):  # corpus v4: packages their kernels import from their roots
        if getattr(args, codebase, None):
            extra.append(str(getattr(args, codebase).resolve()))
    extra += [str(Path(p).resolve()) for p in args.pythonpath]
    env = dict(os.environ)
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(extra + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def reach(files: list[corpus.File], args: argparse.Namespace, saved: dict) -> dict[str, list[int] | None]:
    """Per harnessed file, the lines of the file its task ran while jax traced it (None: it did not trace)."""
    out = saved.setdefault("reach", {})
    todo = [f for f in files if f.harness or f.codebase == "jaxbench"]
    key = lambda f: f"{f.id}|{_slug(f.path.read_text() + f.harness)}"
    items = []
    for f in todo:
        if key(f) not in out:
            path = place(f, f.path.read_text(encoding="utf-8"), args.work / "oracle" / _slug(f.id))
            items.append({"id": key(f), "path": str(path), "text": path.read_text(), "lines": True})
    if items:
        proc = subprocess.run([args.python, str(HERE / "mutation_oracle.py")], capture_output=True, text=True, check=False,
                              input=json.dumps({"files": items, "chip": "v6e"}),
                              env={**environment(args), "JAX_PLATFORMS": "cpu"})
        try:
            answers = json.loads(proc.stdout)["answers"]
        except (json.JSONDecodeError, KeyError):
            print(f"the oracle failed; reach left unknown:\n{proc.stderr[-2000:]}")
            return {}
        for a in answers:
            out[a["id"]] = None if a.get("error") else a.get("executed", [])
            if a.get("error"):
                print(f"  oracle: {a['id'].split('|')[0]} does not trace: {a['error']['type']}: {a['error']['message'][:150]}")
    return {f.id: out.get(key(f)) for f in todo}


def check(paths: list[Path], target: str, args: argparse.Namespace) -> dict[str, dict] | None:
    """``pallasite check --format json`` on paths in one run: the report of each path (None: the run failed)."""
    cmd = [args.pallasite, "check", *map(str, paths), "--format", "json", "--tiers", args.tiers, "--target", target,
           "--no-store", "--jobs", str(args.jobs), "--time-limit", str(args.time_limit)]
    if getattr(args, "locate", False):
        cmd += ["--locate", "--locate-budget", str(args.locate_budget)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=environment(args), check=False,
                              timeout=len(paths) * (args.time_limit + 90) + 120)
        data = json.loads(proc.stdout)
    except subprocess.TimeoutExpired:
        print(f"  pallasite check ran past {len(paths) * (args.time_limit + 90) + 120:.0f} s on {len(paths)} files")
        return None
    except json.JSONDecodeError:
        print(f"  pallasite check failed: {proc.stderr[-1500:]}")
        return None
    return {str(Path(f["path"]).resolve()): f for f in data.get("files", ())}


def _summary(report: dict | None, seconds: float) -> dict:
    if report is None:
        return {"findings": [], "tiers_ran": [], "limit": True, "failed": True, "seconds": round(seconds, 1)}
    findings = [{k: f.get(k) for k in ("code", "severity", "line", "tier", "message")} for f in report.get("findings", ())]
    for f, full in zip(findings, report.get("findings", ())):
        f["message"] = (f["message"] or "")[:300]
        title = ((full.get("fix") or {}).get("title") or "")
        f["verified"] = title.startswith("verified:")  # the locate step's verified fix (issue 57)
    located = [n for n in report.get("notes", ()) if n.startswith("locate step for")]
    return {"findings": findings, "tiers_ran": report.get("tiers_ran", []), "seconds": round(seconds, 1),
            "limit": any(f["code"] in LIMIT_CODES for f in findings), "failed": False, "located": located}


def run_checks(files: list[corpus.File], mutants: list[dict], args: argparse.Namespace, saved: dict, out: Path) -> None:
    """Check every base and mutant not yet in ``saved`` (saved to ``out`` after each batch)."""
    bases, results = saved.setdefault("bases", {}), saved.setdefault("mutants", {})
    by_id = {f.id: f for f in files}
    groups: dict[tuple[str, str], list[dict]] = {}
    for m in mutants:
        groups.setdefault((m["file"], m["target"]), []).append(m)
    if args.bases_too:
        for f in files:
            groups.setdefault((f.id, "v6e"), [])
    done = 0
    for (file_id, target), group in groups.items():
        f = by_id[file_id]
        base_key = f"{file_id}|{target}|{args.tiers}"
        todo = [m for m in group if f"{m['id']}|{args.tiers}" not in results or args.rescore]
        need_base = base_key not in bases or (args.rescore and todo)
        if not todo and not need_base:
            continue
        text = f.path.read_text(encoding="utf-8")
        paths: list[tuple[str, Path]] = []
        if need_base:
            paths.append(("base", place(f, text, args.work / _slug(file_id) / f"base-{target}")))
        for m in todo:
            paths.append((m["id"], place(f, m["text"], args.work / _slug(file_id) / _slug(m["id"]))))
        for i in range(0, len(paths), args.batch):
            chunk = paths[i:i + args.batch]
            started = time.perf_counter()
            reports = check([p for _, p in chunk], target, args) or {}
            seconds = (time.perf_counter() - started) / len(chunk)
            for name, path in chunk:
                summary = _summary(reports.get(str(path.resolve())), seconds)
                if name == "base":
                    bases[base_key] = summary
                else:
                    results[f"{name}|{args.tiers}"] = summary
                    done += 1
            out.write_text(json.dumps(saved, indent=1))
            print(f"  {file_id} ({target}): {min(i + args.batch, len(paths))}/{len(paths)} checked "
                  f"({seconds:.0f} s each); {done} mutants this run", flush=True)


def outcome(m: dict, saved: dict, tiers: str, reached: dict) -> dict | None:
    """One mutant's row: caught, at the line, time-out, reached (None: not checked yet)."""
    mine = saved.get("mutants", {}).get(f"{m['id']}|{tiers}")
    base = saved.get("bases", {}).get(f"{m['file']}|{m['target']}|{tiers}")
    if mine is None or base is None:
        return None
    caught, at, new = rules.score(m["class"], tuple(m["true_lines"]), base["findings"], mine["findings"])
    lines = reached.get(m["file"])
    fixed = any(f.get("verified") and any(abs(f["line"] - t) <= 1 for t in m["true_lines"]) for f in new)
    tier3 = any(f.get("tier") == 3 and f.get("code") in ("PLS303", "PLS304") for f in new)
    return {"id": m["id"], "codebase": m["codebase"], "class": m["class"], "what": m["what"], "caught": caught,
            "at_line": at, "verified": fixed, "tier3_result": tier3, "located": mine.get("located", []),
            "seconds": mine.get("seconds"), "timed_out": (mine["limit"] or mine["failed"]) and not caught,
            "reached": None if lines is None else any(line in lines for line in m["edited"]),
            "tiers_ran": mine["tiers_ran"], "found": [(f["code"], f["line"], f["tier"]) for f in new],
            "true_lines": m["true_lines"]}


def table(rows: list[dict], title: str) -> list[str]:
    """The per-class table of rows (mutants, caught, at the line, time-outs, reached, caught of reached)."""
    head = (f"  {'class':22} {'mutants':>7} {'caught':>7} {'at line':>7} {'timeout':>7} {'reached':>7} "
            f"{'caught/reached':>14} {'tier-3 result':>13} {'verified fix':>12}")
    out = [f"\n{title}", head]
    for cls in [*rules.CLASSES, None]:
        mine = [r for r in rows if cls is None or r["class"] == cls]
        if not mine:
            continue
        reached = [r for r in mine if r["reached"]]
        out.append(f"  {cls or 'all':22} {len(mine):7} {sum(r['caught'] for r in mine):7} "
                   f"{sum(r['at_line'] for r in mine):7} {sum(r['timed_out'] for r in mine):7} {len(reached):7} "
                   f"{sum(r['caught'] for r in reached):14} {sum(r.get('tier3_result', False) for r in mine):13} "
                   f"{sum(r.get('verified', False) for r in mine):12}")
    return out


def locate_times(rows: list[dict]) -> list[str]:
    """The locate step's wall time per checked file (its notes: "locate step for E: ... in N s"), median and p95."""
    import re
    import statistics

    times = []
    for r in rows:
        per_file = sum(float(m.group(1)) for n in r.get("located") or () for m in [re.search(r" in ([\d.]+) s \(", n)] if m)
        if r.get("located"):
            times.append(per_file)
    if not times:
        return ["\nlocate step: never ran (no --locate, or no tier-3 failure)"]
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    return [f"\nlocate step, worker wall time per file that ran it ({len(times)} files): median "
            f"{statistics.median(times):.1f} s, p95 {p95:.1f} s, max {times[-1]:.1f} s"]


def false_findings(files: list[corpus.File], saved: dict, tiers: str) -> list[str]:
    """Errors (and bug-finding warnings) on the unmutated files, per codebase."""
    out = ["\nfalse findings on the unmutated files (errors; warnings of the runtime codes in brackets):"]
    for codebase in corpus.CODEBASES:
        mine = [f for f in files if f.codebase == codebase]
        if not mine:
            continue
        checked, errors, warnings, lines = 0, 0, 0, []
        for f in mine:
            for target in ("v6e", "v5p"):
                base = saved.get("bases", {}).get(f"{f.id}|{target}|{tiers}")
                if base is None:
                    continue
                checked += target == "v6e"
                for x in base["findings"]:
                    if x["code"].startswith("PLS9") or x["code"] in rules.NEVER_CATCH:
                        continue
                    if x["severity"] == "error" or (x["severity"] == "warning" and x["code"] in rules.RUNTIME_WARNINGS | {"PLS016", "PLS010"}):
                        errors += x["severity"] == "error"
                        warnings += x["severity"] == "warning"
                        lines.append(f"    {f.rel}:{x['line']} {target} {x['severity']} {x['code']} {x['message'][:120]}")
        out.append(f"  {codebase}: {checked} files checked, {errors} errors [{warnings} warnings]")
        out.extend(lines)
    return out


def main(argv: list[str]) -> int:
    global corpus, rules
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jaxbench", type=Path, help="a JAXBench checkout (the folder holding benchmark/)")
    parser.add_argument("--tokamax", type=Path, help="an openxla/tokamax checkout (173417d)")
    parser.add_argument("--tpu-inference", type=Path, help="a vllm-project/tpu-inference checkout")
    parser.add_argument("--sglang-jax", type=Path, help="an sgl-project/sglang-jax checkout (corpus v2)")
    parser.add_argument("--pytorch-xla", type=Path, help="a pytorch/xla checkout (corpus v3)")
    parser.add_argument("--axlearn", type=Path, help="an apple/axlearn checkout (corpus v3; its dependencies: "
                        "--pythonpath)")
    parser.add_argument("--tops", type=Path, help="an sdh1014/pallas-kernel checkout (corpus v4; package tops)")
    parser.add_argument("--recurrentgemma", type=Path, help="a google-deepmind/recurrentgemma checkout (corpus v4; "
                        "its dependencies: --pythonpath)")
    parser.add_argument("--corpus", choices=("v1", "v2", "v3", "v4"), default="v1",
                        help="v1: issue 50's corpus and rules; v2-v4: issue 57's (mutation_corpus_vN, mutation_rules_vN)")
    parser.add_argument("--pythonpath", action="append", default=[], help="a folder for the worker's PYTHONPATH")
    parser.add_argument("--tiers", default="0-3")
    parser.add_argument("--only", default="", help="keep mutants whose id contains one of these (comma-separated)")
    parser.add_argument("--classes", default="", help="comma-separated classes (default: all)")
    parser.add_argument("--cap", type=int, default=None, help="sites per file and class (at most the rules' CAP; "
                        "default: the rules' CAP)")
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds per file, in the worker")
    parser.add_argument("--batch", type=int, default=6, help="files per pallasite run")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("/tmp/pallasite-mutations-public"))
    parser.add_argument("--out", type=Path, default=None, help="the results JSON (default: WORK/results.json)")
    parser.add_argument("--list", action="store_true", help="list the mutants; check nothing")
    parser.add_argument("--score-only", action="store_true", help="score what the results hold (a run cut short); "
                        "check nothing")
    parser.add_argument("--no-reach", action="store_true")
    parser.add_argument("--rescore", action="store_true", help="check again what the results already hold")
    parser.add_argument("--bases-too", action="store_true", help="also check files that have no mutant selected")
    parser.add_argument("--locate", action="store_true", help="check with --locate (issue 57's locate step)")
    parser.add_argument("--locate-budget", type=float, default=60.0, help="--locate-budget seconds per file")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--pallasite", default=str(Path(sys.executable).parent / "pallasite"))
    args = parser.parse_args(argv)
    if args.corpus in ("v2", "v3", "v4"):  # issue 57's corpora: their files and rules (the v1 modules' interfaces)
        import importlib

        corpus = importlib.import_module(f"mutation_corpus_{args.corpus}")
        rules = importlib.import_module(f"mutation_rules_{args.corpus}")
    args.cap = rules.CAP if args.cap is None else args.cap  # the chosen corpus's rules, not v1's
    args.work = args.work.resolve()
    out = (args.out or args.work / "results.json").resolve()
    saved = json.loads(out.read_text()) if out.exists() else {}
    files, every = build(args, saved)
    mutants = selected(every, args)
    print(f"{len(mutants)} mutants of {len({m['file'] for m in mutants})} files "
          f"({len(files)} in the corpus); tiers {args.tiers}")
    if args.list:
        for m in mutants:
            print(f"  {m['id']:110} {m['what']}")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    saved["codebases"] = {c: corpus.revision(c, corpus_v1_root() if c == "jax-ops" else getattr(
        args, c.replace("-", "_")).resolve()) for c in corpus.CODEBASES if c == "jax-ops" or getattr(args, c.replace("-", "_"))}
    reached = {} if args.no_reach else reach(files, args, saved)
    started = time.perf_counter()
    if not args.score_only:
        run_checks(files, mutants, args, saved, out)
    rows = [r for m in mutants if (r := outcome(m, saved, args.tiers, reached)) is not None]
    lines = [f"checked in {time.perf_counter() - started:.0f} s this run; {len(rows)}/{len(mutants)} mutants scored"]
    for codebase in corpus.CODEBASES:
        mine = [r for r in rows if r["codebase"] == codebase]
        if mine:
            lines += table(mine, f"{codebase} ({saved['codebases'].get(codebase, '?')}), tiers {args.tiers}")
    lines += table(rows, f"all codebases, tiers {args.tiers}")
    lines += locate_times(rows)
    lines += false_findings([f for f in files if any(m["file"] == f.id for m in mutants) or args.bases_too], saved, args.tiers)
    print("\n".join(lines))
    saved["rows"] = [r for m in every if (r := outcome(m, saved, args.tiers, reached)) is not None]
    out.write_text(json.dumps(saved, indent=1))
    print(f"\nevery mutant's outcome: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
