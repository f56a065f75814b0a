"""MaxKernel task folders: kernel_task.yaml + reference.py + a candidate kernel, checked end to end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions, Checker
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "maxkernel"


def test_yaml_subset_reads_scalars_and_blocks():
    from pallasite.runner.tasks.maxkernel import parse_task_yaml

    spec = parse_task_yaml((DATA / "softmax_task" / "kernel_task.yaml").read_text())
    assert spec["task_id"] == "softmax_rows"
    assert spec["atol"] == 1e-5 and spec["rtol"] == 1e-5
    assert spec["description"].startswith("Softmax over the last axis")
    assert "def get_inputs():\n    cases = []" in spec["input_gen_code"]
    bad = parse_task_yaml('task_id: "quoted # not a comment"\natol: 0\n')
    assert bad == {"task_id": "quoted # not a comment", "atol": 0}


def test_yaml_subset_names_the_bad_line():
    from pallasite.runner.tasks.maxkernel import parse_task_yaml
    from pallasite.runner.tasks.tasks_runtime import TaskError

    with pytest.raises(TaskError, match="line 2"):
        parse_task_yaml("task_id: x\n  stray: indented\n")


@pytest.fixture(scope="module")
def reports():
    paths = [DATA / "softmax_task" / "kernel.py", DATA / "softmax_task" / "reference.py",
             DATA / "bad_block_task" / "candidate.py"]
    out = check_paths([str(p) for p in paths], CheckOptions(target="v5e", tiers=(1, 3), time_limit_s=120))
    return {f"{Path(r.path).parent.name}/{Path(r.path).name}": r for r in out}


@pytest.mark.pipeline
def test_task_folder_checks_clean_with_every_case_interpreted(reports):
    report = reports["softmax_task/kernel.py"]
    assert [f.code for f in report.findings] == []
    assert [dict(k.tiers)[1] for k in report.kernels] == ["ok"]
    assert [dict(k.tiers)[3] for k in report.kernels] == ["ok"]
    notes = [n for n in report.notes if n.startswith("tier 3:")]
    assert len(notes) == 2  # get_inputs() gives two cases: (64, 512) and (256, 512)
    assert "float32[64, 512]" in notes[0] and "float32[256, 512]" in notes[1]


def test_reference_file_is_not_a_candidate(reports):
    report = reports["softmax_task/reference.py"]
    assert report.findings == () and not any(n.startswith("tier 3:") for n in report.notes)


def test_candidate_named_by_yaml_is_checked(reports):
    report = reports["bad_block_task/candidate.py"]
    assert [(f.code, f.span.line + 1) for f in report.findings] == [("PLS101", 12)]


@pytest.mark.pipeline
def test_candidate_that_disagrees_with_the_reference_is_reported():
    path = DATA / "softmax_task" / "kernel.py"
    text = path.read_text().replace("o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)", "o_ref[...] = e")

    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(3,), time_limit_s=120))
        try:
            return await checker.check(str(path), text)
        finally:
            await checker.close()

    report = asyncio.run(run())
    codes = [f.code for f in report.findings]
    assert codes == ["PLS304", "PLS304"], [f.message for f in report.findings]  # both input cases
    assert "max abs error" in report.findings[0].message
    assert "atol 1e-05, rtol 1e-05" in report.findings[0].message  # the YAML's tolerances
