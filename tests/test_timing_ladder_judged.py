"""The CONFIG ladder through the judge (issue 34): in a confined worker the candidate's process
chooses the reduced size and runs with CONFIG there; the judge, which never ran it, checks the
names and values against the trusted baseline.py, makes the inputs and the reference at that size
itself (or runs a reference that takes other arguments through its own ``workload(*create_inputs())``)
and compares. Fixtures: tests/data/timing/ladder/ at real sizes (CONFIG written larger into a copy:
nothing is allocated at full size, the inputs are made abstractly)."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest

from pallasite.engine import spawn

DATA = Path(__file__).parent / "data" / "timing" / "ladder"
needs_namespaces = pytest.mark.skipif(spawn.confinement_problem(sys.executable) is not None,
                                      reason=f"no confined worker here: {spawn.confinement_problem(sys.executable)}")


def bigger(tmp_path: Path, task: str, old: str, new: str) -> Path:
    folder = tmp_path / task
    shutil.copytree(DATA / task, folder)
    for name in ("baseline.py", "optimized.py", "wrong.py"):
        path = folder / name
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
    return folder


async def judged(folder: Path, names: tuple[str, ...]) -> list:
    from pallasite.engine.client import WorkerClient, WorkerConfig
    from pallasite.engine.timing import TaskFiles, time_request

    out = []
    async with WorkerClient(WorkerConfig(confine=True, timeout_s=300, memory_mb=4096)) as worker:
        for name in names:
            files = TaskFiles(str(folder / f"{name}.py"), str(folder / "baseline.py"), "jaxbench")
            params = dataclasses.replace(time_request(files, "time", runs=1, warmup=0), shrink=True)
            reply = await worker.request(params)
            assert reply.ok, reply.message
            out.append(reply.result)
    return out


@needs_namespaces
async def test_the_judge_checks_a_real_size_attention_at_a_reduced_config(tmp_path):
    folder = bigger(tmp_path, "attention", '"batch": 2, "num_heads": 4, "seq_len": 512',
                    '"batch": 4, "num_heads": 8, "seq_len": 4096')
    right, wrong = await judged(folder, ("optimized", "wrong"))
    assert right.verdict == "ok", (right.error, right.rejections)
    assert right.judged_by == "the judge"
    assert " of " in right.checks["verified_at"]  # e.g. "batch 1 of 4, num_heads 1 of 8, seq_len 512 of 4096"
    assert right.checks["full_inputs"] == [[[4, 8, 4096, 128], "float32"]] * 3
    assert wrong.verdict == "rejected" and [r.trick for r in wrong.rejections] == ["wrong_result"]


@needs_namespaces
async def test_the_judge_runs_a_reference_with_other_arguments_on_its_own_inputs(tmp_path):
    folder = bigger(tmp_path, "own_inputs", '"num_groups": 8, "group_rows": 64, "width": 128',
                    '"num_groups": 64, "group_rows": 1024, "width": 1024')
    [right] = await judged(folder, ("optimized",))
    assert right.verdict == "ok", (right.error, right.rejections)
    assert "own task inputs" in right.checks["own_inputs"] and right.checks["verified_at"]


@needs_namespaces
async def test_the_judge_takes_names_its_file_spells_differently_and_gives_a_verdict(tmp_path):
    """JAXBench 6p's shape: the reference in its own layout and names (num_seqs where the kernel says
    batch); the reduction cuts output dims only, so the judge calls the planted off-by-one wrong."""
    folder = tmp_path / "paged_attention"
    shutil.copytree(DATA / "paged_attention", folder)
    for name, old, new in (("baseline.py", '"num_seqs": 8', '"num_seqs": 512'),
                           ("optimized.py", '"batch": 8', '"batch": 512'), ("wrong.py", '"batch": 8', '"batch": 512')):
        path = folder / name
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new).replace('"pages_per_seq": 8', '"pages_per_seq": 64'))
    right, wrong = await judged(folder, ("optimized", "wrong"))
    assert right.verdict == "ok", (right.error, right.rejections)
    assert "batch" in right.checks["verified_at"] and "num_seqs" in right.checks["verified_at"]
    assert wrong.verdict == "rejected" and [r.trick for r in wrong.rejections] == ["wrong_result"], wrong.error
