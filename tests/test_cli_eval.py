"""`pallasite eval DIR` over JAXBench/MaxKernel folders as they are, and the task discovery under it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.analysis.types import ChipSpec
from pallasite.engine.eval_tasks import discover, reference_seconds

DATA = Path(__file__).parent / "data"


def test_discover_reads_jaxbench_and_maxkernel_folders(tmp_path):
    shutil.copytree(DATA / "eval", tmp_path / "eval")
    shutil.copytree(DATA / "maxkernel" / "softmax_task", tmp_path / "eval" / "softmax_task")
    tasks = {t.name: t for t in discover(str(tmp_path / "eval"))}
    assert sorted(tasks) == ["add_tuned", "scale_reference_only", "softmax_task"]
    assert tasks["add_tuned"].layout == "jaxbench" and tasks["add_tuned"].candidate_path.endswith("optimized.py")
    assert tasks["scale_reference_only"].candidate_path is None
    assert tasks["softmax_task"].layout == "maxkernel"
    assert tasks["softmax_task"].reference_path.endswith("reference.py")
    assert tasks["softmax_task"].candidate_path.endswith("kernel.py")


def test_discover_says_what_a_task_folder_is(tmp_path):
    with pytest.raises(ValueError, match="no task folders found.*baseline.py.*kernel_task.yaml"):
        discover(str(tmp_path))
    with pytest.raises(ValueError, match="no such folder"):
        discover(str(tmp_path / "missing"))


def _chip():
    import dataclasses

    known = dict(name="v5e", device_kind="TPU v5 lite", topology="v5e:2x2", device_cores=1, bf16_flops=2e14,
                 hbm_bytes_per_s=8e11)
    values = {}
    for f in dataclasses.fields(ChipSpec):
        if f.name in known:
            values[f.name] = known[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = "" if f.type in (str, "str") else 0
    return ChipSpec(**values)


def test_reference_seconds_prefers_xla_then_roofline_and_never_invents_one():
    chip = _chip()
    assert reference_seconds({"optimal_seconds": 2e-5, "flops": 1.0}, chip) == (2e-5, "XLA optimal_seconds")
    s, how = reference_seconds({"flops": 4e9, "bytes_accessed": 8e6}, chip)
    assert s == pytest.approx(max(4e9 / 2e14, 8e6 / 8e11)) and how.startswith("roofline")
    assert reference_seconds(None, chip)[0] is None
    assert reference_seconds({"error": "ValueError: boom"}, chip) == (None, "ValueError: boom")


def test_eval_cli_scores_a_folder_with_labelled_estimates(tmp_path):
    out = tmp_path / "eval.json"
    report = tmp_path / "eval.html"
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "eval", str(DATA / "eval"), "--target", "v5e",
                           "--json", str(out), "--report", str(report)], capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "geomean speedup" in proc.stdout and "estimate (v5e)" in proc.stdout
    assert "1/2 add_tuned" in proc.stderr  # progress
    (summary,) = json.loads(out.read_text())["methods"]
    rows = {t["task"]: t for t in summary["per_task"]}
    tuned, ref = rows["add_tuned"], rows["scale_reference_only"]
    assert tuned["compiled"] and tuned["correct"] and tuned["speedup"] > 0
    assert tuned["provenance"].startswith("estimate (v5e)")
    assert ref["speedup"] == 1.0 and ref["provenance"] == "the reference itself (1.0x by definition)"
    expected = (max(tuned["speedup"], 1.0) * 1.0) ** 0.5
    assert summary["geomean_speedup"] == pytest.approx(expected)
    assert 'data-plot="fast_p"' in report.read_text()
