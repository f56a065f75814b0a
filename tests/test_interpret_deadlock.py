"""A DMA wait nothing can satisfy (runner/tier3/interpret_deadlock.py): said at once with one core, after a
while with two, instead of tier 3 sleeping until its time limit (PLS307 "not checked", never a catch: issue 57's
corpus had three such timeouts among ragged paged attention's inverted ``pl.when`` mutants)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from checking import check_files

from pallasite.runner.tier3 import interpret_deadlock

DATA = Path(__file__).parent / "data" / "runtime"


class FakeSemaphore:
    """The parts of jax's interpreter Semaphore the wrapper reads: a condition, counts and pending DMAs."""

    def __init__(self, pending: int = 0, each: int = 0):
        self.id, self.cv = 7, threading.Condition()
        self.count_by_core = [0, 0]
        self.tasks = [[self._signal(each) for _ in range(pending)], []]

    def _signal(self, amount: int):
        def run() -> None:
            with self.cv:
                self.count_by_core[0] += amount
        return run


def test_a_wait_the_pending_copies_cover_returns():
    sem = FakeSemaphore(pending=2, each=2048)
    interpret_deadlock._run_pending(sem, 4096, 0, None, patience=0.0)
    assert sem.count_by_core[0] == 4096 and sem.tasks[0] == []


def test_a_wait_nothing_will_signal_is_a_deadlock_at_once_with_one_core():
    sem = FakeSemaphore(pending=1, each=2048)
    with pytest.raises(interpret_deadlock.KernelDeadlock, match="its count is 2048 and no copy in flight"):
        interpret_deadlock._run_pending(sem, 4096, 0, None, patience=0.0)


def test_with_two_cores_another_core_s_signal_ends_the_wait():
    sem = FakeSemaphore()
    threading.Timer(0.3, sem._signal(4096)).start()  # the other core signals a little later
    interpret_deadlock._run_pending(sem, 4096, 0, None, patience=2.0)
    assert sem.count_by_core[0] == 4096
    with pytest.raises(interpret_deadlock.KernelDeadlock, match="nothing signalled it for 0.5 s"):
        interpret_deadlock._run_pending(FakeSemaphore(), 4096, 0, None, patience=0.5)


@pytest.mark.slow
def test_a_copy_never_started_is_said_at_its_wait():
    """tests/data/runtime/dma_never_started.py: the start under ``pl.when(i < 0)``, the wait unguarded (was:
    PLS307 after the time limit). Slow: the two-core run waits PATIENCE_S before it says so."""
    (found,) = [f for f in check_files([DATA / "dma_never_started.py"], "0-3")["dma_never_started.py"]["findings"]
                if f["severity"] == "error"]
    assert (found["code"], found["line"]) == ("PLS300", 21), found
    assert found["message"].startswith("deadlock: the kernel waits on DMA semaphore")
