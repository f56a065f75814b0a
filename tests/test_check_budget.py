"""What interpret mode may run whole, and the budget a check sizes itself by: inputs the interpreter
would hold past a third of the worker's memory limit are too big to run whole (JAXBench 3p and 4p: 0.3
GiB of inputs ran whole and the worker was killed at 8 GiB), and a process the worker started (the
judge's candidate process, which proposes a reduced size) reads the worker's limit, not a 1 GiB default
(JAXBench 2p and 8p: "no reduced size was proposed")."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pallasite.runner import memory_guard
from pallasite.runner.measure import timing_ladder, timing_shrink


def _inputs(mib: int):
    return (jax.ShapeDtypeStruct((mib, 1 << 18), jnp.float32),)  # mib MiB of float32


def test_a_started_process_reads_the_workers_limit(monkeypatch):
    monkeypatch.setattr(memory_guard, "LIMIT_MB", 0)
    monkeypatch.delenv(memory_guard.LIMIT_ENV, raising=False)
    assert memory_guard.limit_mb() == 0 and timing_ladder.budget_bytes() == timing_ladder.DEFAULT_BUDGET
    monkeypatch.setenv(memory_guard.LIMIT_ENV, "8192")
    assert memory_guard.limit_mb() == 8192 and timing_ladder.budget_bytes() == (8192 << 20) // 3
    monkeypatch.setattr(memory_guard, "LIMIT_MB", 4096)  # the worker's own limit first
    assert timing_ladder.budget_bytes() == (4096 << 20) // 3
    monkeypatch.setattr(memory_guard, "LIMIT_MB", 0)
    monkeypatch.setenv(memory_guard.LIMIT_ENV, "lots")
    assert memory_guard.limit_mb() == 0


def test_inputs_the_interpreter_cannot_hold_are_too_big_to_run_whole(monkeypatch):
    monkeypatch.setattr(memory_guard, "LIMIT_MB", 8192)  # a budget of 2730 MiB
    why = timing_shrink.too_big(_inputs(300))
    assert why is not None and "300 MiB" in why and "12 times over" in why and "2730 MiB" in why
    assert timing_shrink.too_big(_inputs(100)) is None  # 1.2 GiB held: within the budget
    assert "interpret mode runs at most 512 MiB whole" in timing_shrink.too_big(_inputs(600))


def test_the_judge_sizes_its_candidate_s_proposal_by_half_the_worker_s_memory(monkeypatch):
    """At a third of 4096 MiB (1365) JAXBench 2p, 4p and 8p got no reduced size (they need 1.6-1.8 GiB) and were
    not checked at the default limit; the judge runs the proposed size alone (the candidate's process is gone),
    so it sends a share of a half: 2048 MiB, and all three were judged correct within 4096 MiB."""
    from pallasite.runner.judging.sizes import ladder_knobs

    monkeypatch.setattr(memory_guard, "LIMIT_MB", 4096)
    knobs = ladder_knobs()
    assert knobs["LIMIT_MB"] == 4096 and knobs["BUDGET_SHARE"] == 2
    monkeypatch.setattr(timing_ladder, "BUDGET_SHARE", knobs["BUDGET_SHARE"])  # as the candidate's process sets it
    assert timing_ladder.budget_bytes() == 2048 << 20 > 1752 << 20
