"""An estimate for any kernel the checker can trace (issue 44), through the real ``pallasite eval``:

- ``eval TASK --kernel FILE`` where FILE exports only ``workload(...)`` (docs/task-convention.md,
  JAXBench's own convention) and lives outside the task folder was "not compiled for the chip: tier 2
  skipped: no example inputs (PLS900)" with no estimate; now it is compiled for the chip against the
  task's inputs and gets its estimate pair;
- a kernel tier 2 rejects for VMEM had no estimate at all; now it keeps "not compiled" and carries
  its estimate labelled as a lower bound, with no speedup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

DATA = Path(__file__).parent / "data"
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1"}


def _eval(args: list[str], tmp_path: Path) -> dict:
    out = tmp_path / "eval.json"
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "eval", *args, "--target", "v5e",
                           "--no-verify", "--format", "json", "--output", str(out)],
                          capture_output=True, text=True, timeout=500, cwd=tmp_path, env=ENV)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    (method,) = json.loads(out.read_text())["methods"]
    (row,) = method["per_task"]
    return row


def _workload_only(tmp_path: Path) -> Path:
    """The ladder's attention kernel as a file of its own: its workload and kernel, nothing of the task."""
    text = (DATA / "timing" / "ladder" / "attention" / "optimized.py").read_text()
    start, end = text.index("CONFIG = {"), text.index("BLOCK_Q = 128")
    text = text[:start] + text[end:]
    start, end = text.index("def create_inputs"), text.index("def _kernel")
    path = tmp_path / "elsewhere" / "my_attention.py"
    path.parent.mkdir()
    path.write_text(text[:start] + text[end:])
    return path


def test_a_workload_only_kernel_outside_the_task_is_compiled_and_estimated(tmp_path):
    kernel = _workload_only(tmp_path)
    row = _eval([str(DATA / "timing" / "ladder" / "attention"), "--kernel", str(kernel)], tmp_path)
    verdict = row["verdict"]
    assert "no example inputs" not in json.dumps(row)
    assert verdict["compile"]["ok"] is True, verdict["compile"]
    assert verdict["timing"]["provenance"] == "estimate" and verdict["timing"]["seconds"] > 0
    assert "-bound" in verdict["timing"]["method"] and "factors:" in verdict["timing"]["method"]
    assert row["reference_timing"]["seconds"] > 0


def test_a_kernel_tier_2_rejects_for_vmem_keeps_its_estimate_as_a_bound(tmp_path):
    row = _eval([str(DATA / "eval_kernels"), "--tasks", "vmem_task"], tmp_path)
    verdict = row["verdict"]
    assert verdict["compile"]["ok"] is False and "PLS201" in verdict["compile"]["why"]
    timing = verdict["timing"]
    assert timing["provenance"] == "estimate" and timing["seconds"] > 0
    assert timing["method"].startswith("a lower bound: tier 2 rejected the kernel for VMEM")
    assert row["speedup"] is None  # never divided from a program that does not compile
    assert row["reference_timing"]["seconds"] > 0
