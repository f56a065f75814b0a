"""Example inputs that cannot be traced abstractly (numpy on a jax array) are made once for their shapes.

Before, such a task was "invalid task: example_inputs() failed while computing the input shapes:
TracerArrayConversionError" and no compiler tier ran: tpu-inference's structured sparse matmul, whose
metadata its ``Sparsifier`` builds with numpy, had 8 planted bugs that no check could see.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths
from pallasite.runner.tasks.task_types import RuntimeTask, TaskError

DATA = Path(__file__).parent / "data" / "tasks"


def test_inputs_built_with_numpy_are_made_once_for_their_shapes():
    def inputs():
        x = jnp.arange(6.0).reshape(2, 3)
        return x, jnp.asarray(np.argsort(np.asarray(x), axis=1))

    shapes = RuntimeTask("t", lambda x, o: x, inputs).abstract_args()
    assert [(s.shape, s.dtype) for s in shapes] == [((2, 3), jnp.float32), ((2, 3), jnp.int32)]


def test_inputs_that_fail_when_called_keep_the_tracing_error():
    def inputs():
        x = jnp.zeros((2, 3))
        if float(x.sum()) == 0.0:  # concrete: fine; traced: a ConcretizationTypeError
            raise ValueError("no inputs today")
        return (x,)

    with pytest.raises(TaskError, match="inputs\\(\\) failed while computing the input shapes: ConcretizationTypeError"):
        RuntimeTask("t", lambda x: x, inputs).abstract_args()


def test_other_failures_are_not_retried_concretely():
    calls = []

    def inputs():
        calls.append(1)
        return (jnp.zeros((2, 3)) @ jnp.zeros((4, 5)),)  # a shape error: the same called concretely

    with pytest.raises(TaskError, match="TypeError"):
        RuntimeTask("t", lambda x: x, inputs).abstract_args()
    assert len(calls) == 1  # traced once, never called concretely


def test_a_task_with_numpy_built_inputs_is_checked_at_every_tier():
    [report] = check_paths([str(DATA / "inputs_need_numpy.py")],
                           CheckOptions(target="v6e", tiers=(1, 3), time_limit_s=120))
    assert [f.code for f in report.findings if f.severity in ("error", "warning")] == []
    assert {dict(k.tiers).get(1) for k in report.kernels} == {"ok"}
    assert {dict(k.tiers).get(3) for k in report.kernels} == {"ok"}
