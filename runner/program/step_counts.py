"""What a kernel body does over its grid: the HBM copies of its own DMAs and its work, per execution or
summed over grid steps, with what is exact and what is a bound (worker side, plain data).

runner/program/mosaic_counts.py walks a Mosaic kernel's body once per grid step (its program ids and the
scalar-prefetch values the judge knows) and sums ``StepCounts``: the kernel's own DMAs (copies and
bytes) and its work (``body_counts.BodyCounts``), each "exact" or a bound - an undecided
``pl.when``/``scf.if`` counts its largest branch (an upper bound); a loop whose trip count the known
values do not give is bounded by what it can reach (runner/program/loop_bounds.py: an upper bound), or the
kernel is not estimated. ``grid_sample`` picks the grid steps walked (all of them up to MAX_STEPS; a
larger grid is sampled - whole runs of the inner axes at a stratified sample of the outer positions -
and ``scaled``: an even stride over the flat grid aliased with the inner axes and priced a causal
mask's 3 of 4 blocks as 2 of 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .body_counts import BodyCounts

MAX_TRIPS = 1 << 16  # a loop simulated for more trips than this is bounded instead


@dataclass
class StepCounts:
    """Per execution of a kernel body (or summed over grid steps): its own HBM copies and its work."""

    copies: int = 0
    bytes: int = 0
    notes: set[str] = field(default_factory=set)
    upper_bound: bool = False  # DMAs: a cond branch counted on every execution
    lower_bound: bool = False  # DMAs: a while body counted once
    compute: BodyCounts = field(default_factory=BodyCounts)
    compute_upper: bool = False  # work: an undecided cond counted at its largest branch
    compute_lower: bool = False  # work: an undecided while body counted once

    @property
    def exact(self) -> bool:
        return not (self.upper_bound or self.lower_bound)

    @property
    def kind(self) -> str:
        """What the byte count is: "exact", "upper bound", "lower bound" or "bounded both ways"."""
        return _kind(self.upper_bound, self.lower_bound)

    @property
    def compute_kind(self) -> str:
        """What the work count is, in the same words."""
        return _kind(self.compute_upper, self.compute_lower)

    @property
    def data_dependent(self) -> bool:
        """Whether values decide anything here: DMAs to count, or work a branch or loop may skip."""
        return bool(self.copies) or self.compute_upper or self.compute_lower

    def add(self, other: "StepCounts", times: int = 1) -> None:
        self.copies += other.copies * times
        self.bytes += other.bytes * times
        self.notes |= other.notes
        self.upper_bound |= other.upper_bound
        self.lower_bound |= other.lower_bound
        self.compute.add(other.compute, times)
        self.compute_upper |= other.compute_upper
        self.compute_lower |= other.compute_lower


def _kind(upper: bool, lower: bool) -> str:
    if upper and lower:
        return "bounded both ways"
    return "upper bound" if upper else "lower bound" if lower else "exact"


def largest_branch(counted: list[StepCounts]) -> StepCounts:
    """Undecided branches: the one moving the most bytes, with the most work of any (each bounded
    and said so where the branches differ). Shared with runner/program/mosaic_counts.py."""
    dmas_differ = len({(c.copies, c.bytes) for c in counted}) > 1
    work_differs = len({(c.compute.flops, c.compute.transcendentals) for c in counted}) > 1
    out = max(counted, key=lambda c: c.bytes)
    work = max(counted, key=lambda c: (c.compute.flops, c.compute.transcendentals))
    out.compute, out.compute_upper, out.compute_lower = work.compute, work.compute_upper, work.compute_lower
    out.notes |= work.notes
    if dmas_differ:
        out.upper_bound = True
        out.notes.add("DMAs under pl.when/cond counted on every execution (the largest branch): an upper bound")
    if work_differs:
        out.compute_upper = True
        out.notes.add("a pl.when/cond body whose condition the known values do not decide: its largest branch "
                      "counted on every grid step (an upper bound)")
    return out


def counted_once(once: StepCounts) -> StepCounts:
    """A loop body counted once because the known values do not give its trip count: marked a lower
    bound where it copies or works. Shared with runner/program/mosaic_counts.py."""
    if once.copies:
        once.lower_bound = True
        once.notes.add("DMAs in a while loop whose trip count the known values do not decide: counted once "
                       "(a lower bound)")
    if once.compute.flops or once.compute.transcendentals:
        once.compute_lower = True
        once.notes.add("a while loop whose trip count the known values do not decide: its work counted once "
                       "(a lower bound)")
    return once


MAX_STEPS = 256  # grid steps walked one by one (0.1 ms to 0.2 s each: a paged kernel simulates its page loop); a larger grid is sampled and scaled


def grid_sample(grid: tuple[int, ...], limit: int = MAX_STEPS) -> np.ndarray:
    """The flat grid steps walked: all of them up to ``limit``. Else whole runs of the innermost axes
    (where masks and page tables vary: a query block's K/V blocks, a sequence's pages) at a sample
    of the outer positions, one drawn at random (a fixed seed) from each equal stretch of them, so
    a kernel whose work depends only on its inner axes is counted exactly; where even the last axis
    alone is over ``limit``, one step from each of ``limit`` equal stretches of the grid."""
    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    if steps <= limit:
        return np.arange(steps, dtype=np.int64)
    inner = 1
    for size in reversed(grid):
        if inner * size > limit:
            break
        inner *= size
    outer_steps = steps // inner
    picks = _stratified(outer_steps, max(limit // inner, 1)) if inner > 1 else _stratified(steps, limit)
    if inner == 1:
        return picks
    return (picks[:, None] * inner + np.arange(inner, dtype=np.int64)[None, :]).reshape(-1)


def _stratified(n: int, k: int) -> np.ndarray:
    """``k`` of ``range(n)``: one drawn at random (seed 0) from each of k equal stretches."""
    if n <= k:
        return np.arange(n, dtype=np.int64)
    edges = np.linspace(0, n, k + 1)
    draw = np.random.default_rng(0).random(k)
    return np.minimum((edges[:-1] + draw * np.diff(edges)).astype(np.int64), n - 1)


def scaled(total: StepCounts, steps: int, walked: int) -> str | None:
    """Scale counts summed over ``walked`` of ``steps`` grid steps to the whole grid (in place); the
    note that says so, or None when every step was walked. Shared with runner/program/mosaic_counts.py."""
    if steps <= walked:
        return None
    scale = steps / walked
    total.copies, total.bytes = round(total.copies * scale), round(total.bytes * scale)
    work = total.compute
    work.flops, work.mxu_flops = round(work.flops * scale), round(work.mxu_flops * scale)
    work.transcendentals = round(work.transcendentals * scale)
    work.dots = [(f * scale, d, e) for f, d, e in work.dots]
    return (f"the kernel body walked at {walked} of {steps} grid steps (whole runs of the inner grid axes at "
            "a stratified sample of the outer ones), scaled")
