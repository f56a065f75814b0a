"""Task entries wrapped by ``functools.partial(jax.jit, ...)`` are found and checked (a common style)."""

from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "tasks_jit"


@pytest.mark.parametrize("tiers", [(1,)])
def test_jitted_entry_is_the_task_entry(tiers):
    (report,) = check_paths([str(DATA / "jit_entry.py")], CheckOptions(tiers=tiers, time_limit_s=120))
    assert [f.code for f in report.findings if f.severity == "error"] == []
    (kernel,) = report.kernels
    assert dict(kernel.tiers)[1] == "ok", report
