"""What `time`/`profile` are asked: which files a FILE|TASK_DIR names, the request's params (texts
travel with it), and a tunable config as the autotuner passes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.engine.timing import task_files, time_request

DATA = Path(__file__).parent / "data"


def test_task_folders_as_they_are(tmp_path):
    jaxbench = task_files(str(DATA / "timing" / "jaxbench_add"))
    assert (Path(jaxbench.path).name, Path(jaxbench.reference_path).name, jaxbench.layout) == (
        "optimized.py", "baseline.py", "jaxbench")
    beside = task_files(str(DATA / "timing" / "jaxbench_add" / "optimized.py"))
    assert beside.reference_path == jaxbench.reference_path  # the file itself: its baseline.py still counts
    plain = task_files(str(DATA / "timing" / "honest_add.py"))
    assert plain.reference_path is None and plain.layout == "file"
    (tmp_path / "kernel_task.yaml").write_text("task_id: t\n")
    (tmp_path / "reference.py").write_text("")
    (tmp_path / "my_kernel.py").write_text("")
    maxkernel = task_files(str(tmp_path))
    assert Path(maxkernel.path).name == "my_kernel.py" and maxkernel.layout == "maxkernel"
    (tmp_path / "other.py").write_text("")
    with pytest.raises(ValueError, match="exactly one kernel file"):
        task_files(str(tmp_path))


def test_request_carries_the_texts_and_only_the_options_given():
    files = task_files(str(DATA / "timing" / "jaxbench_add"))
    params = time_request(files, runs=5, config={"block_rows": 128})
    assert type(params).OP == "time"
    assert params.source.text == Path(files.path).read_text() and params.source.path == files.path
    assert params.reference.text == Path(files.reference_path).read_text()
    assert params.runs == 5 and params.config == {"block_rows": 128}
    assert params.seed is None and params.warmup == 2 and params.extra_shape is True  # the op's defaults
    unsaved = time_request(task_files(str(DATA / "timing" / "honest_add.py")), "profile", text="# the buffer\n",
                           chip="v5e")
    assert type(unsaved).OP == "profile" and unsaved.source.text == "# the buffer\n" and unsaved.reference is None
    assert unsaved.chip == "v5e" and unsaved.runs == 5
    with pytest.raises(ValueError, match="unknown timing op"):
        time_request(files, "tune")


@pytest.mark.pipeline
def test_a_tunable_config_is_applied_and_recorded_and_an_unknown_one_refused():
    from pallasite.runner.judging.judge import judged_time as handle_time

    path = str(DATA / "timing" / "honest_add.py")
    result = handle_time({"path": path, "config": {"block_rows": 128}, "runs": 1, "warmup": 1, "extra_shape": False})
    assert result["verdict"] == "ok", result
    assert result["config"] == {"block_rows": 128}
    assert result["candidate"]["config"] == [["block_rows", 128]]
    refused = handle_time({"path": path, "config": {"block_cols": 128}})
    assert refused["verdict"] == "error"
    assert "block_cols" in refused["error"] and "tunables: block_rows" in refused["error"]
