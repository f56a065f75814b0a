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
- ``Verdict(compiled, correct, timing, evidence)``: ``compiled`` means the TPU compiler tiers (0-2)
  passed for the chip; ``correct`` means the guarded test passed (the ``time`` op's integrity checks);
  ``None`` means "not checked" and never counts as a pass. ``Verdict.no_candidate`` is a task or run
  that had nothing to evaluate: failed, never compiled or correct.
- ``pick_winner``: the winner rule every loop applies (only a correct candidate faster than the
  original by the same method wins), returning the winner or "no winner: <why>".

Pure data and functions: every layer may import this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

PROVENANCES = ("device", "estimate", "interpret", "host")
COST_MODEL = "pallasite roofline v2"  # runner/cost_model.MODEL, as estimates name it (a test holds them equal)


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

    def __post_init__(self) -> None:
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
                "model": self.model, "method": self.method, "versions": dict(self.versions), "label": self.label()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Timing":
        return cls(float(data["seconds"]), data["provenance"], data.get("device_kind", ""), data.get("model", ""),
                   data.get("method", ""), tuple(sorted((data.get("versions") or {}).items())))


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
    "pallasite roofline v2, v5e"): ``speedup`` over two estimate timings. Raises MixedModels when
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


@dataclass(frozen=True)
class Verdict:
    compiled: bool | None  # the TPU compiler tiers (0-2) passed for the chip; None: not checked
    correct: bool | None  # the guarded test passed; None: not tested
    timing: Timing | None = None
    evidence: str = ""  # why it failed, or what was checked
    candidate: bool = True  # False: there was no candidate to evaluate
    checks: tuple[str, ...] = field(default=())  # what ran (e.g. "tiers 0,1,2 for v5e", "time op, interpret mode")

    @classmethod
    def no_candidate(cls, why: str = "no candidate") -> "Verdict":
        return cls(False, False, None, why, candidate=False)

    @property
    def passed(self) -> bool:
        """Compiled and correct (both checked and passed), and a real candidate."""
        return self.candidate and self.compiled is True and self.correct is True

    def status(self) -> str:
        if not self.candidate:
            return "no candidate"
        if self.compiled is not True:
            return "not compiled" if self.compiled is False else "compile not checked"
        if self.correct is not True:
            return "incorrect" if self.correct is False else "correctness not verified"
        return "correct"

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "compiled": self.compiled, "correct": self.correct,
                "status": self.status(), "timing": self.timing.to_json() if self.timing else None,
                "evidence": self.evidence, "checks": list(self.checks)}


@dataclass(frozen=True)
class Winner:
    name: Any | None  # the winner's key (an iteration index, a node id), or None
    speedup: Speedup | None
    why: str  # "winner: ..." or "no winner: ..."


def pick_winner(baseline: Timing | None, candidates: Sequence[tuple[Any, Verdict]], *,
                baseline_name: str = "the original") -> Winner:
    """The fastest correct candidate that is faster than ``baseline`` by the same method, or no winner
    with the reason (no correct candidate, none timed by the baseline's method, none faster)."""
    if baseline is None:
        return Winner(None, None, f"no winner: {baseline_name} was not timed, so nothing can be shown faster")
    passed = [(k, v) for k, v in candidates if v.passed]
    if not passed:
        return Winner(None, None, f"no winner: no candidate compiled and passed the tests ({len(candidates)} tried)")
    best: tuple[Any, Speedup] | None = None
    refusals = []
    for key, verdict in passed:
        s, why = try_speedup(baseline, verdict.timing, baseline_name=baseline_name)
        if s is None:
            refusals.append(why)
            continue
        if best is None or s.value > best[1].value:
            best = (key, s)
    if best is None:
        return Winner(None, None, f"no winner: no correct candidate was timed like {baseline_name} ({refusals[0]})")
    if best[1].value <= 1.0:
        return Winner(None, None, f"no winner: the best correct candidate is {best[1].text()}, not faster")
    return Winner(best[0], best[1], f"winner: {best[0]}, {best[1].text()}")


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
