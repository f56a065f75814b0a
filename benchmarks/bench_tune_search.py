"""Device evaluations the autotune search needs, against exhaustive search, on seeded landscapes.

The landscapes (benchmarks/tune_landscapes.py, committed before the search was written) stand in
for a device: ``measure`` is the landscape's hidden "true" time with 1.5% timing noise, the
estimate is a roofline with wrong constants and noise. For each landscape this prints

- ``n``: candidates (what exhaustive search evaluates);
- ``to_opt``: evaluations until the search's best-so-far is within 2% of the exhaustive optimum
  (by true time), as a share of ``n``; "never" if it was not reached;
- ``spent``: evaluations the search spent before stopping on its own (budget or convergence);
- ``final``: its chosen configuration's true time over the optimum's (1.000 = the optimum);
- Spearman rank correlation between the estimate and the true time over the landscape.

Goal (issue 17): median ``to_opt`` <= 25% of exhaustive, and the final choice within 2%.
The search's round rule was chosen by its score on the default landscapes (seeds from 1000), so
``--first-seed 50000`` re-validates it on landscapes generated with seeds never used while
designing it (issue 25); the README reports both.
No device, no JAX: the figures are about the search strategy, not about any chip.

    python benchmarks/bench_tune_search.py [--count 24] [--first-seed 1000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tune_landscapes import Landscape, landscapes  # noqa: E402

from pallasite.engine.tuning.tune_search import search  # noqa: E402


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        for rank, i in enumerate(order):
            out[i] = float(rank)
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else 0.0


def run_one(land: Landscape) -> dict:
    opt_config, opt = land.optimum()
    estimate = {c: land.estimate(c) for c in land.configs}
    calls = {"n": 0}

    async def evaluate(configs):
        calls["n"] += len(configs)
        return [land.measure(c) for c in configs]

    result = asyncio.run(search(land.configs, estimate, evaluate))
    reached = None
    best = None
    for i, c in enumerate(result.order, 1):
        t = land.true_time(c)
        if t is not None and (best is None or t < best):
            best = t
        if reached is None and best is not None and best <= opt * 1.02:
            reached = i
    # baselines: evaluating in the estimate's order (no surrogate), and in a random order (expected
    # evaluations to hit a config within 2%: (n + 1) / (k + 1) for k such configs among n)
    ranked = sorted(land.configs, key=lambda c: (land.estimate(c), c))
    by_estimate = next(i for i, c in enumerate(ranked, 1)
                       if land.true_time(c) is not None and land.true_time(c) <= opt * 1.02)
    good = sum(1 for c in land.configs if land.true_time(c) is not None and land.true_time(c) <= opt * 1.02)
    random_expected = (len(land.configs) + 1) / (good + 1)
    chosen = result.best
    final = land.true_time(chosen[0]) / opt if chosen else float("inf")
    ok = [c for c in land.configs if land.true_time(c) is not None]
    return {"seed": land.seed, "family": land.family, "n": len(land.configs), "to_opt": reached,
            "to_opt_share": reached / len(land.configs) if reached else None, "spent": len(result.order),
            "spent_share": len(result.order) / len(land.configs), "final": final, "strategy": result.strategy,
            "stopped": result.stopped, "by_estimate_share": by_estimate / len(land.configs),
            "random_share": random_expected / len(land.configs),
            "spearman": spearman([land.estimate(c) for c in ok], [land.true_time(c) for c in ok])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=24)
    parser.add_argument("--first-seed", type=int, default=1000,
                        help="1000: the 24 landscapes the search was designed on; 50000: fresh ones, never used while "
                             "designing it (issue 25's held-out check)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [run_one(land) for land in landscapes(args.count, args.first_seed)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'seed':>5} {'family':9} {'n':>4} {'to_opt':>7} {'share':>6} {'spent':>6} {'share':>6} {'final':>6} {'rho':>5}")
    for r in rows:
        to_opt = str(r["to_opt"]) if r["to_opt"] else "never"
        share = f"{r['to_opt_share']:.0%}" if r["to_opt_share"] else "-"
        print(f"{r['seed']:>5} {r['family']:9} {r['n']:>4} {to_opt:>7} {share:>6} {r['spent']:>6} "
              f"{r['spent_share']:>6.0%} {r['final']:>6.3f} {r['spearman']:>5.2f}")
    shares = [r["to_opt_share"] if r["to_opt_share"] else 1.0 for r in rows]
    within = sum(1 for r in rows if r["final"] <= 1.02)
    print(f"\n{len(rows)} landscapes: evaluations to reach the optimum (within 2%): median {statistics.median(shares):.0%}, "
          f"mean {statistics.fmean(shares):.0%}, worst {max(shares):.0%} of exhaustive "
          f"({sum(1 for r in rows if not r['to_opt'])} never reached)")
    print(f"evaluations spent before stopping: median {statistics.median(r['spent_share'] for r in rows):.0%} of exhaustive; "
          f"final choice within 2% of the optimum on {within}/{len(rows)}; "
          f"estimate-vs-truth Spearman median {statistics.median(r['spearman'] for r in rows):.2f}")
    print(f"baselines to reach the optimum: the estimate's order alone median "
          f"{statistics.median(r['by_estimate_share'] for r in rows):.0%} (mean "
          f"{statistics.fmean(r['by_estimate_share'] for r in rows):.0%}, worst {max(r['by_estimate_share'] for r in rows):.0%}); "
          f"random order expected median {statistics.median(r['random_share'] for r in rows):.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
