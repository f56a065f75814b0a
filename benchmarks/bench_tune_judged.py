"""What pricing tune's configurations in the judge costs, against tracing them in the worker (issue 49).

    python benchmarks/bench_tune_judged.py [--checkout /path/to/accelerator-agents] [--tasks 8p_GEMM,1p_Flash_Attention]
        [--configs N] [--chip v5e] [--repeat 2]

For each kernel (tests/data/tune's matmul and reduction, and, with ``--checkout``, JAXBench's hand-tuned
``optimized.py`` files of the public accelerator-agents repository: nothing of it is copied here), the
first ``--configs`` configurations of its tunables' space are priced twice, in this process, by the two
``estimate`` paths the worker has:

- **traced** (``runner/tune_ops.handle_estimate``, what tune sent before): the file imported here, each
  configuration traced and the cost model run here (in the process that ran the file's code);
- **judged** (``runner/judging/configs.judged_configs``, what tune sends now): a fresh process imports the
  file and exports one module per configuration; each is verified and priced in the judge's throwaway
  verifier (a process that never ran the file's code).

Both with the reference priced once (``reference=True``) and the chip's scoped-VMEM limit not probed.
Printed per kernel: the configurations, each path's wall time (the first request, cold; then ``--repeat``
warm requests, the fastest), the per-configuration cost from two batch sizes (1 configuration and all of
them: the slope, so the fixed cost of a request is apart), and whether the two paths gave the same seconds
for every configuration that both priced. Wall times on this machine (2 cores shared with other sessions:
the load average is printed beside each kernel); outside CI.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

HERE = os.path.dirname(os.path.abspath(__file__))
TUNE = os.path.join(HERE, "..", "tests", "data", "tune")


def configs_of(path: str, n: int) -> tuple[list[dict[str, int]], dict[str, str]]:
    """The first ``n`` configurations of the file's tunables' space (product order), and their kinds."""
    from pallasite.analysis.source import Source
    from pallasite.analysis.tunables import find_tunables, kinds

    with open(path, encoding="utf-8") as f:
        tunables = find_tunables(Source(f.read()), path)
    names = [t.name for t in tunables]
    space = itertools.product(*(t.candidates or (t.default,) for t in tunables))
    return [dict(zip(names, values)) for values in itertools.islice(space, n)], kinds(tunables)


def timed(run, params) -> tuple[float, object]:
    started = time.perf_counter()
    result = run(params)
    return time.perf_counter() - started, result


def measure(path: str, n: int, chip: str, repeat: int) -> dict:
    from pallasite.engine.sources import sources_for
    from pallasite.runner.judging.configs import judged_configs
    from pallasite.runner.tune_ops import handle_estimate
    from pallasite.wire.messages import EstimateParams

    configs, kinds = configs_of(path, n)
    out: dict = {"kernel": os.path.relpath(path), "configs": len(configs), "load": os.getloadavg()[0]}
    for name, run in (("traced", handle_estimate), ("judged", judged_configs)):
        def params(batch, judged=(name == "judged")):
            return EstimateParams(source=sources_for(path), chip=chip, configs=tuple(batch), kinds=kinds,
                                  reference=True, probe=False, judged=judged)
        cold, _ = timed(run, params(configs))
        warm = [timed(run, params(configs)) for _ in range(repeat)]
        one = min(timed(run, params(configs[:1]))[0] for _ in range(repeat))
        best, result = min(warm, key=lambda w: w[0])
        out[name] = {"cold_s": cold, "warm_s": best, "one_s": one,
                     "per_config_s": (best - one) / max(1, len(configs) - 1), "result": result}
    pairs = list(zip(out["traced"]["result"].estimates, out["judged"]["result"].estimates))
    both = [(a, b) for a, b in pairs if a.status == "ok" and b.status == "ok"]
    out["priced_by_both"] = len(both)
    out["same_seconds"] = sum(a.seconds == b.seconds for a, b in both)
    out["only_traced"] = sum(a.status == "ok" and b.status != "ok" for a, b in pairs)
    out["why_not_judged"] = next((b.error for a, b in pairs if a.status == "ok" and b.status != "ok"), "")
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", help="a checkout of AI-Hypercomputer/accelerator-agents (JAXBench's tasks)")
    parser.add_argument("--tasks", default="8p_GEMM,1p_Flash_Attention")
    parser.add_argument("--configs", type=int, default=16)
    parser.add_argument("--chip", default="v5e")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    paths = [os.path.join(TUNE, "matmul.py"), os.path.join(TUNE, "reduction.py")]
    if args.checkout:
        bench = os.path.join(args.checkout, "JAXBench", "benchmark")
        paths += [os.path.join(bench, task, "optimized.py") for task in args.tasks.split(",")]
    rows = []
    for path in paths:
        m = measure(path, args.configs, args.chip, args.repeat)
        rows.append(m)
        t, j = m["traced"], m["judged"]
        print(f"{m['kernel']}: {m['configs']} configurations (load {m['load']:.1f}); traced cold {t['cold_s']:.2f} s, "
              f"warm {t['warm_s']:.2f} s, {t['per_config_s'] * 1e3:.0f} ms/config; judged cold {j['cold_s']:.2f} s, "
              f"warm {j['warm_s']:.2f} s, one configuration {j['one_s']:.2f} s, {j['per_config_s'] * 1e3:.0f} ms/config; "
              f"same seconds {m['same_seconds']}/{m['priced_by_both']}"
              + (f"; {m['only_traced']} priced only when traced ({m['why_not_judged'][:160]})" if m["only_traced"] else ""),
              flush=True)
    print("\n| kernel | configs | load | traced warm s | traced ms/config | judged warm s | judged 1-config s | "
          "judged ms/config | same seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m in rows:
        t, j = m["traced"], m["judged"]
        print(f"| {m['kernel']} | {m['configs']} | {m['load']:.1f} | {t['warm_s']:.2f} | {t['per_config_s'] * 1e3:.0f} | "
              f"{j['warm_s']:.2f} | {j['one_s']:.2f} | {j['per_config_s'] * 1e3:.0f} | "
              f"{m['same_seconds']}/{m['priced_by_both']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
