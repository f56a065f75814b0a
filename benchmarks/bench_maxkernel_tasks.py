"""How many of MaxKernel's shipped task folders load as pallasite reads them (needs a checkout).

    python benchmarks/bench_maxkernel_tasks.py PATH/TO/accelerator-agents/MaxKernel
    PYTHONPATH=OLD_CHECKOUT.pp python benchmarks/bench_maxkernel_tasks.py ...   # an older reader

Every folder holding a ``kernel_task.yaml`` is copied to a temporary folder (nothing of MaxKernel
is copied into this project), with its ``reference.py`` also standing in as the candidate
``kernel.py`` (plain JAX: what is measured is whether the task itself loads, not a kernel). Then,
in this process, as the worker would: the YAML is parsed, ``input_gen_code`` run, every case's
input shapes computed and each case's entry bound. A folder "loads" when all its cases do. Prints
one line per failing folder (the error's first line) and the totals; asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    import pallasite
    from pallasite.runner.tasks import maxkernel
    from pallasite.runner.loader import user_module

    root = Path(argv[0])
    folders = sorted(p.parent for p in root.rglob("kernel_task.yaml"))
    work = Path(tempfile.mkdtemp(prefix="pallasite-maxkernel-"))
    loaded, failures = 0, Counter()
    started = time.perf_counter()
    for folder in folders:
        dest = work / folder.name
        shutil.copytree(folder, dest)
        candidate = dest / "kernel.py"
        if (dest / "reference.py").exists() and not candidate.exists():
            shutil.copy(dest / "reference.py", candidate)
        try:
            with user_module(str(candidate)) as module:
                tasks = maxkernel.discover(module, str(candidate))
                for task in tasks or ():
                    task.abstract_args()
            if not tasks:
                raise RuntimeError("no task found")
            loaded += 1
        except Exception as exc:  # noqa: BLE001 - the figure is what fails, and how
            first = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
            failures[first.split(":")[0] + ": " + (first.split(": ", 2)[-1][:60])] += 1
            print(f"  {folder.name}: {first}")
    seconds = time.perf_counter() - started
    print(f"MaxKernel task folders loaded by pallasite at {Path(pallasite.__file__).parent}: {loaded}/{len(folders)} "
          f"in {seconds:.0f} s")
    for what, n in failures.most_common():
        print(f"  {n:3d} x {what}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
