"""What the candidate's own PID namespace costs the judge per candidate (issue 56; runner/isolation/nest.py).

The judge's budget per candidate is about 3 s. This times, in this process (a judge's), the two steps the
namespace touches, for the same candidate (tests/data/optimize/add.py), alternating nested and plain (the
process-group kill of before) so load drifts hit both alike:

- start: from ``channel.spawn`` to the candidate's "loaded" frame (its interpreter's start, the namespace made
  in it, its file loaded);
- end: ``channel.end`` (nested: until the launcher has reaped process 1 and the namespace is empty);
- set-up: ``nest.enter`` alone, timed inside a fresh interpreter from its import to its return in process 1
  (the namespaces, the uid map, the fork, the fresh ``/proc``, the capabilities dropped); on a loaded machine
  the two steps above differ by less than their noise, this one does not;

    .venv/bin/python benchmarks/bench_candidate_nest.py [--repeats 10]

Prints the median and p90 of each, and the difference. Wall clock on this machine's CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADD = ROOT / "tests" / "data" / "optimize" / "add.py"


def once(nested: bool) -> tuple[float, float]:
    from pallasite.runner.judging import channel
    from pallasite.runner.judging.judge import candidate_params

    channel._PLAIN_WHY = None if nested else "plain, for the comparison"
    started = time.perf_counter()
    sock, pid = channel.spawn("export", candidate_params({"path": str(ADD), "text": ADD.read_text()}))
    loaded, _ = channel.receive(sock)
    assert loaded.get("op") == "loaded", loaded
    spawned = time.perf_counter()
    isolation = channel.end(sock, pid)
    ended = time.perf_counter()
    assert isolation.nested == nested, isolation
    return spawned - started, ended - spawned


SETUP = """
import sys, time
started = time.perf_counter()
from pallasite.runner.isolation import nest
nest.enter(int(sys.argv[1]))
print(time.perf_counter() - started, flush=True)
"""


def setup_s() -> float:
    """``nest.enter``'s own cost, measured in process 1 of the namespace it made."""
    import subprocess

    read, write = os.pipe()
    try:
        done = subprocess.run([sys.executable, "-c", SETUP, str(write)], pass_fds=(write,), capture_output=True,
                              text=True, timeout=60)
    finally:
        os.close(write)
        os.close(read)
    return float(done.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from pallasite.runner.isolation import nest

    problem = nest.probe()
    if problem:
        print(f"no nested namespace here: {problem}")
        return 1
    once(True), once(False)  # the first of each: caches
    times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(args.repeats):
        for nested in (True, False):
            times[nested].append(once(nested))
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; "
          f"{args.repeats} candidates each, alternating")

    def fmt(xs: list[float]) -> str:
        return f"{statistics.median(xs) * 1000:7.1f} ms (p90 {sorted(xs)[int(0.9 * (len(xs) - 1))] * 1000:.1f})"

    setups = sorted(setup_s() for _ in range(args.repeats))
    print(f"{'step':44} {'nested':>24} {'plain (before)':>24} {'added (median)':>15}")
    for i, step in enumerate(("start: spawn to the candidate's 'loaded'", "end: channel.end returns")):
        a, b = [t[i] for t in times[True]], [t[i] for t in times[False]]
        print(f"{step:44} {fmt(a):>24} {fmt(b):>24} {(statistics.median(a) - statistics.median(b)) * 1000:+12.1f} ms")
    print(f"{'set-up: nest.enter alone (import to process 1)':44} {fmt(setups):>24} {'-':>24} "
          f"{statistics.median(setups) * 1000:+12.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
