"""Generalisation: bugs planted automatically into kernels this checker was not developed on.
How many does ``pallasite check --format json`` catch, and how many does it place at the true line
±1? Prints figures; asserts nothing.

    nice python benchmarks/bench_generalisation.py --jaxbench PATH/TO/JAXBench [--half dev|held-out|third|both]
        [--tokamax PATH/TO/tokamax] [--work DIR] [--jobs 2] [--time-limit 300] [--rows]

The operators, what makes a mutant a real bug, its true lines and how it is scored are written
down in ``benchmarks/mutations.py``; the kernel files and the split in
``benchmarks/generalisation_corpus.py``. Steps: (1) the oracle (``benchmarks/mutation_oracle.py``,
its own process, jax only) traces every base file's task and records its pallas_calls; (2) every
operator proposes candidates on the base's syntax tree; (3) the oracle traces each candidate and
keeps the real bugs; at most ``CAP`` per operator and file are kept, chosen by a hash; (4) the CLI
checks the bases and the mutants (``--tiers 0-3``, ``--no-cache`` so no stored verdict of an older
checker is reused), in batches whose JSON reports are kept in ``--work`` (a rerun resumes, and
``--rescore`` rechecks); (5) the scores: per operator and per half. Per-mutant rows are printed for
the development half only, unless ``--rows`` asks for the held-out ones too. ``--half third`` scores
the third set (the rule in ``generalisation_corpus``'s doc: out of sample, scored apart from both halves;
``both`` means the two halves, not the third set).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generalisation_corpus as corpus  # noqa: E402
import mutations  # noqa: E402

NOT_CHECKED = {"PLS205", "PLS305", "PLS306", "PLS307"}  # and every PLS9xx (PLS305: the interpreter ran other semantics)
SCOPED_VMEM = {"v6e": 32 << 20, "v5p": 16 << 20}  # the chips' default scoped VMEM (`pallasite chips`, libtpu 0.0.42.1 probe)
TARGETS = {"parallel-reduction": "v5p"}  # every other operator: v6e


def oracle(items: list[dict], python: str) -> dict[str, dict]:
    """The oracle's answers for files (id, path, text), in one process."""
    proc = subprocess.run([python, str(HERE / "mutation_oracle.py")], input=json.dumps({"files": items}),
                          capture_output=True, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    if proc.returncode != 0:
        raise RuntimeError(f"the oracle failed:\n{proc.stderr[-3000:]}")
    return {a["id"]: a for a in json.loads(proc.stdout)["answers"]}


def ask(kernel: corpus.Kernel, found: list, scratch: Path, python: str) -> dict[int, dict]:
    """The oracle's answer for each candidate (by ``id``)."""
    if not found:
        return {}
    answers = oracle([{"id": f"{kernel.id}-{i}", "path": str(scratch / kernel.id / f"c{i}" / file_name(kernel)),
                       "text": c.text} for i, c in enumerate(found)], python)
    return {id(c): answers[f"{kernel.id}-{i}"] for i, c in enumerate(found)}


def file_name(kernel: corpus.Kernel) -> str:
    return Path(kernel.base.partition(":")[2]).name if not kernel.base.endswith("optimized.py") else \
        kernel.id.replace("-", "_") + ".py"


def generate(kernels: list[corpus.Kernel], texts: dict[str, str], work: Path, python: str) -> list[dict]:
    """The mutants of every kernel (cached in ``work/mutants.json`` by the bases' text)."""
    key = hashlib.sha256(json.dumps([texts[k.id] for k in kernels] + [Path(mutations.__file__).read_text()]).encode()).hexdigest()
    cache = work / "mutants.json"
    if cache.exists():
        saved = json.loads(cache.read_text())
        if saved.get("key") == key:
            return saved["mutants"]
    scratch = work / "oracle"
    bases = oracle([{"id": k.id, "path": str(scratch / k.id / "base" / file_name(k)), "text": texts[k.id], "lines": True}
                    for k in kernels], python)
    out: list[dict] = []
    for k in kernels:
        base = bases[k.id]
        if base.get("error"):
            print(f"{k.id}: the base does not trace ({base['error']['type']}: {base['error']['message'][:200]}); skipped")
            continue
        facts = mutations.facts_for(texts[k.id], base)
        found = mutations.candidates(texts[k.id], facts)
        started = time.perf_counter()
        limits = {"scoped": SCOPED_VMEM[TARGETS.get("vmem-overflow", "v6e")]}
        first = [c for c in found if c.operator != "vmem-overflow"]
        answers = ask(k, first, scratch, python)
        real = [c for c in first if mutations.valid(c, facts, base, answers[id(c)], limits)]
        # vmem-overflow only for the literals that reach a block dim (their "- 4" mutant changed one)
        sizes = {c.site for c in first if c.operator == "block-misaligned" and mutations.changes_blocks(base, answers[id(c)])}
        for step in mutations.VMEM_STEPS:
            tries = [c for c in found if c.operator == "vmem-overflow" and c.site in sizes and c.factor == 2 ** step]
            answers = ask(k, tries, scratch, python)
            for c in tries:
                if mutations.valid(c, facts, base, answers[id(c)], limits):
                    real.append(c)
                    sizes.discard(c.site)
        kept = mutations.choose(k.id, real)
        print(f"{k.id}: {len(found)} candidates, {len(real)} real bugs, {len(kept)} kept "
              f"(oracle {time.perf_counter() - started:.0f} s)")
        for c in sorted(kept, key=lambda c: (mutations.OPERATORS.index(c.operator), c.site)):
            out.append({"kernel": k.id, "family": k.family, "held_out": k.held_out, "set": k.set_name, "operator": c.operator,
                        "what": c.what, "true_lines": list(c.true_lines), "text": c.text,
                        "target": TARGETS.get(c.operator, "v6e")})
    cache.write_text(json.dumps({"key": key, "mutants": out}))
    return out


def check(paths: list[Path], target: str, args: argparse.Namespace) -> dict[str, dict]:
    """``pallasite check --format json`` on paths (resumable: one report file per batch)."""
    reports: dict[str, dict] = {}
    batch = max(1, args.jobs) * 2
    for i in range(0, len(paths), batch):
        chunk = paths[i:i + batch]
        tag = hashlib.sha256(json.dumps([str(p) for p in chunk] + [target, args.tiers]).encode()).hexdigest()[:16]
        saved = args.work / "reports" / f"{tag}.json"
        if saved.exists() and not args.rescore:
            data = json.loads(saved.read_text())
        else:
            cmd = [args.pallasite, "check", *map(str, chunk), "--format", "json", "--tiers", args.tiers,
                   "--target", target, "--no-cache", "--jobs", str(args.jobs), "--time-limit", str(args.time_limit)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            try:
                data = json.loads(proc.stdout)
            except json.JSONDecodeError:
                print(f"check failed on {[p.name for p in chunk]}: {proc.stderr[-2000:]}")
                continue
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps(data))
        for f in data["files"]:
            reports[str(Path(f["path"]).resolve())] = f
        print(f"  checked {min(i + batch, len(paths))}/{len(paths)} for {target}", flush=True)
    return reports


def caught_by(mutant_report: dict, base_report: dict) -> list[dict]:
    """The findings of the mutant's report that catch a bug (see ``benchmarks/mutations.py``)."""
    before = {(f["code"], f["line"], f["message"]) for f in base_report.get("findings", ())}
    return [f for f in mutant_report.get("findings", ())
            if (f["code"], f["line"], f["message"]) not in before and (
                f["severity"] == "error" or (f["severity"] == "warning" and f["code"] not in NOT_CHECKED
                                             and not f["code"].startswith("PLS9")))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jaxbench", type=Path, help="a checkout's JAXBench folder (holding benchmark/)")
    parser.add_argument("--tokamax", type=Path, help="a checkout of openxla/tokamax")
    parser.add_argument("--half", choices=("dev", "held-out", "third", "fourth", "both"), default="dev")
    parser.add_argument("--work", type=Path, default=Path("/tmp/pallasite-generalisation"))
    parser.add_argument("--tiers", default="0-3")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--only", nargs="*", help="kernel ids")
    parser.add_argument("--operators", nargs="*", help="only these operators")
    parser.add_argument("--rows", action="store_true", help="print per-mutant rows for the held-out half and the third set too")
    parser.add_argument("--rescore", action="store_true", help="check again instead of reading saved reports")
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--pallasite", default=str(Path(sys.executable).parent / "pallasite"))
    args = parser.parse_args(argv)
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)

    kernels = [k for k in corpus.KERNELS if (not args.only or k.id in args.only) and (
        k.set_name == args.half or (args.half == "both" and not k.third and not k.fourth))]
    texts = {k.id: t for k in kernels if (t := corpus.base_text(k, args.jaxbench, args.tokamax)) is not None}
    kernels = [k for k in kernels if k.id in texts]
    mutants = generate(kernels, texts, args.work / args.half, args.python)
    if args.operators:
        mutants = [m for m in mutants if m["operator"] in args.operators]
    print(f"{len(mutants)} mutants of {len(kernels)} kernel files ({args.half})")
    if args.generate_only:
        return 0

    files = args.work / args.half / "files"
    by_target: dict[str, list[Path]] = {}
    bases: dict[tuple[str, str], Path] = {}
    for m in mutants:
        kernel = next(k for k in kernels if k.id == m["kernel"])
        key = (m["kernel"], m["target"])
        if key not in bases:
            bases[key] = files / m["target"] / m["kernel"] / "base" / file_name(kernel)
            bases[key].parent.mkdir(parents=True, exist_ok=True)
            bases[key].write_text(texts[m["kernel"]])
            by_target.setdefault(m["target"], []).append(bases[key])
        digest = hashlib.sha256(m["text"].encode()).hexdigest()[:10]
        m["path"] = files / m["target"] / m["kernel"] / digest / file_name(kernel)
        m["path"].parent.mkdir(parents=True, exist_ok=True)
        m["path"].write_text(m["text"])
        by_target[m["target"]].append(m["path"])
    started = time.perf_counter()
    reports: dict[str, dict] = {}
    for target, paths in by_target.items():
        reports.update(check(paths, target, args))
    seconds = time.perf_counter() - started

    import pallasite

    print(f"\ngeneralisation: pallasite at {Path(pallasite.__file__).parent}, tiers {args.tiers}, {args.half}, "
          f"{len(mutants)} mutants, checking took {seconds:.0f} s")
    rows = []
    for m in mutants:
        base = reports.get(str(bases[(m["kernel"], m["target"])].resolve()))
        mine = reports.get(str(m["path"].resolve()))
        if base is None or mine is None:
            rows.append((m, None, None))
            continue
        new = caught_by(mine, base)
        hit = [f for f in new if any(abs(f["line"] - t) <= 1 for t in m["true_lines"])]
        rows.append((m, new, hit))
    for half in ("dev", "held-out", "third", "fourth"):
        mine = [r for r in rows if r[0].get("set", "held-out" if r[0]["held_out"] else "dev") == half]
        if not mine:
            continue
        name = {"dev": "development half", "held-out": "held-out half", "third": "third set",
                "fourth": "set of 2026-12-04"}[half]
        if half == "dev" or args.rows:
            print(f"\n{name}, per mutant:")
            print(f"{'kernel':32} {'operator':24} {'true':>10}  {'caught':6} {'located':7} first new finding")
            for m, new, hit in mine:
                first = (hit or new or [None])[0] if new is not None else None
                shown = "(no report)" if new is None else f"{first['code']} ({first['line']}) {first['message'][:70]}" if first else "-"
                print(f"{m['kernel'][:32]:32} {m['operator']:24} {','.join(map(str, m['true_lines'])):>10}  "
                      f"{'yes' if new else 'no':6} {'yes' if hit else 'no':7} {shown}")
        print(f"\n{name}, per operator:")
        for op in mutations.OPERATORS:
            of_op = [r for r in mine if r[0]["operator"] == op]
            if of_op:
                print(f"  {op:24} {len(of_op):3} mutants  caught {sum(bool(r[1]) for r in of_op):3}  "
                      f"located {sum(bool(r[2]) for r in of_op):3}")
        n = len(mine)
        caught = sum(bool(r[1]) for r in mine)
        located = sum(bool(r[2]) for r in mine)
        print(f"  {name}: caught {caught}/{n} = {caught / n:.0%}; at the true line ±1: {located}/{n} = {located / n:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
