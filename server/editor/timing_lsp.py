"""Time and Profile in the editor: the lenses, the commands' logic and the hover section.

- ``timing_lenses(sites, tasks, uri, backend, last)``: "Time on <backend>" and "Profile on
  <backend>" above each TPU pallas_call of a file that states a task, with the latest result's
  one-line summary (and its provenance) in the title once there is one.
- ``submit(session, doc, op, options, report)`` / ``run(...)``: the ``pallasite.time`` /
  ``pallasite.profile`` commands, as an engine job (``engine/jobs.py``): the document's text
  (saved or not) is timed on the configured backend
  (``settings.backend``), the measurements go to the results store, and the summary is kept for
  lenses and hovers. Cancelling the command's task cancels the request (the worker is told, and
  killed if it does not stop).
- ``hover_section(session, path, names)``: markdown for the kernel hover: this session's latest
  timings, then the store's, each with where it came from (device kind or CPU interpret, backend,
  versions, method, when).

No pygls here: server/lsp.py converts. No JAX: the work runs in a worker (engine/timing.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ...analysis.types import KernelSite, KernelTask

from ..reports import timing_format
from .lenses import Lens
from ..features import LastTiming  # noqa: F401  (the records this feature keeps)

TIME_COMMAND = "pallasite.time"
PROFILE_COMMAND = "pallasite.profile"


def results(session: Any) -> dict[str, dict[str, LastTiming]]:
    """path -> entry -> latest timing of this session (the session's feature state)."""
    return session.features.timings


def backend_label(settings: Any) -> str:
    backend = settings.backend
    if backend.kind == "ssh":
        return f"ssh {backend.host or (backend.command.split()[0] if backend.command else '?')}"
    if backend.kind == "ray":
        return "Ray" + (f" {backend.rayAddress}" if backend.rayAddress else "")
    return "local"


def _entry_for(site: KernelSite, tasks: Sequence[KernelTask]) -> str | None:
    entries = [t.entry for t in tasks]
    if site.enclosing_function in entries:
        return site.enclosing_function
    return entries[0] if len(entries) == 1 else None


def timing_lenses(sites: Sequence[KernelSite], tasks: Sequence[KernelTask], uri: str, backend: str,
                  last: dict[str, LastTiming] | None = None) -> list[Lens]:
    out = []
    for site in sites:
        if site.backend == "gpu" or not tasks:
            continue
        entry = _entry_for(site, tasks)
        if entry is None:
            continue
        args = ({"uri": uri, "entry": entry},)
        seen = (last or {}).get(entry)
        suffix = f" (last: {seen.summary})" if seen is not None and seen.op == "time" else ""
        out.append(Lens(site.call_span, f"Time on {backend}{suffix}", TIME_COMMAND, args))
        out.append(Lens(site.call_span, f"Profile on {backend}", PROFILE_COMMAND, args))
    return out


def _validate(options: dict[str, Any]) -> str | None:
    for key in ("runs", "warmup"):
        value = options.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            return f"{key} must be a positive integer, got {value!r}"
    config = options.get("config")
    if config is not None and (not isinstance(config, dict) or not all(isinstance(v, int) for v in config.values())):
        return f"config must map tunable names to integers, got {config!r}"
    return None


def _request(settings: Any, doc: Any, op: str, options: dict[str, Any]) -> tuple[Any, dict[str, Any]] | str:
    """(the remote backend, the worker's time request) for the document's text, or what is wrong."""
    from ...engine import timing

    problem = _validate(options)
    if problem:
        return problem
    remote = settings.backend.remote()
    try:
        remote.validate()
        files = timing.task_files(doc.path)
        return remote, timing.time_request(files, op, text=doc.text, entry=options.get("entry"),
                                           runs=options.get("runs"), warmup=options.get("warmup"),
                                           config=options.get("config"),
                                           chip=settings.target if op == "profile" else None)
    except (ValueError, OSError) as exc:
        return str(exc)


async def run(session: Any, doc: Any, op: str, options: dict[str, Any],
              report: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The command's work: returns ``{"ok", "status", "summary", "where", "result"}`` or an error."""
    from ...engine import timing

    request = _request(session.settings, doc, op, options)
    if isinstance(request, str):
        return {"ok": False, "message": f"pallasite.{op}: {request}"}
    remote, params, settings = *request, session.settings
    base = timing.timing_worker(settings.check.memoryMb, request_limit_s=settings.check.timeLimitS,
                                python=settings.interpreter())

    def on_progress(message: str, fraction: float | None) -> None:
        if report is not None:
            report(message)

    run_ = await timing.run_timing(remote, params, base=base, on_progress=on_progress)
    result = run_.result
    if result is None:
        return {"ok": False, "message": f"{op} on {run_.where} did not run: {run_.reply.message}",
                "status": run_.reply.status}
    note = timing.record(run_, doc.path)
    summary = timing_format.summary_line(result)
    entry = str(result.get("entry") or options.get("entry") or "")
    prov = str((result.get("candidate") or {}).get("provenance") or "")
    results(session).setdefault(doc.path, {})[entry] = LastTiming(op, entry, summary, run_.where, time.time(), prov)
    return {"ok": True, "status": timing_format.status_of(run_), "summary": summary, "where": run_.where,
            "worker": run_.describe_worker(), "warnings": run_.warnings + ([note] if note else []),
            "text": timing_format.to_text(run_, doc.path), "result": result}


def submit(session: Any, doc: Any, op: str, options: dict[str, Any],
           report: Callable[[str], None] | None = None) -> Any:
    """Start the command's work as an engine job (kind ``time``/``profile``, with its progress), so
    status bars and agents see it with the checks; cancelling the job's task cancels the request."""
    from ...engine.timing import as_job

    def work(job_report: Callable[[str], None]) -> Any:
        def both(message: str) -> None:
            job_report(message)
            if report is not None:
                report(message)

        return run(session, doc, op, options, both)

    return as_job(session.engine.jobs, op, doc.path, work)


def _session_rows(latest: dict[str, LastTiming], names: set[str]) -> tuple[list[str], list[str]]:
    """(rows measured on a device, other rows) of this session's latest timings of ``names``."""
    measured, other = [], []
    for entry, last in latest.items():
        if entry in names:
            when = time.strftime("%H:%M:%S UTC", time.gmtime(last.when))
            (measured if last.provenance == "device" else other).append(
                f"| {last.op} `{entry}` | {last.summary} | {last.where}, this session, {when} |")
    return measured, other


def hover_section(session: Any, path: str, names: set[str]) -> str:
    """Markdown for a kernel hover: device measurements under "measured on a device", everything else
    (cost-model estimates, CPU interpret mode, host wall clock) under its own heading, each with its
    provenance ('' if none). An estimate is never listed as measured."""
    measured, other = _session_rows(results(session).get(path, {}), names)
    seen = {entry for entry in results(session).get(path, {})}
    for record in session.engine.stored_measurements(path):
        base = (record.kernel or "").removesuffix(" (reference)")
        if base not in names or base in seen:
            continue
        m = record.measurement
        versions = ", ".join(v for v in (f"jax {m.jax_version}" if m.jax_version else "",
                                         f"libtpu {m.libtpu_version}" if m.libtpu_version else "") if v)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.created))
        prov = str(getattr(m.provenance, "value", m.provenance))
        value = (f"{timing_format.duration(m.median_ns)} ({timing_format.label({'provenance': prov, 'device_kind': m.device_kind})})"
                 if m.median_ns is not None else f"{m.status}: {m.error or ''}"[:120])
        (measured if prov == "device" else other).append(
            f"| `{record.kernel}` | {value} | {record.key.backend}, {versions}; {m.method[:80]}; store, {when} |")
        if len(measured) + len(other) >= 6:
            break
    out = ""
    for title, rows in (("measured on a device", measured), ("estimated, or not TPU time", other)):
        if rows:
            out += f"\n\n**{title}**\n\n| what | time | from |\n|---|---|---|\n" + "\n".join(rows)
    return out
