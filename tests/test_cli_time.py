"""`pallasite time` and `pallasite profile` end to end: a JAXBench folder as it is, an exploit's
exit status, a profile's trace and bound, usage errors, and the measurements in the store."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.analysis.types import Provenance
from pallasite.knowledge.store import ResultsStore

DATA = Path(__file__).parent / "data" / "timing"


def pallasite(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.pipeline
def test_jaxbench_folder_timed_as_json_and_stored_with_provenance(tmp_path):
    folder = tmp_path / "task"
    shutil.copytree(DATA / "jaxbench_add", folder)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'kernels'\n")  # the workspace: the store goes here
    done = pallasite("time", str(folder), "--runs", "3", "--warmup", "1", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["version"] == 1 and doc["op"] == "time" and doc["status"] == "ok"
    assert doc["path"].endswith("optimized.py")
    assert doc["backend"]["where"] == "local" and doc["backend"]["devices"] == ["cpu"]
    result = doc["result"]
    assert result["format"] == "jaxbench" and result["entry"] == "workload"
    how = result["checks"]["extra_shape"]["how"]  # the judge's second shape, from one symbolic module
    assert "create_inputs with cols=256, rows=512" in how and "one module for both sizes" in how, how
    assert result["checks"]["export"]["symbolic"] is True
    assert result["speedup"]["value"] > 0 and "XLA" in result["speedup"]["baseline"]
    with ResultsStore.open(tmp_path) as store:
        stored = store.measurements(path=str(folder / "optimized.py"))
    by_kernel = {r.kernel: r for r in stored}
    assert set(by_kernel) == {"workload", "workload (reference)"}
    assert by_kernel["workload"].measurement.provenance is Provenance.INTERPRET
    assert by_kernel["workload (reference)"].measurement.provenance is Provenance.HOST
    assert by_kernel["workload"].key.backend == "local"
    assert len(by_kernel["workload"].measurement.samples_ns) == 3


@pytest.mark.pipeline
def test_exploit_exits_1_naming_the_trick_and_profile_shows_trace_and_bound(tmp_path):
    done = pallasite("time", str(DATA / "partial_write.py"), "--no-store", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "REJECTED [partial_write]" in done.stdout and "not timed" in done.stdout
    prof = pallasite("profile", str(DATA / "honest_add.py"), "--runs", "2", "--target", "v5e", "--no-store",
                     "--trace-dir", str(tmp_path / "trace"), cwd=tmp_path)
    assert prof.returncode == 0, prof.stderr
    assert f"trace: {tmp_path / 'trace'}" in prof.stdout
    assert "bound: memory" in prof.stdout and "v5e ridge" in prof.stdout
    assert "not TPU time" in prof.stdout
    assert "profiler overhead" in prof.stdout


def test_usage_errors_exit_2_with_a_message(tmp_path):
    missing = pallasite("time", str(tmp_path / "nope.py"), cwd=tmp_path)
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr
    no_host = pallasite("time", str(DATA / "honest_add.py"), "--backend", "ssh", cwd=tmp_path)
    assert no_host.returncode == 2 and "needs a host" in no_host.stderr
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").write_text("")
    ambiguous = pallasite("profile", str(tmp_path), cwd=tmp_path)
    assert ambiguous.returncode == 2 and "not a task folder" in ambiguous.stderr


OPTIMIZE = Path(__file__).parent / "data" / "optimize"


@pytest.mark.pipeline
def test_without_a_device_big_inputs_are_timed_at_reduced_shapes_with_progress(tmp_path):
    """Two 1 GiB inputs, 2048 grid steps: at full size interpret mode ran past its time limit with no
    word (JAXBench's 8p_GEMM: "ran past its limit of 600 s"); now the checks and the timing run at
    the optimize loop's reduced shapes, said in the result. Progress is for a terminal (server/commands/console.py): the
    captured stderr, a pipe, holds none of it (issue 59)."""
    done = pallasite("time", str(OPTIMIZE / "big_add.py"), "--runs", "1", "--warmup", "1", "--no-store",
                     "--time-limit", "240", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  ... comparing the candidate's program" not in done.stderr  # progress: on a terminal only
    timed = re.search(r"checked in TPU interpret mode at reduced shapes float32\[(\d+), (\d+)\], float32\[\1, \2\]",
                      done.stdout)
    assert timed and int(timed.group(1)) < 16384 and int(timed.group(2)) < 16384, done.stdout
    assert "timed at the reduced size the checks ran at, the exported program in the CPU's interpreter" in done.stdout
    assert "CPU interpret mode: not TPU time" in done.stdout and "from float32[16384, 16384]" in done.stdout
    profiled = pallasite("profile", str(OPTIMIZE / "big_add.py"), "--runs", "1", "--no-store", "--format", "json",
                         "--time-limit", "240", cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stderr
    result = json.loads(profiled.stdout)["result"]
    (rows, cols), _ = result["checks"]["inputs"][0]
    assert rows < 16384 and cols < 16384 and result["checks"]["full_inputs"] == [[[16384, 16384], "float32"]] * 2
    # run reduced; the work in the roofline is the task's
    assert result["profile"]["roofline"]["bytes"] == 3 * 16384 * 16384 * 4


@pytest.mark.pipeline
def test_without_a_device_inputs_that_cannot_be_reduced_are_refused_at_once(tmp_path):
    done = pallasite("time", str(OPTIMIZE / "whole_block.py"), "--runs", "1", "--no-store", "--time-limit", "240",
                     cwd=tmp_path)
    assert done.returncode == 2
    assert "cannot be reduced" in done.stdout + done.stderr and "device backend" in done.stdout + done.stderr


@pytest.mark.pipeline
def test_a_kernel_in_interpret_mode_off_tpu_is_judged_as_the_tpu_runs_it(tmp_path):
    """``interpret=jax.default_backend() != "tpu"`` (benchmark and tutorial code): the candidate's process
    answers as the target chip while it exports, so the judge gets the kernel's Mosaic lowering - the honest
    kernel is judged (it was "rejected: no_pallas_call") and each cheat written the same way is refused for its
    own trick (partial_write, calls_reference), not for the idiom."""
    folder = DATA / "backend_idiom"
    want = {"optimized": ("ok", []), "half_written": ("rejected", ["partial_write"]),
            "around_the_kernel": ("rejected", ["calls_reference"])}
    for name, (verdict, tricks) in want.items():
        done = pallasite("time", str(folder), "--kernel", str(folder / f"{name}.py"), "--runs", "1", "--warmup", "1",
                         "--no-store", "--format", "json", cwd=tmp_path)
        result = json.loads(done.stdout)["result"]
        assert result["verdict"] == verdict, (name, result.get("error"), result["rejections"])
        assert [r["trick"] for r in result["rejections"]] == tricks, name
        assert result["checks"]["module"]["kernels"] == 1, name
