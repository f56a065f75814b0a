"""One model for a kernel and its reference: the reference's plain XLA ops counted by hand, the
kernel's wrapper ops counted by the same rule, and ``eval`` and ``tune`` giving one file one
estimated speedup (both through engine/estimates.pair)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from pallasite.analysis.types import chip_target  # noqa: E402
from pallasite.engine.checker import CheckOptions  # noqa: E402
from pallasite.engine.judge import Judge, Trusted  # noqa: E402
from pallasite.analysis.verdict import speedup  # noqa: E402
from pallasite.engine.eval_tasks import EvalTask  # noqa: E402
from pallasite.engine.tuning.tune import TuneOptions, tune  # noqa: E402
from pallasite.engine.tuning.tune_workers import worker_estimator  # noqa: E402
from pallasite.runner.program import cost_model  # noqa: E402
from pallasite.runner.program.program_price import price_program  # noqa: E402
from pallasite.runner.chip_probe import spec_from_jax  # noqa: E402
from pallasite.wire.messages import EstimateParams, TimeParams  # noqa: E402
from pallasite.runner.tune_ops import handle_estimate  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "tune")
V5E = spec_from_jax(chip_target("v5e"))


def test_reference_ops_move_what_each_fused_op_must_move():
    from pallasite.runner.program.module_read import read_module
    from pallasite.runner.program.module_xla import count_module_xla
    from pallasite.runner.program.program_price import export_for_chip

    def reference(x, w, b):  # a matmul, then bias + relu + cast fused into one output fusion
        h = jnp.dot(x, w, preferred_element_type=jnp.float32)
        return jax.nn.relu(h + b).astype(jnp.bfloat16)

    x = jax.ShapeDtypeStruct((256, 512), jnp.bfloat16)
    w = jax.ShapeDtypeStruct((512, 1024), jnp.bfloat16)
    b = jax.ShapeDtypeStruct((1024,), jnp.float32)
    exported, signature, _ = export_for_chip(reference, [x, w, b], V5E)
    ops = count_module_xla(read_module(exported, signature))
    dot = 256 * 512 * 2 + 512 * 1024 * 2 + 256 * 1024 * 4  # reads x, w; writes h (f32)
    fusion = 256 * 1024 * 4 + 1024 * 4 + 256 * 1024 * 2  # reads h, b; writes the bf16 output
    assert ops.hbm_bytes == dot + fusion
    assert ops.launches == 2 and ops.roots == ["dot_general", "fusion"]
    assert ops.mxu_flops == 2 * 256 * 512 * 1024
    assert ops.flops == ops.mxu_flops + 2 * 256 * 1024  # the add and the max


def test_reference_is_priced_by_the_same_formula_as_a_kernel():
    x = jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16)
    ref = cost_model.estimate_reference(jnp.matmul, [x, x], V5E, device=None)
    assert ref["model"] == cost_model.MODEL and "fused-op count" in ref["bytes_source"]
    f = cost_model.FACTORS  # the same fitted/assumed factors as a kernel's matmuls and traffic
    mxu = 2 * 1024 ** 3 / (V5E.bf16_flops * f.mxu_efficiency)
    memory = 3 * 1024 * 1024 * 2 / (V5E.hbm_bytes_per_s * f.hbm_efficiency)
    assert ref["seconds"] == pytest.approx(max(mxu, memory) + cost_model.LAUNCH_OVERHEAD_S, rel=1e-12)
    assert ref["bound"] == "compute"


def test_a_kernels_wrapper_ops_are_counted_too():
    def kernel_with_transpose(x, y):  # the matmul kernel fed a transposed operand: XLA moves y twice first
        from pallasite.runner.loader import user_module

        with user_module(os.path.join(DATA, "matmul.py")) as module:
            return module.matmul(x, y.T)

    x = jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16)
    yt = jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16)
    est = price_program(kernel_with_transpose, [x, yt], V5E)
    assert est.status == "ok", est.error
    assert est.xla_bytes == 2 * 1024 * 2048 * 2  # the transpose reads y and writes y.T


class InProcess:
    """A backend answering ``estimate`` and ``verify`` requests in this process."""

    @dataclass
    class Reply:
        ok: bool
        result: Any = None
        why: str | None = None

    async def request(self, params: Any, **_: Any) -> "InProcess.Reply":
        if isinstance(params, EstimateParams):
            return self.Reply(True, handle_estimate(params))
        if isinstance(params, TimeParams):  # the judge's one request per candidate (runner/judging/judge.py)
            from pallasite.runner.judging.judge import judged_time
            from pallasite.runner.measure.timing import plain_params
            from pallasite.wire.messages import time_result_from_plain

            return self.Reply(True, time_result_from_plain(judged_time(plain_params(params))))
        raise AssertionError(f"unexpected request {type(params).__name__}")


class OneBackend:
    """An engine whose every backend is ``backend`` (the judge's job workers)."""

    def __init__(self, backend: Any) -> None:
        self.one = backend

    def backend(self, options: Any, untrusted: bool = False) -> Any:
        return self.one


@pytest.mark.pipeline
def test_eval_and_tune_give_one_file_one_estimated_speedup():
    path = os.path.join(DATA, "matmul.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    backend = InProcess()
    task = EvalTask("matmul", DATA, "file", path, path)
    judge = Judge(OneBackend(backend), CheckOptions(target="v5e"), Trusted.of_task(task))
    timed = asyncio.run(judge.time(text))
    cand, ref, why = timed.candidate, timed.reference, timed.why
    assert cand is not None and ref is not None, why
    evaluated = speedup(ref, cand, baseline_name="the reference")
    options = TuneOptions(chip="v5e", verify=0)
    report = asyncio.run(tune(path, text, options, worker_estimator(backend, path, text, "v5e", None, timeout_s=60.0)))
    tuned = report.current_vs_reference
    assert tuned is not None and tuned.speedup is not None
    assert evaluated.value == tuned.speedup
    assert cand.label() == tuned.label == "estimate (pallasite roofline v5, v5e)"
    assert report.best_vs_reference.speedup >= tuned.speedup  # the best ranks at least as well as the file's
