"""The one judge of candidates, for every command: compiled, correct, how fast, and who judged it.

``Judge`` is built once per run (agents/run_setup.RunSetup.judge) and holds everything that decides how
a candidate is judged, and nothing else does:

- the check options (the run's only ones: the project's severity overrides, time and memory limits,
  the worker's interpreter, tier 2 always for the chip), the chip, the device (an engine device pool or
  an open device backend; None: estimates and interpret-mode tests on job workers) and confinement
  (``confined``: model-written code runs only in the engine's confined workers);
- the trusted side (``Trusted``): the user's original with its frozen tests (optimize, search, fix,
  tune), or a task's reference (JAXBench ``baseline.py``, MaxKernel's, eval);
- a memo by candidate text (two nodes proposing the same text wait for one run).

Its four methods are the phases, each returning the one typed result of analysis/verdict.py:
``compile(text) -> CompileResult`` (the checker's tiers for the chip), ``test(text) -> TestResult`` (the
``time`` op's integrity checks: interpret mode at reduced shapes, or the device), ``time(text) ->
Timed`` (analysis/timed.py: the cost model's estimate, or the device median; with the reference's figure where the same
request made one) and ``verdict(text) -> Verdict`` (the three combined once, with ``judged_by``: which
process compared and timed the candidate, as the worker said). The verified fixer's proposals go through it
too (``check``: the checker's whole report at the fix's tiers). What a run does with its judge besides
judging - tune's estimator and timer for a file's configurations, optimize's autotune phase, the device
profile - is engine/tuning/judge_tune.py, over this judge's phases.

Client side: no JAX; the worker side of the ``time`` request is runner/judging/judge.py.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ..analysis.timed import Timed
from ..analysis.types import to_json
from ..analysis.verdict import (COST_MODEL, CompileResult, JudgedBy, TestResult, Timing, Verdict, compile_result,
                                judge_tiers, timing_of)

from .guards import TEST_NAMES, frozen_names, tampering
from .judge_phase import (UNFINISHED, freeze, frozen_parts, json_short, judged_by, lower_bound, profile_text,
                          test_result)


@dataclass(frozen=True)
class Trusted:
    """The trusted side: what every candidate is compared against. ``path``: where a candidate's text is
    checked and run (the user's file, or the task's candidate file); ``original``: the user's original
    (or the task's reference text); ``frozen``: test definitions spliced over each candidate's own
    (``freeze``); ``own``: (path, text) of the file the worker's judge loads the task from, never the
    candidate's copy; ``reference_path``/``layout``: a task's separate reference (JAXBench baseline.py);
    ``task``: an eval task (its speedup is against the task's reference, estimated by the same model)."""

    path: str
    original: str
    frozen: Mapping[str, str] = field(default_factory=dict)
    names: tuple[str, ...] = TEST_NAMES
    own: tuple[str, str] | None = None
    reference_path: str | None = None
    layout: str = "file"
    task: bool = False
    tests: str | None = None  # the written tests frozen with the original's (agents/test_writer.py)

    @classmethod
    def of_file(cls, path: str, original: str, tests: str | None = None) -> "Trusted":
        """The user's file: its own test definitions, plus the written ``tests`` appended whole."""
        names = frozen_names(path)  # a JAXBench candidate's own workload is its kernel, not a test
        base = frozen_parts(original, names)
        frozen = {**base, **({"__tests__": tests} if tests else {})}
        return cls(path, original, frozen, names, (path, freeze(original, frozen)), tests=tests)

    @classmethod
    def of_task(cls, task: Any) -> "Trusted":
        """An eval task (engine/eval_tasks.py): its candidate file's place, its reference file; a native
        task's own file is what its judge loads (JAXBench's baseline.py travels as the reference)."""
        path = task.candidate_path or os.path.join(task.folder, "optimized.py")
        own = None
        if task.layout not in ("jaxbench", "maxkernel"):
            try:
                with open(path, encoding="utf-8") as f:
                    own = (path, f.read())
            except OSError:
                own = None
        layout = task.layout if task.layout in ("jaxbench", "maxkernel") else "file"
        # the judge's trusted side: JAXBench's baseline.py, MaxKernel's reference.py (its computation on the
        # kernel_task.yaml's inputs: runner/tasks/maxkernel.reference_tasks)
        reference_path = task.reference_path if task.layout in ("jaxbench", "maxkernel") else None
        return cls(path, task.reference_text(), {}, TEST_NAMES, own, reference_path, layout, task=True)

    def with_tests(self, tests: str | None) -> "Trusted":
        return Trusted.of_file(self.path, self.original, tests) if not self.task else self

    def text(self, candidate: str) -> str:
        """The candidate as the worker runs it: the frozen tests over its own."""
        return freeze(candidate, dict(self.frozen))

    def files(self) -> Any:
        from .timing import TaskFiles

        return TaskFiles(self.path, self.reference_path, self.layout)

    def is_reference(self, text: str) -> bool:
        """Whether ``text`` is the trusted side's own (the original, the task's reference)."""
        return text == self.original


class Judge:
    """See the module docstring."""

    def __init__(self, engine: Any, options: Any, trusted: Trusted, *, chip: str | None = None, device: Any = None,
                 where: str = "", confined: bool = True, verify: bool = True, timeout_s: float = 300.0,
                 runs: int = 20, device_slot: asyncio.Semaphore | None = None, checker: Any = None) -> None:
        if dataclasses.is_dataclass(options) and hasattr(options, "tiers"):  # compiled means tier 2 ran for the chip
            options = dataclasses.replace(options, tiers=judge_tiers(options.tiers))
        self.engine, self.options, self.trusted = engine, options, trusted
        self.chip = chip or getattr(options, "target", "")
        self.device, self.where, self.confined, self.verify = device, where, confined, verify
        self.device_name = str(getattr(device, "kind", "") or "device") if device is not None else "estimate"
        self.timeout_s, self.runs = timeout_s, runs
        self._slot = device_slot  # shared by every judge of a run (eval's tasks); else one per pool worker
        self.method = f"device ({where or 'device'})" if device is not None else f"estimate ({self.chip})"
        self.device_kind = ""
        self._memo: dict[tuple[str, str], Any] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._reports: dict[str, Any] = {}  # candidate text -> its checker report (what the fixer reads)
        self._checker = checker  # the checker ``check`` uses (the editor's session checker); else the engine's

    # ------------------------------------------------------------------ the run's resources

    def with_tests(self, tests: str | None) -> "Judge":
        """The same judge with ``tests`` as the written tests (the original's own stay); a fresh memo."""
        other = copy.copy(self)
        other.trusted = self.trusted.with_tests(tests)
        other._memo, other._locks, other._reports = {}, {}, {}
        return other

    def backend(self) -> Any:
        """The engine's job workers for this run's candidates (confined for model-written code)."""
        return self.engine.backend(self.options, untrusted=self.confined)

    def device_backend(self) -> Any:
        """The run's one open, queued device backend (``Engine.device`` for settings, opened once)."""
        if self.device is not None and not hasattr(self.device, "request"):  # BackendSettings: the engine's pool
            from .workers.device import candidate_config

            self.device = self.engine.device(self.device, candidate_config(
                getattr(self.options, "memory_mb", 8192), self.timeout_s,
                allow_unconfined=getattr(self.options, "allow_unconfined", False)))
        return self.device

    @property
    def device_slot(self) -> asyncio.Semaphore:
        """One device job per worker of the pool at a time, whatever the tasks and methods."""
        if self._slot is None:
            self._slot = asyncio.Semaphore(max(1, int(getattr(self.device_backend(), "size", 1) or 1)))
        return self._slot

    def report(self, text: str) -> Any:
        """The checker report of ``text``'s last compile (the fixer's input), or None."""
        return self._reports.get(text)

    async def _once(self, kind: str, text: str, make: Callable[[], Awaitable[Any]]) -> Any:
        key = (kind, text)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # two nodes proposing the same text wait for one run
            if key not in self._memo:
                self._memo[key] = await make()
        return self._memo[key]

    # ------------------------------------------------------------------ the phases

    async def compile(self, text: str) -> CompileResult:
        """The checker's tiers 0-2 for the chip on the candidate (frozen tests spliced in), once per text; for
        model-written code tier 2 compiles the module the judge tested and priced (its ``time`` request comes
        first), so the program that compiled is the program that ran and was priced."""
        return await self._once("compile", text, lambda: self._compile(text))

    async def _compile(self, text: str) -> CompileResult:
        try:
            compile(text, self.trusted.path, "exec")
        except SyntaxError as err:
            return CompileResult.failed(f"SyntaxError: {err.msg} (line {err.lineno})", chip=self.chip)
        if self.trusted.frozen:
            changed = tampering("\n\n".join(self.trusted.frozen.values()), text, self.trusted.names)
            if changed:
                why = (f"the candidate {'; '.join(changed)}: the tests are frozen; keep the file's inputs, reference "
                       "and tolerances as they are")
                return CompileResult.failed("changes the frozen tests", why, chip=self.chip)
        options = self.options
        if self.confined:  # tier 2 compiles the module the judge tests and prices, not the candidate's own lowering
            judged = await self._judged_module(text)
            if judged is not None:
                options = dataclasses.replace(options, judged_module=judged)
        report = await self.engine.check(self.trusted.path, options, self.trusted.text(text), purpose="job",
                                         store=False, untrusted=self.confined)
        self._reports[text] = report
        if len(self._reports) > 16:  # the fixer reads the latest ones
            self._reports.pop(next(iter(self._reports)))
        return compile_result(report, self.options.tiers, self.chip, not_checked=UNFINISHED)

    async def _judged_module(self, text: str) -> str | None:
        """The module the judge tested and priced for ``text`` (its ``time`` request, made once and kept for the
        test phase), as the check request carries it; None when the judge got no program (the check's own
        tiers then say why), and on a device, whose one slot is not spent on a candidate the tiers refuse (the
        device's time op compiles and runs the judged program on the TPU itself)."""
        import json

        if self.device is not None:
            return None
        reply = await self._interpret_reply(text)
        module = getattr(reply.result, "module", None) if reply.ok and reply.result is not None else None
        return json.dumps(module) if module else None

    async def test(self, text: str) -> TestResult:
        """The guarded test: on the device (the reply also times it), else the exported program in the CPU's
        interpreter at the judge's reduced sizes (the same request prices it)."""
        if not self.verify:
            return TestResult.not_verified("--no-verify")
        if self.device is not None:
            return test_result(await self._device_reply(text), f"the time op on {self.where or 'the device'}")
        return test_result(await self._interpret_reply(text))

    async def _interpret_reply(self, text: str) -> Any:
        """The one judged request per candidate without a device: its exported program tested at the judge's
        reduced sizes in the CPU's interpreter, and priced by the cost model for the chip (the judge's own
        figure: runner/judging/priced.py); with ``verify`` off, priced only."""
        from .timing import time_request

        async def run() -> Any:
            params = dataclasses.replace(time_request(self.trusted.files(), "time", runs=1, warmup=0, extra_shape=True,
                                                      text=self.trusted.text(text), trusted=self.trusted.own),
                                         shrink=True, chip=self.chip, reference_estimate=self.trusted.task,
                                         checks=self.verify)
            return await self.backend().request(params, purpose="job", timeout_s=self.timeout_s)
        return await self._once("interpret", text, run)

    async def _device_reply(self, text: str) -> Any:
        from .timing import time_request

        async def run() -> Any:
            params = time_request(self.trusted.files(), "time", runs=self.runs, warmup=2, extra_shape=True,
                                  text=self.trusted.text(text), trusted=self.trusted.own)
            async with self.device_slot:  # one device job per slot, whatever the tasks and methods
                return await self.device_backend().request(params, purpose="device", timeout_s=self.timeout_s)
        return await self._once("device", text, run)

    async def time(self, text: str) -> Timed:
        """The candidate's figure by the run's one method (see ``Timed``)."""
        if self.device is not None:
            return await self._device_time(text)
        return await self._once("estimate", text, lambda: self._estimate(text))

    async def _device_time(self, text: str) -> Timed:
        from .timing import device_measurement

        reply = await self._device_reply(text)
        if not reply.ok or reply.result is None:
            return Timed(None, why=str(reply.message or reply.status)[:2000])
        if reply.result.verdict != "ok":
            return Timed(None, why=f"not timed: {str(reply.result.error or reply.result.verdict)[:2000]}")
        # the figures as the worker reported them (keyed by its device kind and versions); one that is not a
        # device timing (a CPU worker's interpret/host time) keeps its provenance, so it never ranks or divides
        cand, ref = timing_of(reply.result.candidate), timing_of(reply.result.reference)
        m, why = device_measurement(reply.result)
        if m is None:
            return Timed(cand, ref, why or "not a device timing")
        self.device_kind = m.device_kind or self.device_kind
        return Timed(cand, ref, summary=f"{m.median_ns / 1e3:.1f} us median")

    async def _estimate(self, text: str) -> Timed:
        """The judge's cost-model estimate of the candidate's exported program for the chip (and, for a task,
        of its reference by the same model), from the same request that tested it. A candidate whose estimate
        leaves its manual DMAs out (a lower bound) is not ranked against an original whose traffic is counted."""
        from .estimates import method_text, pair

        reply = await self._interpret_reply(text)
        result = reply.result if reply.ok else None
        figures = getattr(result, "estimate", None) if result is not None else None
        if not figures:
            why = (reply.message or reply.status) if not reply.ok else (getattr(result, "error", None) or
                                                                          "the judge made no estimate")
            return Timed(None, why=f"not estimated: {str(why)[:2000]}")
        from ..analysis.types import CostEstimate, from_json

        est = from_json(CostEstimate, figures["candidate"])
        if self.trusted.task:
            paired = pair(est, figures.get("reference"), self.chip)
            return self._paired(paired, est)
        if est.status != "ok" or not est.seconds:
            return Timed(None, why=f"not estimated: {est.error or 'no estimate'}")
        lower = lower_bound(est)
        if not self.trusted.is_reference(text) and lower and not (await self.time(self.trusted.original)).lower_bound:
            return Timed(None, lower_bound=True, why=(
                "not ranked: the estimate is a lower bound: the cost model could only count part of the "
                "candidate's traffic or work, while the original's is counted, so it cannot rank it against the "
                "original. Time it on a device (--backend local|ssh|ray)."))
        caveat = "; lower bound: part of its traffic or work could only be bounded from below" if lower else ""
        interval = tuple(est.interval) if est.interval else None
        timing = Timing(est.seconds, "estimate", self.chip, est.model or COST_MODEL,
                        method_text(est.label, est.bound, est.factors, interval=interval, rests_on=est.rests_on)
                        + "; priced by the judge from the exported program", interval=interval)
        return Timed(timing, profile="profile (cost model, not a device profile): " + profile_text(est),
                     lower_bound=lower, summary=f"{est.seconds * 1e6:.2f} us, {est.bound}-bound{caveat}")

    def _paired(self, paired: Any, est: Any) -> Timed:
        """(candidate, reference) by one model for a task: the reference is the baseline."""
        cand = paired.kernel_timing(self.chip, est.model or COST_MODEL)  # with its interval
        ref = paired.reference_timing(self.chip, est.model or COST_MODEL)
        why = "; ".join(w for w in (paired.why, paired.caveat) if w)
        bounds = ", ".join(f"{who} {b}-bound" for who, b in (("kernel", paired.kernel_bound),
                                                               ("reference", paired.reference_bound)) if b)
        return Timed(cand, ref, why, summary=(f"{cand.seconds * 1e6:.2f} us" + (f" ({bounds})" if bounds else ""))
                     if cand else "")

    def test_reply(self, text: str) -> Any:
        """The ``time`` reply's result ``text`` was tested by (its checks: shapes, second shape), or None."""
        for kind in ("device", "interpret"):
            reply = self._memo.get((kind, text))
            if reply is not None:
                return reply.result if reply.ok else None
        return None

    def judged_by(self, text: str) -> JudgedBy:
        """Who compared and timed ``text`` (the judge, or unknown: not tested)."""
        for kind in ("device", "interpret"):
            reply = self._memo.get((kind, text))
            if reply is not None:
                return judged_by(reply)
        return JudgedBy.UNKNOWN

    def reference_timing(self) -> Timing | None:
        """The trusted side's figure where a request made one beside a candidate (eval's reference)."""
        for (kind, _), value in self._memo.items():
            if kind == "estimate" and isinstance(value, Timed) and value.reference is not None:
                return value.reference
            if kind == "device" and getattr(value, "ok", False) and value.result is not None:
                ref = timing_of(value.result.reference)
                if ref is not None and ref.provenance == "device":
                    return ref
        return None

    async def verdict(self, text: str) -> Verdict:
        """The candidate's verdict: compiled for the chip, then the guarded test, then the figure."""
        compiled = await self.compile(text)
        if compiled.ok is not True:
            return Verdict(compiled, TestResult.not_verified("not compiled for the chip"))
        test = await self.test(text)
        # eval shows a wrong candidate's estimate pair too (never a speedup)
        timed = await self.time(text) if test.outcome != "wrong" or self.trusted.task else Timed(None)
        if timed.why and test.outcome == "ok" and self.device is None and self.trusted.task:
            test = dataclasses.replace(test, why=f"{test.why}; {timed.why}")
        return Verdict(compiled, test, timed.candidate, judged_by=self.judged_by(text))

    async def check(self, text: str, tiers: Sequence[int]) -> Any:
        """The checker's whole report on a candidate at ``tiers`` (the verified fixer's ``verify``: the
        findings being fixed gone, no new error), with the run's options in confined workers and no results
        cache (a candidate's verdicts must not become the file's). A checker for the user's own (unconfined)
        code is refused: a proposal is model-written code."""
        from .checker import Checker

        checker = self._checker or self.engine.checker(self.trusted.path, self.options, purpose="job",
                                                       untrusted=self.confined)
        if not getattr(checker, "untrusted", False):
            raise ValueError("a proposed edit is model-written code: judge it with an untrusted checker "
                             "(Engine.checker(path, options, untrusted=True))")
        sibling = Checker(checker.options, client=checker.worker(), cache=None, purpose=checker.purpose,
                          untrusted=True)
        return await sibling.check(self.trusted.path, text, tiers=tuple(tiers))
