"""Tier 3 as its own worker request, after tiers 1-2 (client side, never imports jax).

An interpret-mode run can take far longer and far more memory than the compiler tiers; when the
worker running it is stopped by a limit, only tier 3 is lost. So the checker asks for tiers 1-2
first and then, in a second request, tier 3 of the entries whose tiers 1-2 did not fail; this module
merges that second answer into the first result, or, when the request ran past its time or memory
limit, makes the entries' tier-3 state ``not checked: <the limit>`` with one PLS307 warning, and
leaves the passed tiers as they are.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable, Mapping

from pallasite.analysis.codes import CODES
from pallasite.analysis.types import Finding

from . import reply_failures

NOT_CHECKED = "not checked: "
RESOURCE_STATUSES = ("timeout", "memory")


def runnable(entries: list[dict[str, Any]]) -> tuple[list[str], dict[str, str]]:
    """(names to run tier 3 for, {name: skipped state} for the rest): tier 3 follows passed tiers only."""
    run: list[str] = []
    skipped: dict[str, str] = {}
    for entry in entries:
        states = entry.get("tiers") or {}
        failed = [t for t in ("1", "2") if states.get(t) == "error"]
        if failed:
            skipped[str(entry.get("name"))] = f"skipped: tier {failed[0]} failed"
        else:
            run.append(str(entry.get("name")))
    return list(dict.fromkeys(run)), skipped


def merge(result: dict[str, Any], second: Mapping[str, Any]) -> None:
    """Put the tier-3 answer ``second`` into ``result``: states, records, notes, timings (in place)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for entry in result.get("entries") or ():
        by_name.setdefault(str(entry.get("name")), []).append(entry)
    seen: dict[str, int] = {}
    for done in second.get("entries") or ():
        name = str(done.get("name"))
        index = seen.get(name, 0)
        seen[name] = index + 1
        targets = by_name.get(name) or []
        if index >= len(targets):
            continue
        entry = targets[index]  # same task order in both answers (MaxKernel cases share a name)
        entry.setdefault("tiers", {})["3"] = (done.get("tiers") or {}).get("3", "not run")
        entry.setdefault("errors", []).extend(r for r in done.get("errors") or () if str(r.get("tier")) == "3")
        entry["notes"] = list(entry.get("notes") or ()) + list(done.get("notes") or ())
        entry.setdefault("timings_s", {}).update({k: v for k, v in (done.get("timings_s") or {}).items() if k == "3"})
        if done.get("tier3") is not None:
            entry["tier3"] = done["tier3"]
    result["errors"] = list(result.get("errors") or ()) + [r for r in second.get("errors") or ()
                                                          if r not in (result.get("errors") or ())]
    result["tiers"] = sorted({int(t) for t in result.get("tiers") or ()} | {3})


def resource_stop(reply: Any, text: str, analysis: Any, last_stage: Mapping[str, Any], target: str,
                  limits: Mapping[str, Any], path: str) -> tuple[Finding | None, str]:
    """The warning and the tier-3 state for a tier-3 request stopped by a limit (time or memory)."""
    what = (f"the time limit ({limits.get('time_limit_s')} s)" if reply.status == "timeout"
            else f"the memory limit ({limits.get('memory_mb')} MiB)")
    found = reply_failures.reply_failure(reply.status, reply.message.split("; its stderr ends with", 1)[0], text,
                                         analysis, dict(last_stage, tier=3), target, stderr=reply.stderr_tail,
                                         path=path)
    state = f"{NOT_CHECKED}the interpret-mode run reached {what} (PLS307)"
    if found is None:
        return None, state
    message = (f"tier 3 not checked: the interpret-mode run reached {what}; tiers 1-2 keep their verdicts. "
               f"Raise the limit for tier 3, or give smaller example inputs ({found.message})")
    return dataclasses.replace(found, code="PLS307", severity=CODES["PLS307"].severity, message=message, tier=3), state


async def run_tier3(request: Callable[..., Awaitable[Any]], result: dict[str, Any], findings: list[Finding],
                    failure: Callable[[Any, tuple[int, ...]], tuple[Finding | None, str]],
                    stopped: Callable[[Any], tuple[Finding | None, str]]) -> None:
    """Ask for tier 3 of the runnable entries of ``result`` (after tiers 1-2) and merge the answer.

    ``request(tiers, entries)`` sends the worker request; ``failure(reply, tiers)`` is the checker's
    finding and state for a failed request; ``stopped(reply)`` is ``resource_stop`` bound to the file.
    """
    entries = list(result.get("entries") or ())
    names, skipped = runnable(entries)
    for entry in entries:
        if str(entry.get("name")) in skipped:
            entry.setdefault("tiers", {})["3"] = skipped[str(entry.get("name"))]
    if not names:
        return
    reply = await request((3,), names)
    if reply.status == "ok":
        merge(result, reply.result or {})
        return
    finding, state = stopped(reply) if reply.status in RESOURCE_STATUSES else failure(reply, (3,))
    if finding is not None:
        findings.append(finding)
    if reply.status not in RESOURCE_STATUSES and state == "error":
        state = f"{NOT_CHECKED}the worker failed during tier 3 ({reply.status})"
    for entry in entries:
        if str(entry.get("name")) in names:
            entry.setdefault("tiers", {})["3"] = state
