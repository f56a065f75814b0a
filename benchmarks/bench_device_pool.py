"""The device pool's scheduling: `pallasite eval` over 40 tasks with 1, 2, 4 and 8 device workers.

Issue 35's target: N workers reach at least 0.8·N of one worker's throughput. What runs:

- a local Ray cluster (``num_cpus=2``, a custom ``TPU=8`` resource), and the eval's device pool
  built by ``Engine.device`` from ``--backend ray --ray-resources TPU=1,CPU=0.2 --devices N``: N real
  Ray actors, placed by resources, each taking one ``TPU``;
- each actor is engine/workers/standin.py's device stand-in, which answers a job after a fixed time
  (``--seconds``, default 1.0) with made-up medians, so the figures measure the pool and Ray's
  scheduling, not this machine's cores (no JAX runs; the compile phase is tier 0 with
  tests/fake_backend.py's workers, milliseconds);
- 40 JAXBench-style tasks (copies of tests/data/eval/add_tuned, each candidate distinct), method
  ``files``, through ``agents/eval_job.run_eval``, the code `pallasite eval` runs.

Printed per N: the wall time of the eval after the pool started (its actors' start-up is printed
apart), jobs per second, the ratio to one worker's throughput and the 0.8·N target, and whether the
table (every task's status, correctness and speedup) equals the 1-worker table.

    python benchmarks/bench_device_pool.py [--tasks 40] [--seconds 1.0] [--workers 1 2 4 8] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/fake_backend.py: the compile phase's in-process workers


def make_tasks(folder: Path, count: int) -> None:
    source = ROOT / "tests" / "data" / "eval" / "add_tuned"
    for i in range(count):
        task = folder / f"add_{i:02d}"
        shutil.copytree(source, task)
        optimized = task / "optimized.py"
        optimized.write_text(optimized.read_text() + f"\n# task {i}: a distinct candidate\n")


async def one_run(tasks: list, workers: int, seconds: float) -> dict:
    from fake_backend import fake_backend

    from pallasite.agents.eval_job import EvalJob, run_eval
    from pallasite.engine.workers.device import candidate_config
    from pallasite.engine.engine import Engine
    from pallasite.engine.workers.remote import BackendSettings
    from pallasite.engine.workers.standin import StandInActor
    from pallasite.server.commands.cmd_eval import candidate_for

    settings = BackendSettings(kind="ray", ray_resources={"TPU": 1, "CPU": 0.2}, devices=workers)
    job = EvalJob(tasks, {"files": candidate_for("files")}, chip="v5e", tiers=(0,), device=settings, jobs=1,
                  allow_unconfined=True)
    engine = Engine(checks=1, use_store=False, backend_factory=lambda config, checks: fake_backend())
    engine.device_actor = StandInActor
    try:
        t0 = time.monotonic()
        pool = engine.device(settings, candidate_config(job.memory_mb, job.timeout_s, allow_unconfined=True))
        await pool.start()  # the same pool run_eval takes (same settings, same worker config)
        startup = time.monotonic() - t0
        t1 = time.monotonic()
        (summary,) = await run_eval(job, engine)
        wall = time.monotonic() - t1
        states = pool.states()
    finally:
        await engine.close()
    table = [(t["task"], t["status"], t["correct"], t["speedup"]) for t in summary["per_task"]]
    jobs = sum(s.jobs for s in states)
    return {"workers": workers, "startup_s": startup, "wall_s": wall, "jobs": jobs, "jobs_per_s": jobs / wall,
            "per_worker_jobs": [s.jobs for s in states], "table": table, "seconds_per_job": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=1.0, help="the stand-in's time per job")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        print("bench_device_pool: needs ray (pip install 'ray>=2.40', pallasite's ray extra)", file=sys.stderr)
        return 2
    from pallasite.engine.eval_tasks import discover

    os.environ["PALLASITE_STANDIN_SECONDS"] = str(args.seconds)  # the actors inherit it from the cluster
    home = tempfile.mkdtemp(prefix="plsbench")
    ray.init(num_cpus=2, resources={"TPU": max(args.workers)}, include_dashboard=False, log_to_driver=False,
             _temp_dir=os.path.join(home, "r"))
    try:
        make_tasks(Path(home) / "tasks", args.tasks)
        tasks = discover(str(Path(home) / "tasks"))
        runs = [asyncio.run(one_run(tasks, n, args.seconds)) for n in args.workers]
    finally:
        ray.shutdown()
        shutil.rmtree(home, ignore_errors=True)
    base = next((r for r in runs if r["workers"] == 1), runs[0])
    print(f"eval over {args.tasks} tasks, device stand-in {args.seconds:g} s per job, local Ray cluster (2 CPUs); "
          f"wall time after the pool started")
    print(f"{'workers':>7} {'start s':>8} {'wall s':>7} {'jobs/s':>7} {'x one':>6} {'target':>7}  same table  jobs per worker")
    for r in runs:
        ratio = r["jobs_per_s"] / base["jobs_per_s"]
        target = 0.8 * r["workers"] / base["workers"]
        r["ratio"], r["target"], r["same_table"] = ratio, target, r["table"] == base["table"]
        print(f"{r['workers']:>7} {r['startup_s']:>8.2f} {r['wall_s']:>7.2f} {r['jobs_per_s']:>7.2f} {ratio:>6.2f} "
              f"{'>=' if ratio >= target else '< '}{target:>5.1f}  {str(r['same_table']):>10}  {r['per_worker_jobs']}")
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "table"} for r in runs], indent=1))
    return 0 if all(r["ratio"] >= r["target"] and r["same_table"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
