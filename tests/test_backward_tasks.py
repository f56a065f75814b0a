"""The backward pass of a hand-written custom VJP is checked as an entry of its own
(``runner/tasks/tasks_backward.py``). Before it, a check ran only the forward: a backward kernel that
gives the first row block no gradient, or whose block is off the tiling, got no finding at all.

Fixtures (tests/data/backward/): ``grad_first_block_broken.py`` and its fixed twin,
``grad_block_misaligned.py``; and a forward-only kernel (tests/data/locate/grid_no_cdiv.py) that must
get no backward entry.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
from jax.experimental.pallas import tpu as pltpu

from pallasite.runner.tasks import tasks_backward, tasks_runtime

DATA = Path(__file__).parent / "data" / "backward"


def _tasks(path: Path) -> list:
    spec = importlib.util.spec_from_file_location(f"bwd_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tasks_runtime.checked_tasks(module, str(path))


def _check(path: Path, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", str(path), "--no-store",
                           "--format", "json", "--target", "v6e", *args], capture_output=True, text=True,
                          timeout=280, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    (file,) = json.loads(proc.stdout)["files"]
    return file


def test_a_custom_vjp_entry_gets_its_backward_pass_as_an_entry():
    tasks = _tasks(DATA / "grad_first_block_fixed.py")
    assert [t.name for t in tasks] == ["double", "double (backward)"]
    backward = tasks[1]
    assert backward.entry.forward_kernels == {"_forward_kernel"}  # tier 3 reads the backward's own calls
    x = jax.numpy.asarray(np.random.default_rng(0).standard_normal((64, 256)), jax.numpy.float32)
    with pltpu.force_tpu_interpret_mode():
        (got,) = backward.entry(x)
    (want,) = backward.reference(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    # the cotangent is not symmetric: a gradient read back transposed or shifted would differ
    ct = np.asarray(tasks_backward.cotangent(jax.ShapeDtypeStruct((4, 3), jax.numpy.float32)))
    assert len(set(np.round(ct.ravel(), 6))) == ct.size


def test_a_file_without_a_custom_vjp_gets_no_backward_entry():
    tasks = _tasks(Path(__file__).parent / "data" / "locate" / "grid_no_cdiv.py")
    assert tasks and not any(t.name.endswith(tasks_backward.SUFFIX) for t in tasks)


def test_a_wrong_backward_kernel_is_found_at_its_line_with_a_verified_fix():
    file = _check(DATA / "grad_first_block_broken.py", "--tiers", "0", "--locate")
    (finding,) = [f for f in file["findings"] if f["severity"] == "error"]
    assert finding["code"] == "PLS304" and finding["line"] == 22, finding
    assert finding["message"].startswith("in the backward pass of double (its custom VJP, which jax.grad runs): ")
    assert finding["fix"]["title"].startswith("verified: with this change the kernel matches the reference")
    assert finding["fix"]["edits"][0]["new_text"] == "step >= 0"


def test_the_fixed_backward_kernel_gets_no_finding():
    file = _check(DATA / "grad_first_block_fixed.py", "--tiers", "0-3")
    assert [f for f in file["findings"] if f["severity"] in ("error", "warning")] == []
    assert any(n.startswith("tier 3: double (backward) ran in") for n in file["notes"]), file["notes"]


def test_a_backward_block_off_the_tiling_is_a_lowering_error_at_its_line():
    file = _check(DATA / "grad_block_misaligned.py", "--tiers", "1")
    (finding,) = file["findings"]
    assert (finding["code"], finding["line"]) == ("PLS101", 35), finding
    assert finding["message"].startswith("in the backward pass of double")


def test_the_backward_pass_asks_tier_3_on_its_own_so_its_time_limit_loses_only_its_answer():
    """JAXBench 1p with an accumulator init removed: its backward's interpret run took the one tier-3 request past
    its 300 s limit, and the forward's finding at the init was lost with it."""
    import asyncio
    from types import SimpleNamespace

    from pallasite.engine import tier3_request
    from pallasite.wire.messages import CheckEntry, CheckResult, TierOutcome

    def entry(name: str) -> CheckEntry:
        return CheckEntry(name, (TierOutcome.of(1, "ok"), TierOutcome.of(2, "ok")))

    result = CheckResult("v6e", (1, 2), entries=(entry("workload"), entry("workload (backward)")))
    asked: list[list[str]] = []

    async def request(tiers, names):
        asked.append(list(names))
        if names == ["workload"]:
            answer = CheckResult("v6e", (3,), entries=(CheckEntry("workload", (TierOutcome.of(3, "error"),)),))
            return SimpleNamespace(status="ok", result=answer)
        return SimpleNamespace(status="timed_out", result=None)

    stopped = lambda reply: (None, "not checked: the interpret-mode run reached the time limit (300 s) (PLS307)")  # noqa: E731
    merged = asyncio.run(tier3_request.run_tier3(request, result, [], lambda reply, tiers: (None, "error"), stopped))
    assert asked == [["workload"], ["workload (backward)"]]
    states = {e.name: e.state(3).state.value for e in merged.entries}
    assert states == {"workload": "error", "workload (backward)": "not_checked"}, states
