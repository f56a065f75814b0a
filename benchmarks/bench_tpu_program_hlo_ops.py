"""Which StableHLO ops the TPU programs of real Pallas kernels use, whether the judge's executor of TPU
programs (runner/tpu_program/hlo_exec.py) covers them all, and how long it takes to prepare and run them.

For each kernel the entry is exported for ``platforms=("tpu",)`` by ``runner/program/program_export.export_program``
at the task's own inputs (JAXBench: ``create_inputs`` at ``CONFIG``, as benchmarks/bench_module_cost.py
reads them; jax's ``ops/tpu`` kernels at example shapes), then ``tpu_program`` plans and compiles its TPU
program. Printed per kernel: the number of ops, the kernels (``tpu_custom_call``s), any op the executor does
not cover (with where), the time to plan (refine + translate) and to compile (jax trace + XLA CPU
compile), and the time of one run on this host's CPU with a stand-in for the Mosaic interpreter that returns
zeros of each kernel's result types (so the run time is the XLA ops' alone, not a kernel's), for inputs up to
RUN_LIMIT (JAXBench's CONFIG sizes are GiBs: planned and compiled only). Then the union of
the ops over all kernels and whether the op table covers every one.

    python benchmarks/bench_tpu_program_hlo_ops.py [PATH/JAXBench/benchmark]   (or JAXBENCH_DIR=...)
                                                   [--only NAME] [--no-run] [--cpu-branch]

``--cpu-branch`` also exports each kernel for ("tpu", "cpu") and times jax compiling the CPU branch, the
judge's path before this executor (its pallas_calls in jax's HLO interpreter).

Without a JAXBench checkout the JAXBench rows are skipped with a message. No TPU is used.
"""

from __future__ import annotations

import argparse
import gc
import glob
import os
import sys
import time

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1"}.items():
    os.environ.setdefault(_name, _value)

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICE_KIND = "TPU v6 lite"
RUN_LIMIT = 256 << 20  # inputs above this are not run here (the judge checks at reduced sizes)


def kernels(jaxbench: str | None, only: str | None):
    """(label, entry over flat arrays, args: ShapeDtypeStructs or concrete integer arrays), one at a time (a
    JAXBench task's inputs at CONFIG size take GiBs: each is made when its row is measured)."""
    sys.path.insert(0, HERE)
    from bench_module_cost import jax_kernels, task_args  # the same task reading as the pricing benchmark

    if jaxbench:
        for path in sorted(glob.glob(os.path.join(jaxbench, "*p_*", "optimized.py"))):
            label = "JAXBench " + os.path.basename(os.path.dirname(path))
            if only and only not in label:
                continue
            try:
                fn, args = task_args(path, None, None)
            except Exception as exc:  # noqa: BLE001 - a row says the task does not load
                print(f"{label:40s} inputs: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                continue
            yield label, fn, args
            del fn, args
            gc.collect()
    yield from (row for row in jax_kernels() if not only or only in row[0])


def zeros_run_call(backend_config, kernel_name, operands, results, aliases):
    """A stand-in for the Mosaic interpreter: zeros of the call's result types."""
    import numpy as np

    return [np.zeros(shape, dtype) for shape, dtype in results]


def concrete(args: list) -> list:
    import numpy as np

    rng = np.random.default_rng(0)
    out = []
    for a in args:
        if hasattr(a, "dtype") and not isinstance(a, np.ndarray) and not hasattr(a, "__array__"):
            dtype = np.dtype(a.dtype)
            out.append(rng.standard_normal(a.shape).astype(dtype) if dtype.kind in "fV" else
                       np.zeros(a.shape, dtype))
        else:
            out.append(np.asarray(a))
    return out


def cpu_branch_compile(fn, sig: list, args: list) -> str:
    """What the judge pays today: jax compiling the module's CPU branch (pallas_calls in the HLO interpreter)."""
    import jax

    from pallasite.runner.program.program_export import export_program

    try:
        exported = export_program(fn, sig, DEVICE_KIND, platforms=("tpu", "cpu"))
        structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
        start = time.perf_counter()
        jax.jit(exported.call).trace(*structs).lower().compile()
        return f"; jax compiling the CPU branch {(time.perf_counter() - start) * 1e3:6.0f} ms"
    except Exception as exc:  # noqa: BLE001 - the row says why there is no CPU figure
        return f"; no CPU branch ({type(exc).__name__}: {str(exc)[:60]})"


def measure(label: str, fn, args: list, run: bool, cpu: bool = False) -> set[str] | None:
    import numpy as np

    from pallasite.runner.program.program_export import export_program
    from pallasite.runner.tpu_program.hlo_exec import tpu_program

    sig = [[list(a.shape), np.dtype(a.dtype).name] for a in args]
    try:
        exported = export_program(fn, sig, DEVICE_KIND, platforms=("tpu",))
    except Exception as exc:  # noqa: BLE001 - a row says the kernel does not export
        print(f"{label:40s} export: {type(exc).__name__}: {str(exc)[:150]}")
        return None
    start = time.perf_counter()
    program = tpu_program(exported, sig)
    total = time.perf_counter() - start
    names = set(program.op_names)
    line = (f"{label:40s} {len(program.ops_used):5d} ops ({len(names):2d} kinds), {program.kernels} kernel call(s); "
            f"plan {program.plan_s * 1e3:6.0f} ms, compile {program.compile_s * 1e3:6.0f} ms "
            f"(tpu_program {total * 1e3:6.0f} ms)")
    if program.unsupported:
        print(line)
        for u in program.unsupported:
            print(f"{'':42s}NOT COVERED: {u}", flush=True)
        return names
    if cpu:
        line += cpu_branch_compile(fn, sig, args)
    size = sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in args)
    if run and size > RUN_LIMIT:
        line += f"; not run (inputs of {size >> 20} MiB; the judge checks at reduced sizes)"
    elif run:
        arrays = concrete(args)
        start = time.perf_counter()
        program(*arrays, run_call=zeros_run_call)
        first = time.perf_counter() - start
        start = time.perf_counter()
        program(*arrays, run_call=zeros_run_call)
        line += f"; run {first * 1e3:6.1f} ms, again {(time.perf_counter() - start) * 1e3:6.1f} ms (kernels: zeros)"
    print(line, flush=True)
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jaxbench", nargs="?", default=os.environ.get("JAXBENCH_DIR"),
                        help="JAXBench's benchmark folder (holds 1p_Flash_Attention/optimized.py, ...)")
    parser.add_argument("--only", default=None, help="only the kernels whose label contains this")
    parser.add_argument("--no-run", action="store_true", help="plan and compile only")
    parser.add_argument("--cpu-branch", action="store_true",
                        help="also time jax compiling the module's CPU branch (the judge's path before this executor)")
    ns = parser.parse_args()
    jaxbench = ns.jaxbench
    if not jaxbench or not os.path.isdir(jaxbench):
        print(f"JAXBench not found ({jaxbench or 'give its benchmark folder or set JAXBENCH_DIR'}): its rows are "
              "skipped")
        jaxbench = None
    from pallasite.runner.tpu_program.hlo_exec import op_table

    union: dict[str, list[str]] = {}
    for label, fn, args in kernels(jaxbench, ns.only):
        names = measure(label, fn, args, not ns.no_run, ns.cpu_branch)
        for name in names or ():
            union.setdefault(name, []).append(label)
    table = op_table()
    print(f"\nStableHLO ops in the TPU programs above ({len(union)}):")
    missing = []
    for name in sorted(union):
        base = name.split(" @")[0]
        covered = base in table or base in ("stablehlo.return", "func.return")
        missing += [] if covered else [name]
        print(f"  {name:45s} {'covered' if covered else 'NOT COVERED'}  ({len(union[name])} kernel(s))")
    print(f"\nthe op table covers {'all of them' if not missing else 'all but ' + ', '.join(missing)} "
          f"({len(table)} ops in the table)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
