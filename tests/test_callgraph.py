"""The call-graph closure: tier 0's (analysis/callgraph.py) and the worker's copy
(runner/tasks/tasks_runtime.py, which may import only analysis.types) give the same answers."""

from __future__ import annotations

import random

import pytest

from pallasite.analysis.callgraph import reaching


def test_closure_follows_callers_to_a_fixed_point():
    calls = {"entry": {"helper"}, "helper": {"pallas_call"}, "other": {"print"}, "outer": {"entry"}}
    assert reaching({"helper"}, calls) == {"helper", "entry", "outer"}
    assert reaching(set(), calls) == set()


def test_the_workers_copy_agrees_on_random_graphs():
    pytest.importorskip("jax")
    from pallasite.runner.tasks.tasks_runtime import functions_reaching

    rng = random.Random(11)
    for _ in range(300):
        names = [f"f{i}" for i in range(rng.randint(1, 12))]
        calls = {n: {rng.choice(names) for _ in range(rng.randint(0, 3))} for n in names}
        direct = {n for n in names if rng.random() < 0.2}
        assert functions_reaching(direct, calls) == reaching(direct, calls), (direct, calls)
