"""On a device the judge runs the candidate's exported program, never its Python (issue 42, part B).

A stand-in device worker (engine/workers/standin.py: a real ``pallasite worker`` that plays an accelerator,
its JAX on the CPU) takes the device path: before it, a confined worker on an accelerator let the
candidate judge and time itself (``judged_by: the candidate's own process``), so patching the
comparison made "correct" of a wrong kernel. Now the candidate's process exports its program for
the shapes the judge names and ends; the judge deserializes it, checks it, runs and times it.
The user's file is tests/data/optimize/add.py; the candidates are in tests/data/judge_export/.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from pallasite.engine.workers import spawn

DATA = Path(__file__).parent / "data"
HERE = DATA / "judge_export"
USER = (DATA / "optimize" / "add.py").read_text()
RIGHT = (HERE / "right.py").read_text()
WRONG = (HERE / "wrong.py").read_text()
TAMPER = (DATA / "untrusted" / "tampering_preamble.py").read_text()
EXPORTED = "the judge"

needs_namespaces = pytest.mark.skipif(spawn.confinement_problem(sys.executable) is not None,
                                      reason=f"no confined worker here: {spawn.confinement_problem(sys.executable)}")


async def judged(config, tmp_path: Path, texts: list[str], trusted: bool = True, **options) -> list:
    from pallasite.engine.workers.client import WorkerClient
    from pallasite.engine.timing import TaskFiles, time_request

    user_file = tmp_path / "kernel.py"
    user_file.write_text(USER)
    results = []
    async with WorkerClient(config) as worker:
        for text in texts:
            params = time_request(TaskFiles(str(user_file)), "time", runs=3, warmup=1, text=text,
                                  trusted=(str(user_file), USER) if trusted else None)
            reply = await worker.request(dataclasses.replace(params, **options))
            assert reply.ok, reply.message
            results.append(reply.result)
    return results


def standin(**options):
    from pallasite.engine.workers.standin import standin_device_config

    return standin_device_config(timeout_s=240, **options)


def tricks(result) -> list[str]:
    return [r.trick for r in result.rejections]


@pytest.mark.pipeline
@needs_namespaces
async def test_on_a_standin_device_the_attacks_fail_and_only_the_exported_program_runs(tmp_path):
    clock = (HERE / "clock_preamble.py").read_text()
    forged = (HERE / "forged_reply_preamble.py").read_text()
    texts = [TAMPER + WRONG, clock + RIGHT, forged + WRONG, (HERE / "sleeper.py").read_text(), RIGHT]
    tampering, clocked, forging, sleeper, right = await judged(standin(), tmp_path, texts)
    for result in (tampering, clocked, forging, sleeper, right):
        assert result.judged_by == EXPORTED, result.judged_by
        assert result.judge.how == "exported program" and result.judge.candidate_imported is False
        assert result.judge.judge_pid != result.judge.candidate_pid
    # the comparison (numpy, pallasite's comparisons) and the estimator patched in the candidate's process
    assert tampering.verdict == "rejected" and tricks(tampering) == ["wrong_result"], tampering.rejections
    # every clock of the candidate's process stopped: the judge's are its own
    assert clocked.verdict == "ok", (clocked.error, clocked.rejections)
    assert min(clocked.candidate.samples_ns) > 1000 and min(clocked.reference.samples_ns) > 1000
    # a forged verdict written on the channel and stdout is not a program
    assert forging.verdict == "error" and forging.speedup is None and forging.candidate is None, forging
    assert "could not be loaded" in forging.error
    # right when tested, wrong when timed: one program is tested and timed, and checked again after timing
    assert sleeper.verdict == "ok" and sleeper.checks["timed_program_checked"] is True, sleeper.rejections
    assert right.verdict == "ok" and right.checks["extra_shape"]["checked"] is True
    assert right.candidate.median_ns > 0 and right.speedup["value"] > 0
    assert right.checks["module"]["bytes"] > 0 and right.checks["module"]["kernels"] == 1
    assert right.checks["export"]["candidate_s"] > 0


async def test_by_pid_the_candidates_python_never_runs_in_the_process_that_holds_the_device(tmp_path):
    """Opted in without a sandbox (the spy can then write where the test reads): every import of the
    candidate and every call of its entry happened in the candidate's process, never in the judge's."""
    log = tmp_path / "spy.log"
    spy = (HERE / "spy_preamble.py").read_text().replace("{log}", str(log))
    candidate = spy + RIGHT.replace("def add(x, y):\n", "def add(x, y):\n    _spy('call')\n", 1)
    (result,) = await judged(standin(allow_unconfined=True), tmp_path, [candidate])
    assert result.verdict == "ok", (result.error, result.rejections)
    events = [line.split() for line in log.read_text().splitlines()]
    assert {"import", "call"} <= {e for e, _ in events}, events
    pids = {int(p) for _, p in events}
    # the candidate's process is process 1 of a PID namespace of its own (runner/isolation/nest.py); the judge's
    # record names it as the judge sees it, another process than the judge
    assert pids == {1} and result.judge.isolation == "its own PID namespace, ended with it", (pids, result.judge)
    assert result.judge.judge_pid not in (1, result.judge.candidate_pid), result.judge
    assert result.judge.candidate_imported is False


@needs_namespaces
async def test_on_a_standin_device_a_request_without_the_users_file_is_refused_not_self_judged(tmp_path):
    (result,) = await judged(standin(), tmp_path, [TAMPER + WRONG], trusted=False)
    assert result.verdict == "error" and "not judged" in result.error, result
    assert result.judged_by != "the candidate's own process" and result.candidate is None


@needs_namespaces
async def test_on_cpu_the_same_flow_refuses_a_program_that_needs_host_callbacks_with_why(tmp_path):
    from pallasite.engine.workers.client import WorkerConfig

    printing = RIGHT.replace("def add(x, y):\n", "def add(x, y):\n    jax.debug.print('x {}', x[0, 0])\n", 1)
    calling = RIGHT.replace("    return pl.pallas_call(", "    x = jax.pure_callback(lambda a: a, x, x)\n"
                            "    return pl.pallas_call(", 1)
    printed, called, right = await judged(WorkerConfig(confine=True, timeout_s=240), tmp_path,
                                          [printing, calling, RIGHT], judge="export")
    for result in (printed, called):
        assert result.verdict == "rejected" and tricks(result) == ["not_exportable"], result
        assert "host callbacks" in result.rejections[0].message
    assert right.verdict == "ok" and right.judged_by == EXPORTED and right.device["platform"] == "cpu"


def test_the_judge_refuses_crafted_bytes_and_a_module_that_calls_back_into_python():
    """What the candidate's process sends is checked in the judge, whatever that process claims."""
    import jax
    import jax.numpy as jnp
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    from pallasite.runner.judging.module_check import Refused, verified
    from pallasite.runner.program.program_export import export_program

    named = [[[8, 128], "float32"]]
    exported = export_program(lambda x: x * 2, named, "TPU v6 lite")
    module, seen = verified(exported.serialize(), named)
    assert seen["custom_calls"] == [] and module.in_avals == exported.in_avals
    text = exported.mlir_module().replace("return", "%cb = stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg1) "
                                          ": (tensor<8x128xf32>) -> tensor<8x128xf32>\n    return", 1)
    with mlir.make_ir_context():
        crafted = dataclasses.replace(exported, mlir_module_serialized=mlir.module_to_bytecode(ir.Module.parse(text)))
    with pytest.raises(Refused, match="host callbacks.*xla_ffi_python_cpu_callback"):
        verified(crafted.serialize(), named)
    with pytest.raises(Refused, match="not a serialized jax.export module"):
        verified(b"\x00" * 64, named)
    with pytest.raises(Refused, match="not the inputs the judge named"):
        verified(exported.serialize(), [[[16, 128], "float32"]])
    cpu_only = jax.export.export(jax.jit(lambda x: x * 2), platforms=("cpu",))(jax.ShapeDtypeStruct((8, 128), jnp.float32))
    with pytest.raises(Refused, match="not for the TPU"):
        verified(cpu_only.serialize(), named)
    lapack = exported.mlir_module().replace("return", "%lu = stablehlo.custom_call @lapack_sgetrf_ffi(%arg1) "
                                            ": (tensor<8x128xf32>) -> tensor<8x128xf32>\n    return", 1)
    with mlir.make_ir_context():
        crafted = dataclasses.replace(exported, mlir_module_serialized=mlir.module_to_bytecode(ir.Module.parse(lapack)))
    with pytest.raises(Refused, match="lapack_sgetrf_ffi, outside the custom calls"):
        verified(crafted.serialize(), named)


def test_for_a_tpu_judge_the_candidates_process_lowers_the_kernel_with_mosaic_and_the_judge_counts_it():
    """What a TPU judge receives, made on this CPU host: the pallas_call as a Mosaic kernel call; a
    program without one is seen as such by the judge (which then rejects it as no_pallas_call)."""
    import importlib.util
    import types

    import jax
    import jax.numpy as jnp

    from pallasite.runner.judging.module_check import verified
    from pallasite.runner.program.program_export import export_program

    spec = importlib.util.spec_from_file_location("judge_export_right", HERE / "right.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    named = [[[256, 128], "float32"]] * 2
    for entry, kernels in ((module.add, 1), (module.reference, 0)):
        blob = export_program(entry, named, "TPU v5 lite", platforms=("tpu",)).serialize()
        _, seen = verified(blob, named)
        assert seen["kernels"] == kernels and seen["platforms"] == ["tpu"], seen


@needs_namespaces
async def test_on_a_standin_device_model_code_is_not_profiled_where_the_device_is_held(tmp_path):
    from pallasite.engine.workers.client import WorkerClient
    from pallasite.engine.timing import TaskFiles, time_request

    user_file = tmp_path / "kernel.py"
    user_file.write_text(USER)
    async with WorkerClient(standin()) as worker:
        reply = await worker.request(time_request(TaskFiles(str(user_file)), "profile", runs=1, warmup=1,
                                                  text=TAMPER + WRONG))
    assert reply.ok, reply.message
    assert reply.result.verdict == "error" and "not profiled" in reply.result.error, reply.result


@pytest.mark.pipeline
async def test_where_a_chip_would_be_taken_every_candidate_process_starts_only_the_cpu_backend(tmp_path, monkeypatch):
    """A worker whose JAX_PLATFORMS is not "cpu" (a TPU host's): the candidate's processes of ``time``
    and ``check`` are set to jax's CPU backend before the candidate runs, so model code never holds
    the chip (the check's candidate process kept the worker's platforms before)."""
    # platforms=None keeps this process's JAX_PLATFORMS, and CI (or a test module imported before this
    # one: test_cost_model, test_tune...) sets it to "cpu", which made this a CPU worker judged on the
    # local path; a TPU host's worker has it unset
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.engine.sources import sources_for
    from pallasite.engine.timing import TaskFiles, time_request
    from pallasite.wire.messages import CheckParams

    log = tmp_path / "platforms.log"
    # each candidate's process by its start time (each is process 1 of a PID namespace of its own, and a namespace's
    # inode number is reused once the namespace is gone, so neither pid nor namespace tells two processes apart)
    spy = (f"import jax as _j\nopen({str(log)!r}, 'a').write(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19] "
           f"+ ' ' + str(_j.config.jax_platforms) + '\\n')\n")
    user_file = tmp_path / "kernel.py"
    user_file.write_text(USER)
    config = WorkerConfig(confine=True, platforms=None, worker_args=("--allow-unconfined",), timeout_s=300)
    async with WorkerClient(config) as worker:
        timed = await worker.request(time_request(TaskFiles(str(user_file)), "time", runs=2, warmup=1,
                                                  text=spy + RIGHT, trusted=(str(user_file), USER)))
        checked = await worker.request(CheckParams(source=sources_for(str(user_file), spy + RIGHT), tiers=(1, 2),
                                                   chip="v5e"))
    assert timed.ok and checked.ok, (timed.message, checked.message)
    assert timed.result.verdict == "ok" and timed.result.judged_by == EXPORTED, timed.result
    seen = [line.split() for line in log.read_text().splitlines()]
    assert len({pid for pid, _ in seen}) == 2 and {platforms for _, platforms in seen} == {"cpu"}, seen


@pytest.mark.pipeline
@needs_namespaces
async def test_on_a_standin_device_a_jaxbench_kernel_is_checked_at_a_second_config_size(tmp_path):
    """JAXBench's layout (CONFIG read when called): the candidate's process exports the second shape
    with its CONFIG at that size, the judge runs baseline.py with its own CONFIG there; a kernel right
    only at the example size is shape_specialised (it passed when the second shape was skipped)."""
    from pallasite.engine.workers.client import WorkerClient
    from pallasite.engine.timing import TaskFiles, time_request

    folder = DATA / "timing" / "jaxbench_global"
    results = []
    async with WorkerClient(standin()) as worker:
        for name in ("optimized", "specialised"):
            files = TaskFiles(str(folder / f"{name}.py"), str(folder / "baseline.py"), "jaxbench")
            reply = await worker.request(time_request(files, "time", runs=2, warmup=1,
                                                      text=(folder / f"{name}.py").read_text()))
            assert reply.ok, reply.message
            results.append(reply.result)
    right, specialised = results
    assert right.verdict == "ok" and right.judged_by == EXPORTED, (right.error, right.rejections)
    assert right.checks["extra_shape"] == {"checked": True, "how": "CONFIG with cols=256, rows=512",
                                           "inputs": [[[512, 256], "float32"], [[512, 256], "float32"]]}
    assert specialised.verdict == "rejected" and tricks(specialised) == ["shape_specialised"], specialised
