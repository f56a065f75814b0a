"""What a newcomer tripped over, round 7 (issue 59, items 1-6), each through the real command where it can be."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
NEWCOMER = DATA / "newcomer"


def _cli(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


# --------------------------------------------------------------------------- 1. tune never prices an empty grid


@pytest.mark.pipeline
def test_tune_refuses_a_grid_of_zero_steps_and_picks_a_valid_configuration(tmp_path):
    """Before: BN=1024, BM=1024, BK=2048 over (512,1024)@(1024,512) with `m // BM` grids ranked first at 2.0 us
    ("3.88x"), the three test slots went to them ("compiled, wrong: partial_write") and tune ended "nothing to
    apply"; "refused BN=1024: compiled for v6e (tiers 0,1,2)" said nothing of why."""
    shutil.copy(NEWCOMER / "floor_grid_matmul.py", tmp_path / "mm.py")
    done = _cli(tmp_path, "tune", "mm.py", "--top", "8", "--no-store")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    headline = out.splitlines()[0]
    assert "rejected before compiling (empty: " in headline, headline
    table = out.split("\n... ")[0]
    assert "BN=1024" not in table and "BM=1024" not in table and "BK=2048" not in table, table
    assert "partial_write" not in out and "nothing to apply" not in out, out
    assert "\r" not in done.stderr and "[#" not in done.stderr, done.stderr[:300]  # item 5: no bar in a log
    assert "best: BM=512, BN=512 by estimate (v6e) (compiled, correct)" in out, out


def test_feasibility_says_why_a_grid_is_empty_or_a_block_is_padding():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from pallasite.analysis.feasibility import rejections
    from pallasite.analysis.types import chip_target
    from pallasite.runner.chip_probe import spec_from_jax
    from pallasite.runner.program.program_price import price_program

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    def scale(x, *, bn, div):
        spec = pl.BlockSpec((256, bn), lambda i, j: (i, j))
        return pl.pallas_call(kernel, grid=(x.shape[0] // 256, div(x.shape[1], bn)), in_specs=[spec],
                              out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    chip = spec_from_jax(chip_target("v6e"))
    x = jax.ShapeDtypeStruct((512, 512), jnp.float32)
    floor = price_program(lambda a: scale(a, bn=1024, div=lambda n, b: n // b), [x], chip)
    (empty, *padding) = rejections(floor, 16 << 20)
    assert empty.reason == "empty" and empty.message == (
        "kernel: grid (2, 0) has 0 steps along axis 1: the kernel never runs, outputs (512, 512) never written "
        "(args[0] block (256, 1024) is larger than its array (512, 512): a floor-divided grid gives 0 steps)")
    assert {r.reason for r in padding} == {"padding"}
    ceil = price_program(lambda a: scale(a, bn=1024, div=pl.cdiv), [x], chip)
    assert [r.reason for r in rejections(ceil, 16 << 20)] == ["padding", "padding"]
    assert "dim 1 is 1024, larger than the array's 512" in rejections(ceil, 16 << 20)[0].message
    fits = price_program(lambda a: scale(a, bn=512, div=pl.cdiv), [x], chip)
    assert rejections(fits, 16 << 20) == ()


def test_a_refused_configuration_says_what_the_judges_test_found(tmp_path):
    """Before: "refused bk=1024: compiled for v5e (tiers 0,1,2)", as if compiling were the reason."""
    from pallasite.analysis.verdict import CompileResult, TestResult
    from pallasite.engine.tuning.tune import TuneOptions, tune
    from pallasite.server.commands.cmd_tune import format_report

    from test_tune import _estimator, _read

    path, text = _read("matmul")
    make, _ = _estimator()

    async def compile_text(configured):
        return CompileResult.passed("v5e")

    async def test_text(configured):
        return TestResult.wrong("output 0: 12 of 262144 elements outside atol=0.02, rtol=0.02")

    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=1), make(path, text), compiler=compile_text,
                              tester=test_text))
    refused = [line for line in format_report(report).splitlines() if line.startswith("  refused ")]
    assert refused and refused[0].endswith("compiled for v5e (tiers 0,1,2); the judge's test: wrong: output 0: 12 of "
                                           "262144 elements outside atol=0.02, rtol=0.02"), refused


# --------------------------------------------------------------------------- 2. tolerances a task can state


@pytest.mark.pipeline
def test_a_jaxbench_f32_matmul_is_held_to_its_benchmarks_tolerance_or_the_one_it_states(tmp_path):
    """Before: a correct K-blocked f32 matmul was "compiled, wrong" in eval (about 1,070 of 262,144 elements outside
    atol=1e-5 by accumulation order alone), a TOLERANCE in baseline.py was ignored, and eval's text said only
    "compiled, wrong"."""
    tasks = tmp_path / "tasks"
    shutil.copytree(NEWCOMER / "jaxbench_f32_matmul", tasks / "mm")
    done = _cli(tmp_path, "eval", "tasks")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mm: compiled, correct" in done.stderr, done.stderr  # JAXBench's own atol=rtol=1e-2
    baseline = tasks / "mm" / "baseline.py"
    baseline.write_text(baseline.read_text() + '\n\nTOLERANCE = {"atol": 1e-5, "rtol": 1e-5}\n')
    shutil.rmtree(tmp_path / ".pallasite")
    done = _cli(tmp_path, "eval", "tasks")
    out = done.stdout
    assert "not correct, with the evidence:" in out, out
    (line,) = [x for x in out.splitlines() if x.startswith("  mm (files): ")]
    assert line.startswith("  mm (files): compiled, wrong: wrong_result: output 0: ") and \
        "outside atol=1e-05, rtol=1e-05 (the task's TOLERANCE in baseline.py) of the reference" in line, line


def test_where_a_tolerance_comes_from(tmp_path):
    import numpy as np

    from pallasite.runner.tier3.interpret_compare import tolerance_for
    from pallasite.runner.tasks.task_types import RuntimeTask
    from pallasite.runner.tasks.tasks_runtime import stated_tolerance

    out = (np.linspace(-3, 3, 64, dtype=np.float32),)
    native = RuntimeTask(name="f", entry=len, inputs=None)
    assert tolerance_for(native, out) == (1e-5, 1e-5)
    assert tolerance_for(native, out).source == "the float32 default; a task states its own with TOLERANCE"
    bench = RuntimeTask(name="workload", entry=len, inputs=None, format="jaxbench")
    assert tolerance_for(bench, out) == (1e-2, 1e-2) and "JAXBench's own default" in tolerance_for(bench, out).source
    tiny = (np.linspace(-3e-3, 3e-3, 64, dtype=np.float32),)  # zeros would pass atol=1e-2: taken relative
    assert tolerance_for(bench, tiny)[0] == pytest.approx(3e-5)
    assert "atol relative to the largest output, 0.003" in tolerance_for(bench, tiny).source

    class Baseline:  # the native spelling in a JAXBench task file; CONFIG's atol/rtol are JAXBench's unread notes
        CONFIG = {"name": "gemm", "M": 512, "atol": 1e-3, "rtol": 1e-3}
        TOLERANCE = {"atol": 1e-4, "rtol": 2e-3}
    assert stated_tolerance(Baseline, "baseline.py") == ({"atol": 1e-4, "rtol": 2e-3},
                                                         "the task's TOLERANCE in baseline.py")
    del Baseline.TOLERANCE
    assert stated_tolerance(Baseline, "baseline.py") == (None, None)


# --------------------------------------------------------------------------- 3. a grid that drops a tail, at tier 0


def test_a_grid_that_drops_the_tail_of_k_is_said_at_the_constant(tmp_path):
    """Before: BK = 384 over K = 1024 (k // BK = 2 steps reach 768) was "compiled for v6e"; only --tiers 0-3 said
    PLS304 at the pallas_call, hinting at accumulator initialisation."""
    shutil.copy(NEWCOMER / "tail_dropped_k.py", tmp_path / "mm.py")
    done = _cli(tmp_path, "check", "mm.py", "--tiers", "0")
    first = done.stdout.splitlines()[0]
    assert first == ("mm.py:10:6: warning[PLS022]: grid entry k // BK = 1024 // 384 = 2 steps: blocks of 384 along "
                     "dim 1 of x (in_specs[0]), an array of (512, 1024), reach 768 of its 1024; the last 256 are never "
                     "read (floor division drops the tail). Use a BK that divides 1024 (e.g. 256 or 512), or "
                     "pl.cdiv(k, BK) steps with the tail masked. (tier 0, pallasite rules)"), done.stdout
    assert "mm.py:30:33: the grid entry k // BK: 2 steps" in done.stdout


def test_an_output_tail_never_written_is_an_error_and_a_block_past_the_array_never_runs(tmp_path):
    shutil.copy(NEWCOMER / "tail_dropped_n.py", tmp_path / "mm.py")
    done = _cli(tmp_path, "check", "mm.py", "--tiers", "0")
    assert done.returncode == 1, done.stdout
    assert done.stdout.startswith("mm.py:9:6: error[PLS021]: grid entry n // BN = 512 // 384 = 1 step: blocks of 384 "
                                  "along dim 1 of out_specs[0], an array of (512, 512), reach 384 of its 512; the "
                                  "last 128 are never written"), done.stdout
    from pallasite.analysis.tier0 import analyze

    text = (NEWCOMER / "floor_grid_matmul.py").read_text().replace("BN = 256", "BN = 1024")
    (found,) = [f for f in analyze(text, "mm.py").findings if f.code == "PLS021"]
    assert "n // BN = 512 // 1024 = 0 steps: the kernel never runs" in found.message
    assert "reach 0 of its 512; the last 512 are never written" in found.message
    assert [f.code for f in analyze((NEWCOMER / "floor_grid_matmul.py").read_text(), "mm.py").findings] == []


def test_explain_knows_the_grid_coverage_codes(tmp_path):
    for code, words in (("PLS021", "never written"), ("PLS022", "never read")):
        done = _cli(tmp_path, "explain", code)
        assert done.returncode == 0 and words in done.stdout, done.stdout + done.stderr


# --------------------------------------------------------------------------- 4. compiler messages without raw HLO


def test_without_hlo_keeps_the_sentence_and_is_the_same_on_every_run():
    from pallasite.engine.findings.classify import without_hlo

    said = ("E1001: CompileTimeScopedVmemOom: Ran out of memory in memory space vmem while allocating on stack for "
            "%mm.1 = f32[4096,512]{1,0:T(8,128)} custom-call(%x.1, %y.1), custom_call_target=\"tpu_custom_call\", "
            "operand_layout_constraints={f32[2048,4096]{1,0}, f32[4096,512]{1,0}}, frontend_attributes="
            "{kernel_metadata={}}, metadata={op_name=\"jit(mm)/pallas_call\" stack_frame_id=16}. Scoped allocation "
            "with size 44.00M and limit 32.00M exceeded scoped vmem limit by 12.00M. It should not be possible to "
            "run out of scoped vmem - ")
    clean = without_hlo(said)
    assert clean == ("E1001: CompileTimeScopedVmemOom: Ran out of memory in memory space vmem while allocating on "
                     "stack for the Mosaic kernel %mm.1. Scoped allocation with size 44.00M and limit 32.00M exceeded "
                     "scoped vmem limit by 12.00M. It should not be possible to run out of scoped vmem")
    assert without_hlo(said.replace("stack_frame_id=16", "stack_frame_id=23")) == clean


@pytest.mark.pipeline
@pytest.mark.tpu_compiler
def test_a_vmem_overflow_reads_as_the_compilers_sentence_with_the_full_text_in_its_detail(tmp_path):
    """Before: PLS201's message embedded libtpu's whole custom-call line (layouts, frontend attributes, a
    stack_frame_id that changes between runs)."""
    pytest.importorskip("libtpu")
    import json

    shutil.copy(NEWCOMER / "vmem_overflow.py", tmp_path / "mm.py")
    done = _cli(tmp_path, "check", "mm.py", "--no-store", "--format", "json")
    (found,) = [f for f in json.loads(done.stdout)["files"][0]["findings"] if f["code"] == "PLS201"]
    message = found["message"]
    assert "while allocating on stack for the Mosaic kernel %matmul.1. Scoped allocation with size 44.00M and " \
           "limit 32.00M exceeded scoped vmem limit by 12.00M" in message, message
    for raw in ("custom-call(", "stack_frame_id", "operand_layout_constraints", "{1,0:T(8,128)}", " -)"):
        assert raw not in message, message
    assert "stack_frame_id" in found["detail"] and "custom-call(" in found["detail"]  # the whole text, --details


# --------------------------------------------------------------------------- 5. progress, the table, the pointers


def test_progress_is_a_rewritten_line_on_a_terminal_and_nothing_in_a_log():
    """Before: tune wrote its bar to stderr whatever it was (15 KB of \\r[####...] in a log)."""
    import io

    from pallasite.server.commands.console import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log, tty = io.StringIO(), Terminal()
    for stream in (log, tty):
        shown = Progress(stream)
        shown.say("estimating for v6e: 3 of 125", 0.5)
        shown.close()
    assert log.getvalue() == ""
    assert tty.getvalue().startswith("\r[##########          ] estimating for v6e: 3 of 125")
    assert tty.getvalue().endswith("\r")  # cleared before the report
    quiet = Terminal()
    Progress(quiet, quiet=True).say("x", 0.1)
    assert quiet.getvalue() == ""


def test_tunes_table_cuts_a_verdict_at_a_word():
    """Before: "... the judge's test runs on the confi" (cut at 70 characters, mid-word)."""
    from pallasite.server.commands.cmd_tune import clip

    said = "compiled, not verified: not tested: the judge's test runs on the configurations tune walks to"
    assert clip(said, 70) == "compiled, not verified: not tested: the judge's test runs on the..."
    assert clip("compiled, correct", 70) == "compiled, correct"


# --------------------------------------------------------------------------- 6. the small things


def test_a_py_file_that_is_not_python_is_an_error_for_check(tmp_path):
    """Before: exit 0 ("no pallas_call"), while tune said "`pallasite check` shows the error"."""
    (tmp_path / "notes.py").write_text("this is not python (\n  at all\n")
    done = _cli(tmp_path, "check", "notes.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("notes.py:1:20: error[PLS000]: Syntax error: '(' was never closed"), done.stdout


def test_check_of_an_empty_folder_says_nothing_was_checked_and_strict_fails(tmp_path):
    """Before: `check EMPTY_DIR --strict` exited 0, silently."""
    (tmp_path / "empty").mkdir()
    strict = _cli(tmp_path, "check", "empty", "--strict")
    assert strict.returncode == 1 and "error: nothing to check: no .py file in empty" in strict.stderr, strict.stderr
    plain = _cli(tmp_path, "check", "empty")
    assert plain.returncode == 0 and "warning: nothing to check: no .py file in empty" in plain.stderr


def test_a_tier_not_checked_is_never_called_passed(tmp_path):
    """Before: "tier 1 not checked: needs 'SCALE' ..." then "not compiled for v6e: tier 2 skipped: tier 1 failed
    (tiers 0,1 passed)"."""
    shutil.copy(NEWCOMER / "missing_import.py", tmp_path / "k.py")
    done = _cli(tmp_path, "check", "k.py", "--no-store")
    out = done.stdout
    assert "k.py: tier 0 ran; not fully checked: tier 1 not checked: needs 'SCALE'" in out, out
    assert "k.py: not compiled for v6e: tier 2 skipped: tier 1 not checked (tier 0 passed)" in out, out
    assert "tiers 0,1 passed" not in out and "tier 1 failed" not in out


@pytest.mark.pipeline
def test_an_interrupted_eval_leaves_no_earlier_output_as_its_own(tmp_path):
    """Before: Ctrl-C left the previous run's --output file in place, as if it were this run's."""
    from interrupting import interrupt_at

    shutil.copytree(DATA / "eval" / "add_tuned", tmp_path / "tasks" / "a_add")
    shutil.copytree(NEWCOMER / "z_slow_task", tmp_path / "tasks" / "z_slow")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "eval.json").write_text('{"eval_id": "an earlier run"}')
    command = [sys.executable, "-m", "pallasite.server.cli", "eval", "tasks", "--no-verify", "--target", "v5e",
               "--output", "eval.json"]
    done = interrupt_at(command, tmp_path, "files: 1/2 a_add: ")  # z_slow's import sleeps meanwhile
    assert done.returncode == 130, done.stdout + done.stderr
    assert not (tmp_path / "eval.json").exists()
    assert "interrupted before the end: eval.json not written (an earlier run's copy was removed" in done.stderr


@pytest.mark.pipeline
def test_profile_without_a_device_never_says_not_timed_beside_its_time(tmp_path):
    """Before: "time: 1.11 s per run" and then "note: not timed: shrink asks for the correctness checks only"."""
    shutil.copy(ROOT / "examples" / "add.py", tmp_path / "add.py")
    done = _cli(tmp_path, "profile", "add.py", "--runs", "1", "--no-store")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  time: " in done.stdout and "per run" in done.stdout, done.stdout
    assert "not timed" not in done.stdout, done.stdout


def test_fix_without_a_provider_says_what_to_give_on_the_command_line(tmp_path):
    """Before: "Set the 'agent.provider' setting in your editor's pallasite settings ...", no word of scripted."""
    import os

    shutil.copy(ROOT / "examples" / "bad_tiling.py", tmp_path / "k.py")
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY")}
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "fix", "k.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stderr
    assert "no LLM provider is configured: give `pallasite fix` a --provider" in said, said
    assert "`pallasite fix FILE --provider scripted --scripted-file replies.json`" in said
    assert "editor" not in said


def test_explain_resolves_libtpus_own_codes(tmp_path):
    """Before: `explain E1001` (libtpu's code inside PLS201's message) was "unknown finding code"."""
    for code, finding, name in (("E1001", "PLS201", "CompileTimeScopedVmemOom"),
                                ("E2002", "PLS204", "CompileTimeMosaicMisalignedBlockAndTiling"),
                                ("e2003", "PLS203", "CompileTimeMosaicUnprovenMemoryAccessAlignment")):
        done = _cli(tmp_path, "explain", code)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{code.upper()} ({name}) is libtpu's own error code; pallasite reports the "
                                      f"error as {finding}:\n\n{finding}: "), done.stdout
    unknown = _cli(tmp_path, "explain", "E9999")
    assert unknown.returncode == 2 and "of libtpu's own codes, explain knows E1001, E2002, E2003" in unknown.stderr


def test_tier3_says_which_tolerance_it_compared_at():
    """Tier 3's PLS304 names the tolerance and where it came from, as the judge's wrong_result does."""
    import numpy as np

    from pallasite.runner.tier3.interpret_compare import Tolerance, compare

    out, ref = (np.ones((8, 128), np.float32),), (np.full((8, 128), 1.5, np.float32),)
    (problem,) = compare(out, ref, Tolerance(1e-5, 1e-5, "the task's TOLERANCE in k.py"))
    assert problem["kind"] == "mismatch" and problem["source"] == "the task's TOLERANCE in k.py"
