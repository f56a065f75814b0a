"""Tier 3 as its own worker request, after tiers 1-2 (client side, never imports jax).

An interpret-mode run can take far longer and far more memory than the compiler tiers; when the
worker running it is stopped by a limit, only tier 3 is lost. So the checker asks for tiers 1-2
first and then, in a second request, tier 3 of the entries whose tiers 1-2 did not fail; this module
merges that second answer into the first (typed) result, or, when the request ran past its time or
memory limit, makes the entries' tier-3 outcome ``not_checked`` (the limit as the reason) with one
PLS307 warning, and leaves the passed tiers as they are.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable, Mapping

from ..analysis.codes import CODES
from ..analysis.types import NOT_CHECKED_STATE, Finding
from ..wire.messages import BACKWARD_SUFFIX, CheckEntry, CheckResult, TierOutcome, lowering_only, tier2_only_vmem

from .findings import reply_failures

NOT_CHECKED = NOT_CHECKED_STATE  # analysis/types.py: the one word for it
RESOURCE_STATUSES = ("timed_out", "memory")


def runnable(result: CheckResult) -> tuple[list[str], dict[str, str]]:
    """(names to run tier 3 for, {name: skipped state} for the rest): tier 3 follows passed tiers only, and a
    tier 2 that failed only for the target's scoped VMEM (``tier2_only_vmem``)."""
    run: list[str] = []
    skipped: dict[str, str] = {}
    for entry in result.entries:
        failed = [t for t in (1, 2) if (o := entry.state(t)) is not None and o.state.value == "error"
                  and not (t == 2 and tier2_only_vmem(entry.errors))  # the chip's capacity: values still checked
                  and not lowering_only(entry.errors, t)]  # Mosaic's own rejection: interpret mode still runs it
        if failed:
            skipped[entry.name] = f"skipped: tier {failed[0]} failed"
        else:
            run.append(entry.name)
    return list(dict.fromkeys(run)), skipped


def _with_tier3(entry: CheckEntry, state: str) -> CheckEntry:
    tiers = tuple(o for o in entry.tiers if o.tier != 3) + (TierOutcome.of(3, state),)
    return dataclasses.replace(entry, tiers=tuple(sorted(tiers, key=lambda o: o.tier)))


def merge(result: CheckResult, second: CheckResult) -> CheckResult:
    """``result`` with the tier-3 answer ``second`` in it: outcomes, records, notes, timings, measurements."""
    done_by_name: dict[str, list[CheckEntry]] = {}
    for done in second.entries:
        done_by_name.setdefault(done.name, []).append(done)
    seen: dict[str, int] = {}
    entries = []
    for entry in result.entries:
        index = seen.get(entry.name, 0)
        seen[entry.name] = index + 1
        answers = done_by_name.get(entry.name) or []
        if index >= len(answers):  # same task order in both answers (MaxKernel cases share a name)
            entries.append(entry)
            continue
        done = answers[index]
        outcome = done.state(3)
        entry = _with_tier3(entry, outcome.display() if outcome is not None else "not run")
        entries.append(dataclasses.replace(
            entry,
            errors=entry.errors + tuple(r for r in done.errors if r.tier == 3),
            notes=entry.notes + done.notes,
            timings_s={**entry.timings_s, **{k: v for k, v in done.timings_s.items() if k == "3"}},
            measurements=entry.measurements + done.measurements,
            tier3=done.tier3 or entry.tier3,
            ran_lines=done.ran_lines if done.ran_lines is not None else entry.ran_lines,
        ))
    errors = result.errors + tuple(r for r in second.errors if r not in result.errors)
    return dataclasses.replace(result, entries=tuple(entries), errors=errors,
                               tiers=tuple(sorted(set(result.tiers) | {3})))


def resource_stop(reply: Any, text: str, analysis: Any, last_stage: Mapping[str, Any], target: str,
                  limits: Mapping[str, Any], path: str) -> tuple[Finding | None, str]:
    """The warning and the tier-3 state for a tier-3 request stopped by a limit (time or memory)."""
    what = (f"the time limit ({limits.get('time_limit_s')} s)" if reply.status == "timed_out"
            else f"the memory limit ({limits.get('memory_mb')} MiB)")
    found = reply_failures.reply_failure(reply.status, reply.message, text, analysis, dict(last_stage, tier=3),
                                         target, stderr=reply.stderr_tail, path=path)
    state = f"{NOT_CHECKED}the interpret-mode run reached {what} (PLS307)"
    if found is None:
        return None, state
    message = (f"tier 3 not checked: the interpret-mode run reached {what}; tiers 1-2 keep their verdicts. "
               f"Raise the limit for tier 3, or give smaller example inputs ({found.message})")
    return dataclasses.replace(found, code="PLS307", severity=CODES["PLS307"].severity, message=message, tier=3), state


async def run_tier3(request: Callable[..., Awaitable[Any]], result: CheckResult, findings: list[Finding],
                    failure: Callable[[Any, tuple[int, ...]], tuple[Finding | None, str]],
                    stopped: Callable[[Any], tuple[Finding | None, str]]) -> CheckResult:
    """Ask for tier 3 of the runnable entries of ``result`` (after tiers 1-2); the result with it merged.

    ``request(tiers, entries)`` sends the worker request; ``failure(reply, tiers)`` is the checker's
    finding and state for a failed request; ``stopped(reply)`` is ``resource_stop`` bound to the file.
    """
    names, skipped = runnable(result)
    if skipped:
        result = dataclasses.replace(result, entries=tuple(
            _with_tier3(e, skipped[e.name]) if e.name in skipped else e for e in result.entries))
    # a backward pass (runner/tasks/tasks_backward.py) asks for its own request, after the forward's: its
    # interpret run can be ten times the forward's, and a request past its time limit loses every answer in it
    for group in ([n for n in names if not n.endswith(BACKWARD_SUFFIX)], [n for n in names if n.endswith(BACKWARD_SUFFIX)]):
        if group:
            result = await _requested(request, result, findings, group, failure, stopped)
    return result


async def _requested(request: Callable[..., Awaitable[Any]], result: CheckResult, findings: list[Finding],
                     names: list[str], failure: Callable[[Any, tuple[int, ...]], tuple[Finding | None, str]],
                     stopped: Callable[[Any], tuple[Finding | None, str]]) -> CheckResult:
    """One tier-3 request for ``names``; the result with its answer merged, or with why there is none."""
    reply = await request((3,), names)
    if reply.status == "ok":
        return merge(result, reply.result)
    finding, state = stopped(reply) if reply.status in RESOURCE_STATUSES else failure(reply, (3,))
    if finding is not None:
        findings.append(finding)
    if reply.status not in RESOURCE_STATUSES and (state == "error" or state.startswith("skipped")):
        state = f"{NOT_CHECKED}the worker failed during tier 3 ({reply.status.replace('_', ' ')})"
    return dataclasses.replace(result, entries=tuple(
        _with_tier3(e, state) if e.name in names else e for e in result.entries), tiers=tuple(sorted(set(result.tiers) | {3})))
