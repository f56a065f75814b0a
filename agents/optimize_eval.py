"""The optimize loop's evaluator over the engine: the frozen tests and one timing method.

- ``compile``: the checker's tiers 0-2 for the chip (tier 2 always: without it nothing is compiled
  for the chip) on the candidate's text, in worker processes: a ``CompileResult``.
- ``test``: the ``time`` op's integrity checks (runner/timing.py): fresh random inputs twice,
  NaN-prefilled outputs, unchanged inputs, the pallas_call really ran and reached the output,
  and a second shape when the task allows one. Without a device backend it runs in TPU interpret
  mode on CPU (``runs=1``: correctness only; the CPU time is discarded).
- ``measure``: with a device backend the ``time`` op's device median (label ``device (<kind>)``);
  a reply that is not a device timing is refused, so CPU time never ranks. Without one the cost
  model's roofline estimate for the chip (``estimate (<chip>)``).

The reference, the inputs and the tolerances are the file's own and are read from the ORIGINAL
file: the candidate's text is checked with the original's ``example_inputs``/``reference`` spliced
back in (``freeze``), so a candidate cannot change its tests.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from ..analysis.types import to_json
from ..analysis.verdict import (COST_MODEL, CompileResult, TestResult, Timing, compile_result, judge_tiers,
                                        timing_of)
from ..engine.timing import device_measurement

from .evaluator import PhaseResult

from .guards import TEST_NAMES, frozen_names, tampering


def frozen_parts(original: str, names: tuple[str, ...] = TEST_NAMES) -> dict[str, str]:
    """The original file's test definitions (top-level ``def``/assignment of ``names``), by name."""
    import ast

    tree = ast.parse(original)
    lines = original.splitlines(keepends=True)
    out = {}
    for node in tree.body:
        defined = [node.name] if isinstance(node, (ast.FunctionDef,)) else \
            [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        for name in defined:
            if name in names:
                start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno]) - 1
                out[name] = "".join(lines[start:node.end_lineno])
    return out


FROZEN_MARK = "# --- frozen tests (pallasite optimize: from the original file) ---"
# Findings that mean the check did not finish (a crash, a time or memory limit): the compile phase fails.
NOT_CHECKED = ("PLS205", "PLS902", "PLS903", "PLS904")


def freeze(candidate: str, frozen: dict[str, str]) -> str:
    """The candidate with the original's test definitions: its own versions are dropped and the
    originals appended (the last definition wins in Python)."""
    if not frozen:
        return candidate
    return candidate.rstrip("\n") + f"\n\n\n{FROZEN_MARK}\n" + \
        "\n\n".join(text.rstrip("\n") for text in frozen.values()) + "\n"


def unfreeze(text: str) -> str:
    """The candidate's own part of a frozen text (what ``freeze`` appended dropped)."""
    head, mark, _ = text.partition(f"\n\n\n{FROZEN_MARK}\n")
    return head + "\n" if mark else text


def profile_text(est: Any) -> str:
    """The cost model's breakdown of one estimate, as the planner and the user read it."""
    def us(s: float | None) -> str:
        return f"{s * 1e6:.2f} us" if s is not None else "?"

    lines = [f"{est.label}: {us(est.seconds)}, {est.bound}-bound (compute {us(est.compute_s)}, memory "
             f"{us(est.memory_s)}, per-step overhead {us(est.overhead_s)})"]
    for call in est.calls[:4]:
        lines.append(f"  {call.kernel}: grid {tuple(call.grid)} ({call.steps} steps), VMEM {call.vmem_bytes / 1024:.0f} KiB"
                     f", HBM traffic {call.hbm_bytes / 2**20:.2f} MiB, {call.flops:.3g} flops ({call.mxu_flops:.3g} on the "
                     f"MXU, efficiency {call.mxu_efficiency:.2f})" + (f"; {'; '.join(call.notes[:2])}" if call.notes else ""))
    return "\n".join(lines)


def _sig(inputs: Any) -> str:
    return ", ".join(f"{dtype}{list(shape)}" for shape, dtype in inputs or ())


def test_result(reply: Any, where: str = "") -> TestResult:
    """The test phase's typed result from a ``time`` reply: "ok" (where and at which shapes), "wrong"
    (the integrity checks rejected it: the evidence), or "not verified" (the run could not run or
    finish: a crash, a limit, too big for interpret mode; never "wrong")."""
    if not reply.ok:
        return TestResult.not_verified(f"the test run failed ({reply.status}): {str(reply.why)[:300]}")
    result = reply.result
    if result.verdict == "error":
        return TestResult.not_verified(f"the test could not finish: {str(result.error or result.verdict)[:300]}")
    if result.verdict != "ok":
        tricks = "; ".join(f"{t.trick}: {t.message}" for t in result.rejections) or (result.error or result.verdict)
        return TestResult.wrong(str(tricks)[:2000], verified_at=(result.checks or {}).get("verified_at"))
    checks = result.checks or {}
    full = checks.get("full_inputs")
    return TestResult.ok(where or tested_where(result.provenance, checks),
                         verified_at=checks.get("verified_at") or (f"{_sig(checks.get('inputs'))} of {_sig(full)}"
                                                                   if full else None))


def test_phase(reply: Any, where: str = "") -> PhaseResult:
    """The test phase from a ``time`` reply (``test_result``), with what the loop records."""
    test = test_result(reply, where)
    if test.outcome == "ok":
        checks = reply.result.checks or {}
        return PhaseResult(True, f"matches the reference ({test.why})", test=test,
                           data={"checks": to_json(checks), "inputs": checks.get("inputs"),
                                 "full_inputs": checks.get("full_inputs"), "timed": reply.result.candidate is not None})
    summary = "rejected by the frozen tests" if test.outcome == "wrong" else "not verified"
    return PhaseResult(False, summary, evidence=test.why, test=test)


def tested_where(provenance: str | None, checks: dict) -> str:
    """Where and at which shapes the tests ran, for the phase summary (reduced shapes say so)."""
    where = "interpret mode on CPU" if provenance == "interpret" else (provenance or "?")
    text = f"{where} at {_sig(checks.get('inputs'))}"
    if checks.get("full_inputs"):
        text += f", reduced from {_sig(checks['full_inputs'])}"
    extra = checks.get("extra_shape") or {}
    if extra.get("checked"):
        text += f"; second shape {_sig(extra.get('inputs'))}"
    elif extra.get("why"):
        text += f"; no second shape ({extra['why']})"
    return text


def compile_phase(report: Any, tiers: Any, chip: str) -> PhaseResult:
    """"Compiled" from a checker report (the one meaning every command uses, analysis/verdict.compile_result):
    tier 2 ran for the chip with no error finding, and nothing stopped the check."""
    result = compile_result(report, tuple(tiers), chip, not_checked=NOT_CHECKED)
    return PhaseResult(result.ok is True, result.text(), evidence="" if result.ok else result.evidence,
                       compile=result)


def lower_bound(est: Any) -> bool:
    """Whether the cost model left part of the kernel's memory traffic out (operands in HBM moved by
    the kernel's own DMAs): then its time is a lower bound and a speedup from it an upper bound."""
    return any("pl.ANY" in note for call in est.calls for note in call.notes)


def json_short(data: dict) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in data.items()
                     if v is not None and not isinstance(v, (dict, list)))[:400]


class EngineEvaluator:
    """The Evaluator (agents/evaluator.py) over the engine, with every optional capability."""

    def __init__(self, engine: Any, path: str, original: str, options: Any, *, chip: str = "v6e",
                 device: Any = None, timeout_s: float = 300.0, fixer: Any = None,
                 tests: str | None = None) -> None:
        if dataclasses.is_dataclass(options) and hasattr(options, "tiers"):  # compiled means tier 2 ran for the chip
            options = dataclasses.replace(options, tiers=judge_tiers(options.tiers))
        self.engine, self.path, self.options, self.chip = engine, path, options, chip
        self.device, self.timeout_s = device, timeout_s
        self.fixer = fixer  # the provider the verified fixer asks in the compile-fix rounds (None: no fixing)
        self._reports: dict[str, Any] = {}  # candidate source -> its last checker report (what fix reads)
        # the frozen tests: the original's own, plus the test writer's approved text (agents/test_writer.py),
        # appended whole (its imports too) after them
        self.original = original
        self._original_lower_bound: bool | None = None
        self.test_names = frozen_names(path)  # a JAXBench candidate's own workload is its kernel, not a test
        self.original_frozen = frozen_parts(original, self.test_names)
        self.use_tests(tests)
        self.device_kind = ""
        self.method = f"device ({device.kind} backend)" if device is not None else f"estimate ({chip})"
        self.frozen_tests = self  # the Evaluator Protocol's optional capabilities: fix, tune and the frozen tests

    def trusted(self) -> tuple[str, str]:
        """The user's own file with the frozen tests: what the judge compares candidates against
        (runner/judge.py), never the candidate's copy of it."""
        return self.path, self.frozen_text(self.original)

    def use_tests(self, tests: str | None) -> None:
        """From now on ``tests`` are the written tests (frozen: the loop records their hash)."""
        self.tests, self._reports = tests, {}
        self.frozen = {**self.original_frozen, **({"__tests__": tests} if tests else {})}

    def with_tests(self, tests: str | None) -> "EngineEvaluator":
        """The same evaluator with ``tests`` as the written tests (the original's own stay)."""
        other = copy.copy(self)
        other.use_tests(tests)
        return other

    def tests_hash(self) -> str:
        """The identity of the frozen tests (recorded in the run; a resume with other tests is refused)."""
        from .test_writer import tests_hash

        return tests_hash("\n".join(f"{k}\n{v}" for k, v in sorted(self.frozen.items())))

    def frozen_text(self, source: str) -> str:
        return freeze(source, self.frozen)

    def untrusted(self) -> Any:
        """The engine's backend for model-written code (confined workers, engine/confinement.py): every
        phase runs candidates (and the original, tested with the same tests) there."""
        return self.engine.backend(self.options, untrusted=True)

    def device_worker(self) -> Any:
        """The run's one open, queued device worker (``Engine.device``): shared by every device phase."""
        return self.engine.device(self.device, self.device_config())

    def device_config(self) -> Any:
        """How a device worker for candidates starts: confined (engine/confinement.py)."""
        from ..engine.client import WorkerConfig

        return WorkerConfig(confine=True, allow_unconfined=getattr(self.options, "allow_unconfined", False))

    async def compile(self, source: str) -> PhaseResult:
        try:
            compile(source, self.path, "exec")
        except SyntaxError as err:
            why = f"SyntaxError: {err.msg} (line {err.lineno})"
            return PhaseResult(False, f"SyntaxError line {err.lineno}", evidence=why,
                               compile=CompileResult.failed(why, chip=self.chip))
        changed = tampering("\n\n".join(self.frozen.values()), source, self.test_names)
        if changed:
            why = (f"the candidate {'; '.join(changed)}: the tests are frozen; keep the file's inputs, reference and "
                   "tolerances as they are")
            return PhaseResult(False, "changes the frozen tests", evidence=why,
                               compile=CompileResult.failed("changes the frozen tests", why, chip=self.chip))
        report = await self.engine.check(self.path, self.options, self.frozen_text(source), purpose="job", untrusted=True)
        self._reports = {source: report}
        return compile_phase(report, self.options.tiers, self.chip)

    async def fix(self, source: str, failed: PhaseResult) -> PhaseResult:
        """One round of the verified fixer (agents/fixer.py) on a candidate that failed to compile: a
        minimal edit, re-checked by the checker before it is returned. ``data["usage"]``: its tokens."""
        from .fix_prompt import FixContext
        from .fixer import Budgets as FixBudgets
        from .fixer import Fixer, checker_verify

        report = self._reports.get(source)
        if self.fixer is None or report is None:
            return PhaseResult(False, "no fixer configured" if self.fixer is None else "no checker report to fix")
        errors = tuple(f for f in report.findings if str(getattr(f.severity, "value", f.severity)) == "error")
        text = self.frozen_text(source)
        context = FixContext(path=self.path, text=text, findings=errors, chip=self.chip,
                             has_reference="reference" in self.frozen)
        verify = checker_verify(self.engine.checker(self.path, self.options, purpose="job", untrusted=True), self.path)
        outcome = await Fixer(self.fixer, verify, budgets=FixBudgets(max_rounds=1)).fix(
            context, tuple(self.options.tiers), original_report=report)
        if not outcome.ok or not outcome.fixed_text:
            return PhaseResult(False, outcome.message[:200], evidence=outcome.message, data={"usage": outcome.usage})
        return PhaseResult(True, f"verified fix: {outcome.label}", source=unfreeze(outcome.fixed_text),
                           data={"usage": outcome.usage})

    async def _time(self, source: str, *, runs: int) -> Any:
        from ..engine.timing import TaskFiles, time_request

        params = time_request(TaskFiles(self.path), "time", runs=runs, warmup=0 if runs == 1 else 2, extra_shape=True,
                              text=self.frozen_text(source), trusted=self.trusted())
        if self.device is None:  # interpret mode on CPU: the checks run at reduced shapes
            params = dataclasses.replace(params, shrink=True)
        if self.device is not None:  # the run's one open device worker (engine/device.py), queued
            return await self.device_worker().request(params, purpose="device", timeout_s=self.timeout_s)
        return await self.untrusted().request(params, purpose="job", timeout_s=self.timeout_s)

    async def test(self, source: str) -> PhaseResult:
        return test_phase(await self._time(source, runs=1))

    async def measure(self, source: str) -> PhaseResult:
        if self.device is not None:
            reply = await self._time(source, runs=20)
            m, why = device_measurement(reply.result if reply.ok else None)
            if m is None:
                return PhaseResult(False, "not a device timing", evidence=why if reply.ok else (reply.message or why))
            self.device_kind = m.device_kind or ""
            timing = timing_of(m)  # keyed by the device kind and versions the worker reported
            return PhaseResult(timing is not None, f"{m.median_ns / 1e3:.1f} us median", timing=timing,
                               data={"profile": await self._device_profile(source)})
        from ..engine.tune import TuneError, TuneOptions, worker_estimator

        estimate = worker_estimator(self.untrusted(), self.path, self.frozen_text(source),
                                    TuneOptions(chip=self.chip), timeout_s=self.timeout_s, trusted=self.trusted())
        try:
            result = await estimate([], {})
        except TuneError as err:
            return PhaseResult(False, "not estimated", evidence=str(err)[:2000])
        est = result.estimates[0] if result.estimates else None
        if est is None or est.status != "ok" or not est.seconds:
            return PhaseResult(False, "not estimated", evidence=(est.error if est else "no estimate") or "")
        lower = lower_bound(est)
        if source == self.original:
            self._original_lower_bound = lower
        elif lower and self._original_lower_bound is None:  # a resumed run: the original's estimate first
            await self.measure(self.original)
        if source != self.original and lower and self._original_lower_bound is False:
            # manual DMAs are free to the cost model: such a candidate would win by what is not counted
            return PhaseResult(False, "not ranked: the estimate is a lower bound", evidence=(
                "the candidate leaves operands in HBM (pl.ANY) and moves them with its own DMAs, which the cost "
                "model does not count, while the original's traffic is counted: its estimate is a lower bound "
                "and cannot rank it against the original. Use BlockSpecs, or time it on a device "
                "(--backend local|ssh|ray)."))
        caveat = "; lower bound: manual DMAs (pl.ANY operands) not counted" if lower else ""
        timing = Timing(est.seconds, "estimate", self.chip, getattr(est, "model", "") or COST_MODEL, est.label)
        return PhaseResult(True, f"{est.seconds * 1e6:.2f} us, {est.bound}-bound{caveat}",
                           timing=timing, data={"bound": est.bound, "lower_bound": lower,
                                                  "profile": "profile (cost model, not a device profile): " +
                                                  profile_text(est)})

    async def _device_profile(self, source: str) -> str:
        """The ``profile`` op on the device worker, summarised (kernels by device time, the roofline)."""
        from ..engine.timing import TaskFiles, time_request

        params = time_request(TaskFiles(self.path), "profile", runs=5, text=self.frozen_text(source), target=self.chip)
        reply = await self.device_worker().request(params, purpose="device", timeout_s=self.timeout_s)
        if not reply.ok or reply.result is None:
            return f"device profile not taken: {reply.message or reply.status}"
        prof = to_json(reply.result).get("profile") or {}
        kernels = "; ".join(f"{k['name']} {k['device_ns_per_run'] / 1e3:.1f} us" for k in (prof.get("kernels") or [])[:5])
        roof = prof.get("roofline") or {}
        return (f"device profile ({prof.get('chip')}, {prof.get('time_source')}): kernels {kernels or '-'}; "
                f"roofline {json_short(roof)}")

    async def tune(self, source: str) -> PhaseResult:
        """The candidate's tunables searched (engine/tune.py): by the cost model for the chip without a
        device, by device timings with one. The best configuration comes back as the changed source
        (the loop re-tests it before taking it)."""
        from ..analysis.source import apply_edits
        from ..engine.tune import TuneError, TuneOptions, tune, worker_estimator, worker_timer

        text = self.frozen_text(source)
        options = TuneOptions(chip=self.chip, backend="estimate" if self.device is None else self.device.kind, verify=0)
        backend = self.untrusted()
        timer = None
        try:
            if self.device is not None:  # the same open device worker as the test and profile phases
                timer = worker_timer(self.device_worker(), self.path, text, options, timeout_s=self.timeout_s)
            report = await tune(self.path, text, options, worker_estimator(backend, self.path, text, options,
                                                                           timeout_s=self.timeout_s), timer=timer)
        except TuneError as err:
            message = str(err)
            if "no tunables" in message:
                return PhaseResult(True, "nothing to tune (no tunables in the candidate)", data={"evidence": message})
            return PhaseResult(False, "not tuned", evidence=message[:2000])
        counts = f"{len(report.outcomes)} configurations, {sum(report.rejected.values())} rejected before compiling"
        if report.best is None or report.best == report.current or not report.edits:
            return PhaseResult(True, f"kept {dict(report.current)} ({counts}; {report.best_provenance or 'no ranking'})",
                               data={"config": dict(report.current)})
        tuned = unfreeze(apply_edits(text, report.edits))
        gain = report.speedup_vs_current()
        why = f", {gain[0]:.2f}x vs {dict(report.current)} by {gain[1]}" if gain else ""
        return PhaseResult(True, f"{dict(report.best)}{why} ({counts})", source=tuned,
                           data={"config": dict(report.best), "was": dict(report.current)})
