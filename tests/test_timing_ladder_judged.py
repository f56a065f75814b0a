"""The CONFIG ladder through the judge (issue 34): in a confined worker the candidate's process
chooses the reduced size and runs with CONFIG there; the judge, which never ran it, checks the
names and values against the trusted baseline.py, makes the inputs and the reference at that size
itself and compares; a candidate whose arguments differ from the task's is not verified. Fixtures: tests/data/timing/ladder/ at real sizes (CONFIG written larger into a copy:
nothing is allocated at full size, the inputs are made abstractly)."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest

from pallasite.engine.workers import spawn

pytestmark = pytest.mark.pipeline  # a whole command end to end per test: .ci/run's pipeline step (issue 58)

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
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
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
async def test_a_candidate_with_other_arguments_or_names_is_not_verified(tmp_path):
    """JAXBench 6p's shape: the reference in its own layout and names (num_seqs where the kernel says
    batch). The judge gives a candidate only inputs it makes from the task's file (issue 56: the own-inputs
    path and the candidate's name pairing are gone), so the right kernel and the planted wrong one are both
    "not verified" with why - neither passes."""
    folder = tmp_path / "paged_attention"
    shutil.copytree(DATA / "paged_attention", folder)
    for name, old, new in (("baseline.py", '"num_seqs": 8', '"num_seqs": 512'),
                           ("optimized.py", '"batch": 8', '"batch": 512'), ("wrong.py", '"batch": 8', '"batch": 512')):
        path = folder / name
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new).replace('"pages_per_seq": 8', '"pages_per_seq": 64'))
    for reply in await judged(folder, ("optimized", "wrong")):
        assert reply.verdict == "error", (reply.rejections, reply.checks)
        assert reply.error.startswith("not verified: its arguments differ from the task's"), reply.error
