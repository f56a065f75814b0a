"""The one evaluator behind optimize, search and eval: an explicit Protocol of what the loops use.

- ``method``: the one way every candidate of a run is timed ("estimate (v6e)", "device (TPU v6 lite)");
- ``compile(source)``, ``test(source)``, ``measure(source)`` -> ``PhaseResult``: the TPU compiler
  tiers, the guarded test (the ``time`` op's integrity checks), the timing by ``method``;
- optional capabilities, as members that are ``None`` when the evaluator lacks them (never probed
  with ``hasattr``): ``fix`` (one compile-fix round of the verified fixer), ``tune`` (autotune the
  candidate's tunables), ``frozen_tests`` (the frozen tests: their hash, and the same evaluator with
  other tests, which the test writer validates against).

``BaseEvaluator`` gives the three optional members as ``None``; agents/optimize_eval.JudgeEvaluator (the
one implementation: every phase is the run's ``Judge``, engine/judge.py) and the search's ``Slotted``
wrapper implement the Protocol. ``PhaseResult`` is what every phase returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, Protocol

from ..analysis.verdict import CompileResult, JudgedBy, TestResult, Timing


@dataclass(frozen=True)
class PhaseResult:
    """What one evaluation phase found: the phase's typed result (``compile``, ``test``, ``timing``: what
    the loops combine into a Verdict), its one-line ``summary`` and the ``evidence`` the planner reads.
    ``seconds``/``label`` read ``timing`` (a measure without a Timing has neither)."""

    ok: bool
    summary: str
    evidence: str = ""  # what goes back to the planner on failure (compiler error, test rejection)
    source: str | None = None  # autotune/fix: the changed source
    data: dict = field(default_factory=dict)
    timing: Timing | None = None  # measure: the figure with its provenance
    compile: CompileResult | None = None  # compile: the tiers run and skipped for the chip
    test: TestResult | None = None  # test: ok / wrong / not verified, and the size verified at
    judged_by: JudgedBy = JudgedBy.UNKNOWN  # test, measure: who compared and timed it

    @property
    def seconds(self) -> float | None:
        return self.timing.seconds if self.timing is not None else None

    @property
    def label(self) -> str:
        """Where the figure came from ("estimate (<model>, v6e)", "device (TPU v6 lite)"), or empty."""
        return self.timing.label() if self.timing is not None else ""


FixFn = Callable[[str, PhaseResult], Awaitable[PhaseResult]]
TuneFn = Callable[[str], Awaitable[PhaseResult]]


class FrozenTests(Protocol):
    """The frozen tests of a run: recorded by hash; a resume with other tests is refused."""

    tests: str | None

    def use_tests(self, tests: str | None) -> None: ...

    def tests_hash(self) -> str: ...

    def with_tests(self, tests: str | None) -> "Evaluator": ...


class Evaluator(Protocol):
    method: str
    fix: Optional[FixFn]
    tune: Optional[TuneFn]
    frozen_tests: Optional[FrozenTests]

    async def compile(self, source: str) -> PhaseResult: ...

    async def test(self, source: str) -> PhaseResult: ...

    async def measure(self, source: str) -> PhaseResult: ...


class BaseEvaluator:
    """The optional capabilities absent (subclasses set the ones they have)."""

    method: str = ""
    fix: Optional[FixFn] = None
    tune: Optional[TuneFn] = None
    frozen_tests: Optional[Any] = None
