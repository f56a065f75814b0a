"""Optimize in the editor: the "Optimize" / "Optimize step by step" lenses, the ``pallasite.optimize``
command (an engine job with per-phase progress and cancel), step mode's plan documents, the winner
(a new file beside the original, or an edit of the document) and the hover with the run's table.

Step mode: after the plan the server writes ``.pallasite/plans/<run>-<iteration>.md`` and opens it
with ``window/showDocument``; lenses in it run ``pallasite.optimize.approve`` / ``.revise`` /
``.stop``. *Revise* reads the plan file as it is now (saved, or the open document's text): the
user's edits are the instruction. The candidate is shown the same way as a ``.diff`` document.
The loop is agents/optimize.py's; this module only converts to LSP.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any, Sequence

from pallasite.agents.optimize import Budgets, Decision, RunState, new_run, optimize
from pallasite.analysis.types import KernelSite, Span

from .lenses import Lens

OPTIMIZE_COMMAND = "pallasite.optimize"
APPROVE_COMMAND = "pallasite.optimize.approve"
REVISE_COMMAND = "pallasite.optimize.revise"
STOP_COMMAND = "pallasite.optimize.stop"


def runs(ls: Any) -> dict[str, RunState]:
    """uri -> the last optimize run of that document (kept on the server object)."""
    if not hasattr(ls, "optimize_runs"):
        ls.optimize_runs = {}
    return ls.optimize_runs


def pending(ls: Any) -> dict[str, asyncio.Future]:
    """path of a plan/diff document -> the decision step mode waits for."""
    if not hasattr(ls, "optimize_pending"):
        ls.optimize_pending = {}
    return ls.optimize_pending


def optimize_lenses(sites: Sequence[KernelSite], uri: str) -> list[Lens]:
    tpu = [s for s in sites if s.backend != "gpu"]
    if not tpu:
        return []
    return [Lens(tpu[0].call_span, "Optimize", OPTIMIZE_COMMAND, ({"uri": uri, "mode": "auto"},)),
            Lens(tpu[0].call_span, "Optimize step by step", OPTIMIZE_COMMAND, ({"uri": uri, "mode": "step"},))]


def step_documents(ls: Any) -> dict[str, Any]:
    """uri -> the editor's copy of an open plan / diff / tests document (text and version only:
    these are never checked as kernels); *Revise* reads the user's edits from here, saved or not."""
    if not hasattr(ls, "optimize_step_documents"):
        ls.optimize_step_documents = {}
    return ls.optimize_step_documents


def is_step_document(path: str) -> bool:
    return "/.pallasite/plans/" in path.replace("\\", "/")


def step_lenses(ls: Any, path: str, uri: str) -> list[Lens]:
    """Approve / Revise / Stop at the top of a plan, diff or tests document that a run is waiting on
    (none on an old one: its run has moved on)."""
    if not is_step_document(path) or _key(path) not in pending(ls):
        return []
    top = Span(0, 0, 0, 0)
    return [Lens(top, "Approve", APPROVE_COMMAND, ({"uri": uri},)),
            Lens(top, "Revise (your edits to this file are the instruction)", REVISE_COMMAND, ({"uri": uri},)),
            Lens(top, "Stop", STOP_COMMAND, ({"uri": uri},))]


def _key(path: str) -> str:
    return str(Path(path).resolve())


def decide(ls: Any, path: str, action: str, text: str) -> bool:
    future = pending(ls).get(_key(path))
    if future is None or future.done():
        return False
    future.set_result(Decision(action, text))
    return True


def table_markdown(state: RunState) -> str:
    rows = ["| it | verdict | time | speedup | plan |", "|---|---|---|---|---|"]
    for r in state.table():
        t = f"{r['time_s'] * 1e6:.2f} us" if r["time_s"] else "-"
        s = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        rows.append(f"| {r['iteration']}{' *' if r['best'] else ''} | {r['verdict']} | {t} | {s} | {r['plan'][:50]} |")
    return "\n".join(rows)


def summary(state: RunState) -> str:
    best = state.best
    if best is None or not state.speedup():
        return f"optimize: no valid faster candidate ({state.stopped})"
    return (f"optimize: {state.speedup():.2f}x vs the original file (baseline: the original by the same method, "
            f"{best.label}); plan: {best.summary}")


def hover(state: RunState | None, sites: Sequence[KernelSite], line: int, column: int) -> tuple[str, Span] | None:
    """On a pallas_call: the speedup with its baseline and provenance, the plan summary, the table."""
    if state is None:
        return None
    for site in sites:
        if site.call_span.contains(line, column):
            text = f"**{summary(state)}**\n\n{table_markdown(state)}\n\ntimes: {state.method}; run {state.run_id}"
            return text, site.call_span
    return None


async def run(ls: Any, doc: Any, mode: str, iterations: int, winner: str, token: Any = None) -> dict[str, Any]:
    from pallasite.agents.optimize_eval import EngineEvaluator
    from pallasite.agents.optimize_record import OptimizeRecorder
    from pallasite.agents.providers import make_provider
    from pallasite.engine.store_cache import workspace_for

    from .progress import WorkProgress

    session = ls.session
    engine = session.engine
    text, path = doc.text, doc.path
    workspace = Path(workspace_for([path], cwd=Path(path).parent))
    agent = session.settings.agent
    provider = make_provider(agent.provider_config())
    chip = session.settings.target
    options = dataclasses.replace(session.check_options(), tiers=tuple(t for t in session.check_options().tiers if t < 3))
    evaluator = EngineEvaluator(engine, path, text, options, chip=chip)
    state = new_run(path, text)
    state.context["chip"] = chip
    recorder = OptimizeRecorder(workspace)
    progress = WorkProgress(ls, f"pallasite: optimizing {Path(path).name} ({mode})", token)

    async def show(name: str, body: str) -> str:
        folder = workspace / ".pallasite" / "plans"
        folder.mkdir(parents=True, exist_ok=True)
        file = (folder / name).resolve()
        file.write_text(body, encoding="utf-8")
        future = asyncio.get_running_loop().create_future()
        pending(ls)[str(file)] = future
        from lsprotocol import types as lsp
        from pygls.uris import from_fs_path

        try:
            await ls.window_show_document_async(lsp.ShowDocumentParams(uri=from_fs_path(str(file)), take_focus=True))
        except Exception as exc:  # noqa: BLE001 - a client without showDocument still gets the lenses
            session.log(f"pallasite: could not open {file}: {exc}")
        return str(file)

    async def gate(phase: str, payload: dict) -> Decision:
        if phase == "plan":
            file = await show(f"{state.run_id}-{payload['iteration']}.md", payload["plan"] + "\n")
        elif phase == "implement":
            file = await show(f"{state.run_id}-{payload['iteration']}.diff", payload["diff"])
        else:
            return Decision("approve")
        progress.report(f"iteration {payload['iteration']}: waiting for approve / revise on {Path(file).name}")
        try:
            decision = await pending(ls)[file]
        finally:
            pending(ls).pop(file, None)
        return decision

    async def body(report: Any) -> RunState:
        def on_phase(iteration: int, phase: str, message: str) -> None:
            progress.report(f"iteration {iteration}/{iterations}: {phase}: {message}")

        return await optimize(state, provider, evaluator, Budgets(iterations=iterations, fix_rounds=0,
                                                                  max_tokens=agent.maxTokens * iterations),
                              recorder=recorder, gate=gate if mode == "step" else None, on_phase=on_phase)

    progress.begin([])
    job = engine.jobs.submit("optimize", path, body)
    try:
        job = await engine.jobs.wait(job.id)
    except asyncio.CancelledError:
        engine.jobs.cancel(job.id)
        progress.end("cancelled")
        raise
    finally:
        await provider.close()
        recorder.close()
    if job.state != "done":
        progress.end(job.state)
        return {"ok": False, "message": job.error or job.state, "job": job.id, "run_id": state.run_id}
    final: RunState = job.result
    runs(ls)[doc.uri] = final
    progress.end(summary(final))
    result = {"ok": final.best is not None, "message": summary(final), "job": job.id, "run_id": final.run_id,
              "table": final.table(), "method": final.method, "speedup": final.speedup(), "written": None}
    best = final.best
    if best is not None and final.speedup() and final.speedup() > 1.0:
        if winner == "edit":
            result["edit"] = best.source
        else:
            target = Path(path).with_suffix(".optimized.py")
            target.write_text(best.source, encoding="utf-8")
            result["written"] = str(target)
    return result
