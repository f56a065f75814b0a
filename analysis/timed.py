"""``Timed``: a candidate's time phase, the one type every timer answers with (the judge's ``time``, tune's
device timer, eval): the candidate's figure as a ``Timing`` (None: not timed, ``why`` says why), the
reference's by the same method where the same request made one, the test that request ran and who judged it.
A device timing keeps the worker's own ``Measurement`` too (``measured``), which tune writes to its store."""

from __future__ import annotations

from dataclasses import dataclass

from .types import Measurement
from .verdict import JudgedBy, TestResult, Timing, timing_of


@dataclass(frozen=True)
class Timed:
    """``profile``: the breakdown the planner reads; ``lower_bound``: the estimate leaves part of the traffic
    out (never ranked against a figure that counts it); ``summary``: the figure in a few words."""

    candidate: Timing | None
    reference: Timing | None = None
    why: str = ""
    profile: str = ""
    lower_bound: bool = False
    summary: str = ""
    test: TestResult | None = None  # None: the timer did not say (its figure alone)
    judged_by: JudgedBy = JudgedBy.UNKNOWN
    measured: Measurement | None = None  # the worker's record of the candidate's run (a device timing's)

    @classmethod
    def of(cls, measured: Measurement, reference: Measurement | None = None, *, test: TestResult | None = None,
           judged_by: JudgedBy = JudgedBy.UNKNOWN) -> Timed:
        """The time phase of a worker's measurements: a figure only where its run was ok."""
        figure = timing_of(measured) if measured.status == "ok" else None
        ref = timing_of(reference) if reference is not None and reference.status == "ok" else None
        why = "" if figure is not None else (measured.error or measured.status)
        return cls(figure, ref, why, test=test, judged_by=judged_by, measured=measured)

    @property
    def device_s(self) -> float | None:
        """The candidate's device seconds, where it was timed on a device (the only figure a device search ranks)."""
        c = self.candidate
        return c.seconds if c is not None and c.provenance == "device" else None
