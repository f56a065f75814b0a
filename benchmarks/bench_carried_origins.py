"""Tier-1 check time with and without carried literals (runner/origin_values.py).

The check op runs the user's file with its int and float literals rewritten into values that carry
where they were written. This script measures what that costs: ``handle_check`` (worker side,
in-process, tiers (1,) by default) on each file, alternating runs with the rewrite on and off
(off: ``user_module`` forced to ``carry_origins=False``, and nothing read back), after one warm-up
run of each. Prints the median and min wall-clock seconds of each and their ratio; asserts nothing.

    nice python benchmarks/bench_carried_origins.py FILE [FILE ...] [--runs 5] [--tiers 1]

Figures are wall clock on this host's CPU (time.perf_counter); say the machine's load beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
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
    from pallasite.runner import checks, loader
    from pallasite.wire.messages import CheckParams

    tiers = tuple(int(t) for t in args.tiers.split(","))
    original = loader.user_module

    @contextlib.contextmanager
    def switched(carry: bool):
        loader.user_module = original if carry else functools.partial(_plain, original)
        try:
            yield
        finally:
            loader.user_module = original

    for path in args.files:
        path = os.path.abspath(path)
        times: dict[bool, list[float]] = {True: [], False: []}
        states = {}
        for run in range(args.runs + 1):
            for carry in ((True, False) if run % 2 else (False, True)):
                with switched(carry):
                    started = time.perf_counter()
                    result = checks.handle_check(CheckParams(source=sources_for(path), target="v6e", tiers=tiers))
                    spent = time.perf_counter() - started
                states[carry] = [e.states() for e in result.entries]
                if run:
                    times[carry].append(spent)
        on, off = statistics.median(times[True]), statistics.median(times[False])
        print(f"{os.path.basename(path)}: tiers {tiers} carried {on:.2f} s (min {min(times[True]):.2f}), "
              f"plain {off:.2f} s (min {min(times[False]):.2f}), ratio {on / off:.3f} over {args.runs} runs; "
              f"verdicts {'equal' if states[True] == states[False] else 'DIFFER'}: {states[True]}")
        print(f"load: {os.getloadavg()}")


def _plain(original, *args, **kwargs):
    kwargs["carry_origins"] = False
    return original(*args, **kwargs)


if __name__ == "__main__":
    main()
