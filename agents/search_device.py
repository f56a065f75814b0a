"""The search's evaluator with a device: frozen tests and device timings on one open device backend.

``DeviceEvaluator`` is an optimize ``Evaluator`` (compile, test, measure) for a search or an
evaluation that times on a device backend kept open for the whole run (a ``RayBackend`` actor, an
ssh ``WorkerClient``, a local TPU worker, or tests/fake_backend.py in tests), rather than a new
worker per timing:

- ``compile``: the engine's checker tiers (deviceless, on job workers), through the estimate
  evaluator (agents/optimize_eval.EngineEvaluator);
- ``test``: the ``time`` op on the device with its integrity checks (fresh random inputs,
  NaN-prefilled outputs, unchanged inputs, the pallas_call really ran, an extra shape); the reply
  is kept, so ``measure`` of the same source costs no second device job;
- ``measure``: that reply's device median, labelled ``device (<device kind>)``. A reply whose
  timing is not a device timing (a CPU-only worker answers ``interpret``/``host``) or has no median
  fails the phase: CPU time never ranks a candidate.

The reference, inputs and tolerances are the ORIGINAL file's (``optimize_eval.freeze``).
"""

from __future__ import annotations

from typing import Any

from ..analysis.verdict import timing_of
from ..engine.timing import device_measurement

from .evaluator import BaseEvaluator, PhaseResult
from .optimize_eval import EngineEvaluator, test_phase


class DeviceEvaluator(BaseEvaluator):
    """An Evaluator without fix, tune or frozen-tests capabilities (see the module docstring)."""

    def __init__(self, engine: Any, path: str, original: str, options: Any, *, chip: str, device: Any,
                 where: str, timeout_s: float = 300.0, runs: int = 20) -> None:
        self.compiler = EngineEvaluator(engine, path, original, options, chip=chip, timeout_s=timeout_s)
        self.path, self.device, self.where, self.timeout_s, self.runs = path, device, where, timeout_s, runs
        self.method = f"device ({where})"
        self.device_kind = ""
        self._replies: dict[str, Any] = {}

    async def compile(self, source: str) -> PhaseResult:
        return await self.compiler.compile(source)

    async def _time(self, source: str, *, keep: bool) -> Any:
        """The device reply for ``source``: the one kept by its test (measure takes it), else a new job."""
        from ..engine.timing import TaskFiles, time_request

        if source in self._replies:
            return self._replies.pop(source)
        params = time_request(TaskFiles(self.path), "time", runs=self.runs, warmup=2, extra_shape=True,
                              text=self.compiler.frozen_text(source), trusted=self.compiler.trusted())
        reply = await self.device.request(params, purpose="device", timeout_s=self.timeout_s)
        if keep and reply.ok and reply.result is not None and reply.result.verdict == "ok":
            if len(self._replies) >= 64:  # candidates tested but never measured (a stopped run)
                self._replies.pop(next(iter(self._replies)))
            self._replies[source] = reply
        return reply

    async def test(self, source: str) -> PhaseResult:
        return test_phase(await self._time(source, keep=True), where=f"on {self.where}")

    async def measure(self, source: str) -> PhaseResult:
        reply = await self._time(source, keep=False)
        if not reply.ok or reply.result is None:
            return PhaseResult(False, "not timed", evidence=str(reply.message or reply.status)[:2000])
        if reply.result.verdict != "ok":
            return PhaseResult(False, "not timed: rejected by the integrity checks",
                               evidence=str(reply.result.error or reply.result.verdict)[:2000])
        m, why = device_measurement(reply.result)
        if m is None:
            return PhaseResult(False, "not a device timing", evidence=why)
        self.device_kind = m.device_kind or self.device_kind
        timing = timing_of(m)  # keyed by the device kind and versions the worker reported
        return PhaseResult(timing is not None, f"{m.median_ns / 1e3:.1f} us median", timing=timing)
