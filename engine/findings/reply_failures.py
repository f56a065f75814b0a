"""Findings for check requests that did not come back "ok", and where the check was when they failed.

Client side (never imports jax). The checker follows the worker's structured progress
(``stage_of``: which tier and entry, importing, the user's line near the time limit); when a
request ends badly, ``reply_failure`` says what happened where: a time limit (PLS903, or PLS205
during a tier-2 compile), the memory limit (PLS904), a crash (PLS902) — at the line the worker
named, at the line a fatal signal's Python traceback names for a crash while importing
(``crash_line``), else the file's first line for import-time trouble, else the pallas_call. A
worker that never started (status ``not_started``: its interpreter is missing or lacks pallasite)
is the environment's problem, not the kernel's: ``startup_failure`` is one PLS906 at line 1 that
says what to install.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping, Sequence

from ...analysis.codes import CODES
from ...analysis.types import Finding, Related, Span

from ...wire.messages import Progress, Stage

from ..workers.backend import Reply
from .classify import ORIGIN_RUNNER
from .locate import call_span, line_span, related_places
from .origin_findings import buffer_place


def stage_of(report: Progress) -> dict[str, Any]:
    """Where the check is, from a progress report's structured fields (never from its words):
    ``{"tier": 2, "entry": "matmul"}``, ``{"stage": "import"}``, ``{"stage": "script"}``, plus ``"line"``
    when the worker named the user's line near the time limit. Every report carries its whole step."""
    step: dict[str, Any] = {}
    if report.stage == Stage.TIER and report.tier is not None:
        step = {"tier": report.tier, "entry": report.entry}
    elif report.stage in (Stage.IMPORT, Stage.SCRIPT):
        step = {"stage": report.stage.value}
    if report.line is not None:
        step["line"] = report.line
    if report.vmem is not None:  # the blocks of the call being compiled exceed the chip's VMEM
        v = report.vmem
        step["vmem"] = {"need_mib": v.need_bytes / 2**20, "chip_mib": v.chip_bytes / 2**20, "role": v.role,
                        "index": v.index, "block": v.block}
    return step


def reply_failure(status: str, message: str, text: str, analysis: Any, last_stage: Mapping[str, Any], target: str,
                  *, stderr: str = "", path: str | None = None, time_limit_s: float | None = None) -> Finding | None:
    """The finding for a request that did not come back "ok" (None when it was cancelled).

    ``stderr``: the worker's last stderr lines (kept as the finding's detail); for a crash while
    importing ``path``, the Python traceback a fatal signal printed there names the line it was on.
    """
    if status == "cancelled":
        return None
    lines = text.splitlines()
    sites = tuple(getattr(analysis, "sites", ()) or ())
    tier = int(last_stage.get("tier") or 1)
    entry = last_stage.get("entry")
    site = next((s for s in sites if entry and s.enclosing_function == entry), sites[0] if sites else None)
    span = call_span(site) if site is not None else Span.point(0)
    where = f" ({'tier %d' % tier}{', ' + entry if entry else ''})" if last_stage.get("tier") else (
        " (while importing the file)" if last_stage.get("stage") == "import" else "")
    importing = last_stage.get("stage") == "import"
    if importing and status in ("crashed", "memory") and not last_stage.get("line"):
        crashed_at = crash_line(stderr, path) if path else None
        last_stage = dict(last_stage, line=crashed_at) if crashed_at else last_stage
        span = Span.point(0)  # no line known: the file, not any pallas_call
    if last_stage.get("line"):  # the worker said where the user's code was (time ran out, or it crashed)
        span = line_span(int(last_stage["line"]) - 1, lines)
        where = where[:-1] + f", at line {last_stage['line']})" if where else f" (at line {last_stage['line']})"
    related: tuple = ()
    severity = None  # the code's registered severity unless a case below knows better
    if status == "timed_out":
        code = "PLS205" if last_stage.get("tier") == 2 and not last_stage.get("line") else "PLS903"
        if (importing and not last_stage.get("line")) or (not last_stage and not site):
            span = _first_import_like_line(lines)
        if not time_limit_s:  # the client's words: "no result after 60 s"
            said = re.search(r"(\d+(?:\.\d+)?) s\b", message or "")
            time_limit_s = float(said.group(1)) if said else None
        limit = f"the {time_limit_s:g} s time limit" if time_limit_s else "its time limit"
        if code == "PLS205":
            kernel = site.kernel_name if site is not None and site.kernel_name else None
            what = f"kernel {kernel}" + (f" (entry {entry})" if entry and entry != kernel else "") if kernel else (
                f"entry {entry}" if entry else "the kernel")
            body = (f"the TPU compiler did not finish compiling {what} for {target} within {limit}, so tier 2 "
                    f"did not check it (not an error in the kernel: large kernels can take tens of seconds in the "
                    f"deviceless compiler on a CPU). Raise --time-limit or the check.timeLimitS setting")
        else:
            body = f"the check ran past {limit}{where}: {message}".rstrip(": ")
        vmem = last_stage.get("vmem") if code == "PLS205" else None
        if vmem and site is not None:  # said first: the blocks cannot fit, which is why it never finished
            place = buffer_place(site, vmem["role"], vmem["index"], text, lines)
            body = (f"the blocks of this pallas_call need {vmem['need_mib']:.1f} MiB of VMEM (double-buffered), more "
                    f"than the {target}'s {vmem['chip_mib']:.1f} MiB; the largest is {vmem['role']}[{vmem['index']}] "
                    f"{vmem['block']}. Shrink the blocks: the compiler ran past {limit} trying to fit them")
            severity = "error"  # the blocks cannot fit: the compiler would reject them, given the time
            if place is not None:
                span, related, said = place
                body += f"; {said}" if said else ""
                related = related + (Related(call_span(site), "the pallas_call"),)
    elif status == "memory":
        code, body = "PLS904", f"the check ran past its memory limit{where}: {message}".rstrip(": ")
    else:
        code, body = "PLS902", f"the check worker failed{where}: {message or status}"
    return Finding(
        code=code,
        message=body,
        span=span,
        severity=severity or CODES[code].severity,
        tier=tier,
        detail=f"the worker's last stderr lines:\n{stderr}" if stderr.strip() else None,
        origin=ORIGIN_RUNNER,
        chip=target,
        kernel=site.kernel_name if site is not None and not importing else None,
        related=() if importing else (related or related_places(site, span, lines)),
    )


_DUMP_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>.+)$', re.M)


def crash_line(stderr: str, path: str) -> int | None:
    """The 1-based line of ``path`` a crashed worker was running, from the Python traceback a fatal
    signal printed on its stderr (faulthandler: most recent call first, the crashing thread marked
    "Current thread"); None when there is none (SIGKILL prints nothing)."""
    block = stderr.split("Current thread", 1)[-1]
    name = os.path.basename(path)
    for m in _DUMP_FRAME.finditer(block):
        if m.group("file") == path or os.path.basename(m.group("file")) == name:
            return int(m.group("line"))
    return None


_NOT_FOUND = re.compile(r"No such file or directory|command not found|not found", re.I)


def is_startup_failure(reply: Reply) -> bool:
    """Whether a failed request means the worker never started (its environment, not the kernel)."""
    return reply.status == "not_started"


def startup_failure(reply: Reply, interpreter: str, tiers: Sequence[int], target: str) -> Finding:
    """One file-level finding (PLS906, at line 1) for a worker that could not start, saying what
    to install or set (decided on ``reply.start_problem``); the worker's last stderr line is quoted once."""
    said = [line.strip() for line in (reply.stderr_tail or "").splitlines() if line.strip()]
    last = said[-1] if said else ""
    launcher = reply.launcher
    where = " ".join(launcher) if launcher else interpreter
    missing = reply.missing_module
    run_tiers = ", ".join(str(t) for t in tiers)
    if reply.start_problem == "missing_module" and missing and launcher:
        body = (f"the check worker could not start through `{where}`: it cannot import "
                f"{missing} there. Install the same pallasite on that host (its wheel, "
                f"built from your checkout: docs/tpu.md), so that `pallasite worker` runs")
    elif reply.start_problem == "missing_module" and missing:
        module = missing.split(".")[0]
        body = (f"the check worker could not start: {interpreter} cannot import {module}. "
                + (f"Install pallasite into {interpreter}: {interpreter} -m pip install /path/to/pallasite (your checkout) "
                   "(or set the worker interpreter to the environment pallasite is installed in)"
                   if module == "pallasite" else f"Install {module} into {interpreter}: {interpreter} -m pip install {module}"))
    elif reply.start_problem == "not_found" or (launcher and reply.start_problem == "exited" and _NOT_FOUND.search(last)):
        reason = (reply.error.message if reply.error is not None else reply.message) \
            if reply.start_problem == "not_found" else last
        body = (f"the check worker could not start: `{where}` cannot be run ({reason}). "
                f"Set the worker interpreter to a Python that has pallasite installed")
    elif reply.start_problem == "unconfined":  # model-written code, and no confined worker here (engine/workers/confinement.py)
        body = reply.message.rstrip(".")
    else:
        body = f"the check worker could not start: {reply.message}" + (f"; it said: {last}" if last else "")
    return Finding(
        code="PLS906",
        message=f"{body}; tier(s) {run_tiers} were not run.",
        span=Span.point(0),
        severity="warning",  # nothing past tier 0 was checked: not a pass (--strict fails it), not a kernel error
        tier=min(tiers) if tiers else 1,
        origin=ORIGIN_RUNNER,
        chip=target,
    )


def _first_import_like_line(lines: list[str]) -> Span:
    for i, line in enumerate(lines):
        if line.strip() and not line.lstrip().startswith(("#", '"""', "'''")):
            return line_span(i, lines)
    return Span.point(0)
