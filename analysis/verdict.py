"""One verdict for every command: compiled, correct, how fast, by which method, and the one way to
divide two timings.

- ``Timing(seconds, provenance, device_kind, model, method, versions)``: one figure and where it came
  from. ``provenance`` is "device" (measured on an accelerator whose kind is ``device_kind``),
  "estimate" (``model`` estimated it for the chip ``device_kind``), "interpret" (TPU interpret mode
  on CPU) or "host" (wall clock on the host: XLA on the CPU, or a device run whose profiler trace
  fell short). Only device and estimate timings are about a TPU.
- ``speedup(baseline, candidate, baseline_name=...)`` is the only way to divide two timings: device
  by device of the same kind, estimate by estimate of the same model for the same chip. Anything
  else raises ``SpeedupRefused`` saying why; ``try_speedup`` returns the refusal as data.
- ``CompileResult`` (the compiler tiers run and skipped, per kernel, for one chip: compiled only when
  tier 2, the compile for the chip, really ran and passed), ``TestResult`` (ok / wrong with the
  evidence / not verified with why, and the size it was verified at) and ``Timing``: one typed
  result per phase, made where the phase runs.
- ``Verdict(compile, test, timing)``: the three combined once, frozen, and carried unchanged by every
  command. ``status()`` is the one vocabulary (``STATUSES``: "compiled, correct", "compiled, wrong",
  "compiled, not verified", "not compiled", "not compiled for the chip", "not checked", "no candidate") and
  ``text()`` adds the why. ``compiled``/``correct`` read it as True / False / None ("not shown", never
  a pass). ``Verdict.no_candidate`` is a task or run that had nothing to evaluate.
- ``pick_winner``: the winner rule every loop applies (only a correct candidate faster than the
  original by the same method wins), returning the winner or "no winner: <why>".

Pure data and functions: every layer may import this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Sequence

from .types import NOT_CHECKED

PROVENANCES = ("device", "estimate", "interpret", "host")
COST_MODEL = "pallasite roofline v5"  # runner/program/cost_model.MODEL, as estimates name it (a test holds them equal)


class SpeedupRefused(ValueError):
    """Two timings that cannot be divided (different methods, models or devices, or not TPU time)."""


@dataclass(frozen=True)
class Timing:
    seconds: float
    provenance: str  # one of PROVENANCES
    device_kind: str = ""  # the device measured on, or the chip estimated for
    model: str = ""  # estimates: the model that produced the figure (COST_MODEL, "XLA optimal_seconds (cpu)")
    method: str = ""  # how it was produced, in words
    versions: tuple[tuple[str, str], ...] = ()  # what the worker reported (jax, libtpu, ...)
    # (low, high) seconds the figure may be, where its method knows its own error: an estimate's range from
    # the model's error on published times it was not fitted on (runner/program/cost_model.interval); None: not known
    interval: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.interval is not None and not (0 < self.interval[0] <= self.interval[1]):
            raise ValueError(f"timing interval {self.interval!r}: use (low, high) with 0 < low <= high seconds")
        if self.provenance not in PROVENANCES:
            raise ValueError(f"timing provenance {self.provenance!r}: use one of {', '.join(PROVENANCES)}")
        if self.provenance == "estimate" and not self.model:
            raise ValueError("an estimate must name the model that made it (Timing.model)")

    @property
    def tpu_time(self) -> bool:
        """Whether this figure is about a TPU at all (a device timing or an estimate for a chip)."""
        return self.provenance in ("device", "estimate")

    def label(self) -> str:
        """Where the figure came from, in words that never pass CPU time off as TPU time."""
        if self.provenance == "device":
            return f"device ({self.device_kind or 'unknown device'})"
        if self.provenance == "estimate":
            return f"estimate ({self.model}, {self.device_kind or '?'})"  # as engine/estimates.py labels a pair
        if self.provenance == "interpret":
            return "CPU interpret mode: not TPU time"
        return f"host wall clock ({self.device_kind or 'host'}): not TPU time"

    def text(self) -> str:
        return f"{duration(self.seconds)} [{self.label()}]"

    def to_json(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "provenance": self.provenance, "device_kind": self.device_kind,
                "model": self.model, "method": self.method, "versions": dict(self.versions), "label": self.label(),
                "interval": list(self.interval) if self.interval else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Timing":
        interval = data.get("interval")
        return cls(float(data["seconds"]), data["provenance"], data.get("device_kind", ""), data.get("model", ""),
                   data.get("method", ""), tuple(sorted((data.get("versions") or {}).items())),
                   (float(interval[0]), float(interval[1])) if interval else None)


def distinguishable(a: Timing, b: Timing) -> bool | None:
    """Whether two timings of one method can be told apart: True when their intervals do not overlap,
    False when they do (within the method's own error the two may be equal or either faster: measure
    them on a device), None when either has no interval or they cannot be compared at all
    (``comparable``). A timing without an interval (a device median) is never called a tie here."""
    if comparable(a, b) is not None or a.interval is None or b.interval is None:
        return None
    return a.interval[1] < b.interval[0] or b.interval[1] < a.interval[0]


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.0f} ns"


def comparable(a: Timing, b: Timing) -> str | None:
    """None when ``a`` and ``b`` may be divided, else why not."""
    for t in (a, b):
        if not t.tpu_time:
            return f"no speedup: {t.label()} says nothing about a TPU"
    if a.provenance != b.provenance:
        return (f"no speedup: {a.label()} and {b.label()} are different methods (an estimate is never divided "
                "by a device timing)")
    if a.provenance == "estimate" and a.model != b.model:
        return (f"no estimated speedup: the reference and the kernel were estimated by different models "
                f"({a.model} vs {b.model})")
    if a.device_kind != b.device_kind:
        what = "estimated for" if a.provenance == "estimate" else "measured on"
        return f"no speedup: {what} different chips ({a.device_kind} vs {b.device_kind})"
    for t in (a, b):
        if not (t.seconds > 0 and math.isfinite(t.seconds)):
            return f"no speedup: a timing of {t.seconds!r} s"
    return None


@dataclass(frozen=True)
class Speedup:
    value: float  # baseline seconds / candidate seconds
    baseline: str  # what the candidate is measured against ("the original file", "the XLA reference")
    method: str  # the one method both sides share (the label of either timing)

    def text(self) -> str:
        return f"{self.value:.2f}x vs {self.baseline} ({self.method})"


def speedup(baseline: Timing, candidate: Timing, *, baseline_name: str) -> Speedup:
    """baseline / candidate, refusing to mix methods, models or devices (``SpeedupRefused``)."""
    why = comparable(baseline, candidate)
    if why:
        raise SpeedupRefused(why)
    return Speedup(baseline.seconds / candidate.seconds, baseline_name, candidate.label())


class MixedModels(SpeedupRefused):
    """Two estimates made by different models (or of unknown model): their ratio is no speedup."""


def estimated_speedup(reference_seconds: float, kernel_seconds: float, reference_model: str,
                      kernel_model: str) -> float:
    """reference / kernel for two bare estimates named by their model (chip included, e.g.
    "pallasite roofline v5, v5e"): ``speedup`` over two estimate timings. Raises MixedModels when
    the models differ or are not named, SpeedupRefused when a time is not a positive number."""
    if not reference_model or not kernel_model or reference_model != kernel_model:
        raise MixedModels(f"the reference was estimated by {reference_model or 'an unnamed model'!r} and the kernel by "
                          f"{kernel_model or 'an unnamed model'!r}: a speedup divides two figures of one model")
    for what, value in (("reference", reference_seconds), ("kernel", kernel_seconds)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise SpeedupRefused(f"the {what}'s estimate is {value!r}, not a positive number of seconds")
    pair = [Timing(float(x), "estimate", model=reference_model) for x in (reference_seconds, kernel_seconds)]
    return speedup(pair[0], pair[1], baseline_name="the reference").value


def try_speedup(baseline: Timing | None, candidate: Timing | None, *,
                baseline_name: str) -> tuple[Speedup | None, str | None]:
    """(the speedup, None) or (None, why not): a missing side is a refusal too."""
    if baseline is None or candidate is None:
        side = "the baseline" if baseline is None else "the candidate"
        return None, f"no speedup: {side} has no timing"
    try:
        return speedup(baseline, candidate, baseline_name=baseline_name), None
    except SpeedupRefused as err:
        return None, str(err)


NO_PALLAS_CALL = "no pallas_call"  # why a candidate without a pallas_call (one its task reaches) is not compiled
# tier 0's state for a kernel the task made without a pallas_call in the source (pl.kernel or core_map over a
# SparseCore mesh): tier 0 reads pallas_call sites and has none to read, so it neither passed nor failed it
TIER0_NOT_APPLICABLE = "not applicable"  # tier 0's state for a kernel it has no site of the file to read
TIER0_NO_SITE = f"{TIER0_NOT_APPLICABLE}: no pallas_call site (a kernel made by pl.kernel or core_map)"
# (a library kernel the file calls reads "not applicable: the site is in <module>", engine/findings/reach.py)
COMPILE_TIER = 2  # the tier that compiles for the chip (libtpu's deviceless compile): "compiled" needs it


def judge_tiers(tiers: Sequence[int]) -> tuple[int, ...]:
    """The tiers a command judging candidates runs: the settings' tiers up to 2, tier 2 always included
    (without it nothing can be called compiled for the chip)."""
    return tuple(sorted({int(t) for t in tiers if int(t) <= COMPILE_TIER} | {1, COMPILE_TIER}))


@dataclass(frozen=True)
class CompileResult:
    """The compile phase, where it ran: the TPU compiler tiers for one chip, per kernel.

    ``ok`` is True only when tier 2 (the compile for the chip) really ran and nothing failed; False
    when a tier found an error (``why`` is the first, ``evidence`` the list); None when the chip's
    compile was not shown to pass without an error being found (tier 2 skipped or not asked for, or a
    kernel the task reaches skipped a tier): "not compiled for the chip: <why>". ``checked`` False: nothing
    was checked, or a limit or a crash stopped the check before it could say (a search root, a phase that
    never ran): "not checked: <why>", never "not compiled for the chip" and never a pass."""

    ok: bool | None
    chip: str = ""
    tiers_run: tuple[int, ...] = ()
    tiers_skipped: tuple[tuple[int, str], ...] = ()  # (tier, why it was skipped)
    kernels: tuple[tuple[str, tuple[tuple[int, str], ...]], ...] = ()  # (kernel, ((tier, "ok"|"error"|...), ...))
    why: str = ""  # the failure, or why the chip's compile did not run
    evidence: str = ""  # the errors at their lines (what goes back to the planner)
    checked: bool = True  # False: not checked (ok is then None)

    @classmethod
    def passed(cls, chip: str, tiers: Sequence[int] = (0, 1, 2)) -> "CompileResult":
        """Tiers ``tiers`` ran for ``chip`` without an error (not compiled for the chip unless tier 2 is among them)."""
        tiers = tuple(sorted(set(tiers)))
        if COMPILE_TIER in tiers:
            return cls(True, chip, tiers)
        return cls(None, chip, tiers, ((COMPILE_TIER, "not asked for"),), why=f"tier {COMPILE_TIER} was not run")

    @classmethod
    def failed(cls, why: str, evidence: str = "", *, chip: str = "", tiers: Sequence[int] = ()) -> "CompileResult":
        return cls(False, chip, tuple(tiers), why=why, evidence=evidence or why)

    @classmethod
    def unchecked(cls, why: str, evidence: str = "", *, chip: str = "", tiers: Sequence[int] = ()) -> "CompileResult":
        return cls(None, chip, tuple(tiers), why=why, evidence=evidence or why)

    @classmethod
    def not_checked(cls, why: str = NOT_CHECKED, evidence: str = "", *, chip: str = "",
                    tiers: Sequence[int] = ()) -> "CompileResult":
        """Nothing was checked (or the check was stopped before it could say): "not checked: <why>"."""
        return cls(None, chip, tuple(tiers), why=why, evidence=evidence or why, checked=False)

    @property
    def compiled(self) -> bool | None:
        return self.ok

    def status(self) -> str:
        """The compile part's word: "compiled", "not compiled", "not compiled for the chip" or "not checked"."""
        if self.ok:
            return "compiled"
        if self.ok is False:
            return "not compiled"
        return "not compiled for the chip" if self.checked else NOT_CHECKED

    def why_text(self) -> str:
        """What follows the status word: the why, and the tiers that passed when the chip's compile was not
        shown (empty for a compiled result and for a bare "not checked")."""
        if self.ok:
            return ""
        if self.ok is False:
            return self.why
        why = "" if self.why == NOT_CHECKED else self.why
        passed = (f"tier{'s' if len(self.tiers_run) != 1 else ''} {','.join(map(str, self.tiers_run))} passed"
                  if self.tiers_run else "")
        return f"{why} ({passed})" if why and passed else why or passed

    def text(self) -> str:
        if self.ok:
            return f"compiled for {self.chip or 'the chip'} (tiers {','.join(map(str, self.tiers_run))})"
        why = self.why_text()
        return f"{self.status()}: {why}" if why else self.status()

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "chip": self.chip, "tiers_run": list(self.tiers_run),
                "tiers_skipped": [list(t) for t in self.tiers_skipped],
                "kernels": [[k, [list(t) for t in tiers]] for k, tiers in self.kernels],
                "why": self.why, "evidence": self.evidence, "checked": self.checked, "status": self.status()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CompileResult":
        return cls(data.get("ok"), data.get("chip", ""), tuple(data.get("tiers_run") or ()),
                   tuple((int(t), str(w)) for t, w in data.get("tiers_skipped") or ()),
                   tuple((k, tuple((int(t), str(s)) for t, s in tiers)) for k, tiers in data.get("kernels") or ()),
                   data.get("why", ""), data.get("evidence", ""), _checked(data))


def _checked(data: dict[str, Any]) -> bool:
    """A stored compile part's ``checked``. Stored before "not checked" had its own word, the part nothing
    checked (a search root's) was exactly ``NO_COMPILE``'s value: read as not checked."""
    if "checked" in data:
        return bool(data["checked"])
    return not (data.get("ok") is None and data.get("why") == NOT_CHECKED and not data.get("tiers_run")
                and not data.get("kernels"))


def compile_result(report: Any, tiers: Sequence[int], chip: str, *,
                   not_checked: Sequence[str] = ("PLS205", "PLS902", "PLS903", "PLS904")) -> CompileResult:
    """The compile phase's result from a checker report (``FileReport`` or the checker's result: findings,
    per-kernel tier states, notes): the one meaning of "compiled" for check, fix, optimize, search, tune and
    eval. An error finding: not compiled. A finding of ``not_checked`` (a crash, a time or memory limit):
    not checked, with why. Tier 2 skipped or not asked for: not compiled for the chip, with why. No
    pallas_call (the task makes none, or reaches none of the file's): not compiled, "no pallas_call".
    Compiled: tier 2 ran and passed, the file is a kernel, and every kernel the task reaches passed every
    tier asked for."""
    findings = tuple(getattr(report, "findings", ()) or ())

    def sev(f: Any) -> str:
        return str(getattr(f.severity, "value", f.severity))

    def line(f: Any) -> str:
        return f"line {f.span.line + 1}: {f.code}: {f.message}"

    kernels = tuple((k.name, tuple(k.tiers)) for k in getattr(report, "kernels", ()) or ())
    errors = [f for f in findings if sev(f) == "error"]
    stopped = [f for f in findings if f.code in not_checked]
    asked = tuple(sorted(set(int(t) for t in tiers)))
    skipped: dict[int, str] = {} if COMPILE_TIER in asked else {COMPILE_TIER: "not asked for"}
    for _, states in kernels:
        for tier, state in states:
            if state.startswith(("skipped", "not checked")) or state == "not run":  # none of them ran the tier
                skipped.setdefault(tier, state.partition(": ")[2] or state)
    for note in getattr(report, "notes", ()) or ():
        if note.startswith(f"tier {COMPILE_TIER} skipped"):
            skipped.setdefault(COMPILE_TIER, note.partition(": ")[2] or note)
    # a tier that every kernel skipped did not run; one that ran for some kernel did
    ran = tuple(t for t in asked if t not in skipped or any(dict(s).get(t) in ("ok", "error") for _, s in kernels))
    skipped_t = tuple(sorted((t, w) for t, w in skipped.items() if t not in ran))
    if stopped and not errors:
        return CompileResult(None, chip, ran, skipped_t, kernels, stopped[0].message[:160],
                             "\n".join(line(f) for f in stopped[:3]), checked=False)
    if errors:
        return CompileResult(False, chip, ran, skipped_t, kernels, f"{len(errors)} error(s): {errors[0].code}",
                             "\n".join(line(f) for f in errors[:5]))
    if COMPILE_TIER not in ran:
        why = dict(skipped_t).get(COMPILE_TIER, "not run")
        return CompileResult(None, chip, ran, skipped_t, kernels, f"tier {COMPILE_TIER} {'skipped: ' + why if why != 'not asked for' else 'was not run'}")
    return _every_kernel(CompileResult(True, chip, ran, skipped_t, kernels), report, asked)


def _every_kernel(result: CompileResult, report: Any, tiers: Sequence[int]) -> CompileResult:
    """Compiled also means: the file is a kernel, and every kernel the task reaches passed every tier asked
    for (a tier skipped or not run for one kernel is not a pass); a kernel defined but never called by the
    task (a backward pass) has nothing to compile."""
    chip, ran = result.chip, result.tiers_run
    if getattr(report, "skipped", None):
        return CompileResult.failed(f"not a kernel: {report.skipped}", chip=chip, tiers=ran)
    if not result.kernels:
        return CompileResult.failed(f"{NO_PALLAS_CALL}: neither the file nor its task makes one", chip=chip,
                                    tiers=ran)
    reached = 0
    for name, states in result.kernels:
        state_of = dict(states)
        if any(str(state_of.get(t, "")).startswith("not reached") for t in tiers):
            continue
        reached += 1
        for tier in tiers:
            state = state_of.get(tier, "not run")
            if state != "ok" and not (tier == 0 and state.startswith(TIER0_NOT_APPLICABLE)):
                return CompileResult(None, chip, ran, result.tiers_skipped, result.kernels,
                                     f"{name}: tier {tier} {state} for {chip} (compiled means every tier passed)")
    if not reached:
        return CompileResult.failed(f"{NO_PALLAS_CALL}: the task reaches none of the file's kernels", chip=chip,
                                    tiers=ran)
    return result


TEST_OUTCOMES = ("ok", "wrong", "not verified")


@dataclass(frozen=True)
class TestResult:
    """The test phase, where it ran: the guarded test passed ("ok"), rejected the candidate ("wrong",
    ``why`` holds the evidence), or could not say ("not verified", ``why`` says why: the run crashed,
    hit a limit, was too big for interpret mode, or was skipped). "Could not run" is never "wrong".

    ``verified_at``: the size the test ran at when it was not the task's own (e.g. "seq 2048 of
    16384"), None when it ran at the task's size or was not run."""

    __test__ = False  # not a pytest class

    outcome: str  # one of TEST_OUTCOMES
    why: str = ""  # "wrong": the evidence; "not verified": why not; "ok": where it ran
    verified_at: str | None = None
    checks: tuple[str, ...] = ()  # what ran ("fresh inputs twice", "second shape", ...)

    def __post_init__(self) -> None:
        if self.outcome not in TEST_OUTCOMES:
            raise ValueError(f"test outcome {self.outcome!r}: use one of {', '.join(TEST_OUTCOMES)}")

    @classmethod
    def ok(cls, where: str = "", *, verified_at: str | None = None, checks: Sequence[str] = ()) -> "TestResult":
        return cls("ok", where, verified_at, tuple(checks))

    @classmethod
    def wrong(cls, evidence: str, *, verified_at: str | None = None) -> "TestResult":
        return cls("wrong", evidence, verified_at)

    @classmethod
    def not_verified(cls, why: str) -> "TestResult":
        return cls("not verified", why)

    @property
    def correct(self) -> bool | None:
        return True if self.outcome == "ok" else False if self.outcome == "wrong" else None

    def text(self) -> str:
        if self.outcome == "ok":
            return "correct" + (f" (verified at {self.verified_at})" if self.verified_at else "")
        if self.outcome == "wrong" and self.verified_at:  # a verdict at a reduced size says the size
            return f"wrong at {self.verified_at}" + (f": {self.why}" if self.why else "")
        return f"{self.outcome}: {self.why}" if self.why else self.outcome

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "why": self.why, "verified_at": self.verified_at, "checks": list(self.checks)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TestResult":
        return cls(data["outcome"], data.get("why", ""), data.get("verified_at"), tuple(data.get("checks") or ()))


NOT_TESTED = TestResult("not verified", "not tested")
NO_COMPILE = CompileResult(None, why=NOT_CHECKED, checked=False)

STATUSES = ("no candidate", "not checked", "not compiled", "not compiled for the chip", "compiled, wrong",
            "compiled, not verified", "compiled, correct")


class JudgedBy(str, Enum):
    """Who compared and timed a candidate: set by the judge (runner/judging/judge.py), never free text.
    Only ``JUDGE`` ranks; ``CANDIDATE`` (its own process: results stored by older versions) and
    ``UNKNOWN`` (never tested, or a reply that does not say) never do."""

    JUDGE = "the judge"
    CANDIDATE = "the candidate"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, value: Any) -> "JudgedBy":
        """From a worker reply's or a stored verdict's field: only the judge's own word is the judge."""
        if isinstance(value, JudgedBy):
            return value
        text = str(value or "")
        if text == cls.JUDGE.value:
            return cls.JUDGE
        if text in (cls.CANDIDATE.value, "the candidate's own process"):
            return cls.CANDIDATE
        return cls.UNKNOWN

    @classmethod
    def known(cls, *values: Any) -> "JudgedBy":
        """The first of ``values`` that says who judged (a later phase's word over an earlier one's)."""
        for value in values:
            if cls.of(value) is not cls.UNKNOWN:
                return cls.of(value)
        return cls.UNKNOWN

    def text(self) -> str:
        return {JudgedBy.JUDGE: "the judge (from the candidate's exported program; its process never judges)",
                JudgedBy.CANDIDATE: "the candidate's own process (never ranks)",
                JudgedBy.UNKNOWN: "nobody (not tested)"}[self]


@dataclass(frozen=True)
class Verdict:
    """A candidate's compile and test results and its timing, combined once and carried unchanged.
    ``status()`` is the one vocabulary (STATUSES); ``text()`` adds the why."""

    compile: CompileResult = NO_COMPILE
    test: TestResult = NOT_TESTED
    timing: Timing | None = None
    candidate: bool = True  # False: there was no candidate to evaluate
    no_candidate_why: str = ""
    judged_by: JudgedBy = JudgedBy.UNKNOWN  # who compared and timed it (the judge's word, or unknown)

    def __post_init__(self) -> None:
        object.__setattr__(self, "judged_by", JudgedBy.of(self.judged_by))

    @classmethod
    def of(cls, compiled: bool | None, correct: bool | None, timing: Timing | None = None, evidence: str = "",
           *, chip: str = "", tiers: Sequence[int] = (0, 1, 2), judged_by: Any = JudgedBy.UNKNOWN) -> "Verdict":
        """A verdict from bare answers (tests and stored rows of an older form): the evidence is the failing
        phase's why; nobody is known to have judged it unless ``judged_by`` says."""
        comp = (CompileResult.passed(chip, tiers) if compiled else
                CompileResult.failed(evidence or "compile failed", chip=chip) if compiled is False else
                CompileResult.unchecked(evidence or "not checked", chip=chip))
        test = (TestResult.ok() if correct else TestResult.wrong(evidence or "rejected by the tests")
                if correct is False else TestResult.not_verified(evidence or "not tested"))
        return cls(comp, test, timing, judged_by=judged_by)

    @classmethod
    def no_candidate(cls, why: str = "no candidate") -> "Verdict":
        return cls(CompileResult.failed(why), TestResult.not_verified(why), None, candidate=False, no_candidate_why=why)

    @property
    def compiled(self) -> bool | None:
        """True: compiled for the chip (tier 2 passed); False: an error, or no candidate; None: not shown."""
        return False if not self.candidate else self.compile.ok

    @property
    def correct(self) -> bool | None:
        """True: the guarded test passed; False: wrong, or no candidate; None: not verified."""
        if not self.candidate:
            return False
        return self.test.correct if self.compile.ok else (False if self.compile.ok is False else None)

    @property
    def evidence(self) -> str:
        """Why it failed (the failing phase's evidence), or empty."""
        if not self.candidate:
            return self.no_candidate_why
        if self.compile.ok is not True:
            return self.compile.evidence or self.compile.why
        return "" if self.test.outcome == "ok" else self.test.why

    @property
    def passed(self) -> bool:
        """Compiled for the chip and correct (both checked and passed), and a real candidate."""
        return self.candidate and self.compile.ok is True and self.test.outcome == "ok"

    def status(self) -> str:
        if not self.candidate:
            return "no candidate"
        if self.compile.ok is not True:
            return self.compile.status()  # "not compiled", "not compiled for the chip", "not checked"
        return {"ok": "compiled, correct", "wrong": "compiled, wrong"}.get(self.test.outcome, "compiled, not verified")

    def why(self) -> str:
        if not self.candidate:
            return self.no_candidate_why
        if self.compile.ok is not True:
            return self.compile.why_text()
        return self.test.why if self.test.outcome != "ok" else ""

    def text(self) -> str:
        """The status with its why ("compiled, not verified: the worker crashed"), and the size verified at."""
        why = self.why()
        base = f"{self.status()}: {why}" if why and why != self.status() else self.status()
        if self.passed and self.test.verified_at:
            base += f" (verified at {self.test.verified_at})"
        elif self.test.outcome == "wrong" and self.test.verified_at:
            base += f" (at {self.test.verified_at})"
        return base

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "compiled": self.compiled, "correct": self.correct,
                "status": self.status(), "text": self.text(), "compile": self.compile.to_json(),
                "test": self.test.to_json(), "timing": self.timing.to_json() if self.timing else None,
                "evidence": self.evidence, "judged_by": self.judged_by.value}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Verdict":
        timing = Timing.from_json(data["timing"]) if data.get("timing") else None
        if not data.get("candidate", True):
            return cls.no_candidate(data.get("evidence") or "no candidate")
        if "compile" in data and "test" in data:
            return cls(CompileResult.from_json(data["compile"]), TestResult.from_json(data["test"]), timing,
                       judged_by=JudgedBy.of(data.get("judged_by")))
        return cls.of(data.get("compiled"), data.get("correct"), timing, data.get("evidence", ""))


def self_judged(verdict: "Verdict") -> bool:
    """Whether anyone but the judge compared and timed it: such a verdict never wins a ranking."""
    return verdict.judged_by is not JudgedBy.JUDGE


JUDGED_WHY = {  # what each judge means, said beside it in every table's footer (the rendering only)
    JudgedBy.JUDGE: "the judge, not the candidate, compared its outputs with the reference and timed it, so the "
                    "candidate could not fake either (docs/safety.md)",
    JudgedBy.CANDIDATE: "a candidate's own process could fake its comparison and timing (docs/safety.md)",
}


def judged_lines(judged: Sequence[tuple[str, Any]], what: str) -> list[str]:
    """"judged by <who>: <what> 1, 2; <what that means>" lines for a table's footer, from (key, judged_by)
    pairs. Keys never tested (unknown) are left out."""
    by: dict[JudgedBy, list[str]] = {}
    for key, who in judged:
        who = JudgedBy.of(who)
        if who is not JudgedBy.UNKNOWN:
            by.setdefault(who, []).append(key)
    return [f"judged by {who.text()}: {what} {', '.join(keys)}; {JUDGED_WHY[who]}" for who, keys in by.items()]


@dataclass(frozen=True)
class Winner:
    name: Any | None  # the winner's key (an iteration index, a node id), or None
    speedup: Speedup | None
    why: str  # "winner: ..." or "no winner: ..."


@dataclass(frozen=True)
class Ranking:
    """Candidates in the one order every loop uses (``rank``): ``order`` best first; ``winner``: the first
    if it is faster than the baseline by the same method, else no winner and why; ``not_judged``: keys that
    passed but were not judged by the judge (counted apart, never ranked above a judged one)."""

    order: tuple[Any, ...]
    winner: Winner
    speedups: dict[Any, float]
    not_judged: tuple[Any, ...] = ()


def rank(baseline: Timing | None, candidates: Sequence[tuple[Any, Verdict]], *,
         baseline_name: str = "the original", given: dict[Any, float] | None = None,
         method: str = "") -> Ranking:
    """The one ranking of candidates, for optimize, search, eval and tune: judged by the judge, compiled and
    correct - verified at the task's own size before verified at a reduced size only - then the fastest by
    the baseline's method (a speedup through ``try_speedup``: never across
    methods); then correct but untimed, then compiled, then the rest; ties keep the order given. A verdict
    not judged by the judge (``self_judged``) never ranks above any judged one, and never wins. ``given``:
    speedups already divided by the caller's one method (``method``: its label), e.g. search's nodes
    against their root; only those of judged, correct candidates count."""
    speedups: dict[Any, float] = {}
    refusals: list[str] = []
    for key, verdict in candidates:
        if given is not None:
            if verdict.passed and not self_judged(verdict) and given.get(key) is not None:
                speedups[key] = float(given[key])
            elif verdict.passed and not self_judged(verdict) and verdict.timing is not None:
                why = try_speedup(baseline, verdict.timing, baseline_name=baseline_name)[1] if baseline else ""
                refusals.append(why or f"{key} has no speedup by {method or 'the baseline method'}")
        elif verdict.passed and not self_judged(verdict) and baseline is not None:
            s, why = try_speedup(baseline, verdict.timing, baseline_name=baseline_name)
            if s is not None:
                speedups[key] = s.value
            elif verdict.timing is not None:
                refusals.append(why)

    def tier(item: tuple[int, tuple[Any, Verdict]]) -> tuple:
        index, (key, v) = item
        judged = not self_judged(v)
        reduced = v.passed and v.test.verified_at is not None  # verified at reduced sizes only: below the task's size
        return (not (judged and v.passed), reduced, key not in speedups, -speedups.get(key, 0.0),
                v.compiled is not True, not judged, index)

    ordered = [key for _, (key, _) in sorted(enumerate(candidates), key=tier)]
    not_judged = tuple(k for k, v in candidates if v.passed and self_judged(v))
    return Ranking(tuple(ordered), _winner(baseline, candidates, speedups, refusals, not_judged, baseline_name,
                                           ordered, given is not None, method), speedups, not_judged)


def _winner(baseline: Timing | None, candidates: Sequence[tuple[Any, Verdict]], speedups: dict[Any, float],
            refusals: list[str], not_judged: tuple[Any, ...], baseline_name: str, ordered: list[Any],
            given: bool = False, method: str = "") -> Winner:
    if given and speedups:
        key = ordered[0]
        best = Speedup(speedups[key], baseline_name, method)
        if best.value <= 1.0:
            return Winner(None, None, f"no winner: the best correct candidate is {best.text()}, not faster")
        return Winner(key, best, f"winner: {key}, {best.text()}")
    if baseline is None:
        return Winner(None, None, f"no winner: {baseline_name} was not timed, so nothing can be shown faster")
    passed = [k for k, v in candidates if v.passed and not self_judged(v)]
    if not passed:
        if not_judged:
            return Winner(None, None, f"no winner: {len(not_judged)} candidate(s) passed but were not judged by the "
                          "judge, so they can never rank")
        return Winner(None, None, f"no winner: no candidate compiled and passed the tests ({len(candidates)} tried)")
    if not speedups:
        if all(v.timing is None for k, v in candidates if k in passed):
            return Winner(None, None, f"no winner: {len(passed)} candidate(s) compiled and passed the tests but none "
                          f"was timed, so nothing can be shown faster than {baseline_name}")
        return Winner(None, None, f"no winner: no correct candidate was timed like {baseline_name}"
                          + (f" ({refusals[0]})" if refusals else ""))
    key = ordered[0]
    verdicts = dict(candidates)
    lead = verdicts[key].timing
    best = speedup(baseline, lead, baseline_name=baseline_name)
    if best.value <= 1.0:
        return Winner(None, None, f"no winner: the best correct candidate is {best.text()}, not faster")
    close = [k for k in speedups if k != key and distinguishable(lead, verdicts[k].timing) is False]
    said = []
    if distinguishable(lead, baseline) is False:
        said.append(f"{baseline_name}'s")
    if close:
        said.append(f"{len(close)} other candidate(s)' ({', '.join(map(str, close[:4]))})")
    caveat = (f" (within the estimate's range of {' and '.join(said)}: measure this on a device to tell them "
              "apart)") if said else ""
    return Winner(key, best, f"winner: {key}, {best.text()}{caveat}")


def pick_winner(baseline: Timing | None, candidates: Sequence[tuple[Any, Verdict]], *,
                baseline_name: str = "the original") -> Winner:
    """``rank``'s winner: the fastest correct candidate judged by the judge that is faster than ``baseline``
    by the same method, or no winner with the reason."""
    return rank(baseline, candidates, baseline_name=baseline_name).winner


def timing_of(measurement: Any, *, model: str = "") -> Timing | None:
    """The ``Timing`` of a worker's ``Measurement`` (the dataclass or its JSON), keyed by what the worker
    reported (its device kind and versions); None when it has no median. An estimate without a named
    model is the cost model's."""
    get = measurement.get if isinstance(measurement, dict) else (lambda k, d=None: getattr(measurement, k, d))
    median = get("median_ns")
    if not median or median <= 0:
        return None
    prov = get("provenance")
    prov = str(getattr(prov, "value", prov) or "")
    if prov not in PROVENANCES:
        return None
    versions = tuple((k, str(v)) for k, v in (("jax", get("jax_version")), ("libtpu", get("libtpu_version"))) if v)
    return Timing(median / 1e9, prov, str(get("device_kind") or ""),
                  (model or COST_MODEL) if prov == "estimate" else "", str(get("method") or ""), versions)
