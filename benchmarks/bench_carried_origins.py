"""Tier-1 check time with and without the locating run (runner/carried_pass.py).

The check op runs the user's file as written; when an entry fails, it loads the file once more
with its int and float literals carrying where they were written and traces the failed entry again
(the locating run). This script measures what that costs: ``handle_check`` (worker side,
in-process, tiers (1,) by default) on each file, alternating runs with the locating run on and off
(off: ``checks._Locating.locate`` does nothing), after one warm-up run of each. A file that passes
pays nothing either way. Prints the median and min wall-clock seconds of each and their ratio;
asserts nothing.

    nice python benchmarks/bench_carried_origins.py FILE [FILE ...] [--runs 5] [--tiers 1]

Figures are wall clock on this host's CPU (time.perf_counter); say the machine's load beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tiers", default="1")
    args = parser.parse_args()
    from pallasite.engine.sources import sources_for
    from pallasite.runner import checks
    from pallasite.wire.messages import CheckParams

    tiers = tuple(int(t) for t in args.tiers.split(","))
    original = checks._Locating.locate

    @contextlib.contextmanager
    def switched(carry: bool):
        checks._Locating.locate = original if carry else (lambda self, entry, task, args: None)
        try:
            yield
        finally:
            checks._Locating.locate = original

    for path in args.files:
        path = os.path.abspath(path)
        times: dict[bool, list[float]] = {True: [], False: []}
        states = {}
        for run in range(args.runs + 1):
            for carry in ((True, False) if run % 2 else (False, True)):
                with switched(carry):
                    started = time.perf_counter()
                    result = checks.handle_check(CheckParams(source=sources_for(path), chip="v6e", tiers=tiers))
                    spent = time.perf_counter() - started
                states[carry] = [e.states() for e in result.entries]
                if run:
                    times[carry].append(spent)
        on, off = statistics.median(times[True]), statistics.median(times[False])
        print(f"{os.path.basename(path)}: tiers {tiers} located {on:.2f} s (min {min(times[True]):.2f}), "
              f"plain {off:.2f} s (min {min(times[False]):.2f}), ratio {on / off:.3f} over {args.runs} runs; "
              f"verdicts {'equal' if states[True] == states[False] else 'DIFFER'}: {states[True]}")
        print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
