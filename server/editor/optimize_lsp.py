"""Optimize in the editor: the "Optimize" / "Optimize step by step" lenses, the ``pallasite.optimize``
command (an engine job with per-phase progress and cancel), step mode's documents, the winner
(a new file beside the original, or a versioned edit of the document) and the hover with the run's table.

Step mode: each gate phase whose payload carries text is written under ``.pallasite/plans/`` (the
plan as ``<run>-<it>.md``, the candidate as ``<run>-<it>.diff``, the test writer's tests as
``<run>-tests.py``) and opened with ``window/showDocument``; lenses in it run
``pallasite.optimize.approve`` / ``.revise`` / ``.stop`` while the run waits on it. *Revise* reads
the document as the editor has it (``step_documents``: saved or not), else the file: the user's
edits are the instruction. Winner placement (``agent.optimizeWinner``): ``newFile`` writes
``<stem>.optimized.py`` and opens it; ``edit`` applies a versioned edit only while the document is
the text the run started from, else writes the new file and says why (``place_winner``).
The loop is agents/optimize.py's; this module only converts to LSP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Sequence

from ...agents.optimize import Decision, RunState, new_run, row_word
from ...analysis.types import KernelSite, Span

from .lenses import Lens

OPTIMIZE_COMMAND = "pallasite.optimize"
APPROVE_COMMAND = "pallasite.optimize.approve"
REVISE_COMMAND = "pallasite.optimize.revise"
STOP_COMMAND = "pallasite.optimize.stop"


def runs(ls: Any) -> dict[str, RunState]:
    """uri -> the last optimize run of that document (the session's feature state)."""
    return ls.session.features.optimize_runs


def pending(ls: Any) -> dict[str, asyncio.Future]:
    """resolved path of a plan / diff / tests document -> the decision step mode waits for."""
    return ls.session.features.pending_decisions


def optimize_lenses(sites: Sequence[KernelSite], uri: str) -> list[Lens]:
    tpu = [s for s in sites if s.backend != "gpu"]
    if not tpu:
        return []
    return [Lens(tpu[0].call_span, "Optimize", OPTIMIZE_COMMAND, ({"uri": uri, "mode": "auto"},)),
            Lens(tpu[0].call_span, "Optimize step by step", OPTIMIZE_COMMAND, ({"uri": uri, "mode": "step"},))]


def step_documents(ls: Any) -> dict[str, Any]:
    """uri -> the editor's copy of an open plan / diff / tests document (features.StepDocument: text
    and version only, never checked as kernels); *Revise* reads the user's edits from here, saved or not."""
    return ls.session.features.step_documents


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


def _hint_words(winner: Any) -> str:
    """The winner's method in an inlay hint's few words: "estimate (v6e)", "device (TPU v6 lite)" (its Timing's)."""
    timing = winner.result.timing if winner is not None and winner.result is not None else None
    return f"{timing.provenance} ({timing.device_kind})" if timing is not None else ""


def table_markdown(state: RunState) -> str:
    rows = ["| it | status | time | speedup | judged by | plan |", "|---|---|---|---|---|---|"]
    for r in state.table():
        t = f"{r['time_s'] * 1e6:.2f} us" if r["time_s"] else "-"
        s = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        rows.append(f"| {r['iteration']}{' *' if r['best'] else ''} | {row_word(r)} | {t} | {s} | "
                    f"{r.get('judged_by') or '-'} | {r['plan'][:50]} |")
    return "\n".join(rows)


def summary(state: RunState) -> str:
    outcome = state.outcome()
    best = state.winner
    if best is None:
        return f"optimize: {outcome.why} ({state.stopped})"
    return f"optimize: {outcome.speedup.text()}; plan: {best.summary}"


def hover(state: RunState | None, sites: Sequence[KernelSite], line: int, column: int) -> tuple[str, Span] | None:
    """On a pallas_call: the speedup with its baseline and provenance, the plan summary, the table."""
    if state is None:
        return None
    for site in sites:
        if site.call_span.contains(line, column):
            text = f"**{summary(state)}**\n\n{table_markdown(state)}\n\ntimes: {state.method}; run {state.run_id}"
            return text, site.call_span
    return None


# what a gate phase shows: (payload key holding its text, file suffix); another phase whose payload
# carries a ``text`` is shown as ``.txt``; a phase with no text to show passes on its own
SHOWN = {"plan": ("plan", "md"), "implement": ("diff", "diff"), "tests": ("tests", "py")}


def shown_document(run_id: str, phase: str, payload: dict) -> tuple[str, str] | None:
    """(file name, text) of the document step mode opens for a phase, or None (nothing to review)."""
    key, suffix = SHOWN.get(phase, ("text", "txt"))
    text = payload.get(key)
    if not isinstance(text, str):
        return None
    iteration = payload.get("iteration", 0)
    if phase == "tests":
        tag = "tests"  # settled once, before iteration 1
    elif phase in SHOWN:
        tag = str(iteration)
    else:
        tag = f"{iteration}-{phase}"
    return f"{run_id}-{tag}.{suffix}", text if text.endswith("\n") else text + "\n"


async def run(cmd: Any, mode: str, iterations: int, device: Any = None) -> tuple[dict[str, Any], RunState | None]:
    """The run of the command's document as an engine job (kind "optimize"): its result dict and final
    state (None if it did not finish). Cancelling the command cancels the job and waits for it to end."""
    from ...agents.llm.providers import make_provider

    doc = cmd.doc
    # candidates run only in confined workers (engine/workers/confinement.py): refused here where none can be made
    setup = cmd.run_setup("Optimize", device=device)
    progress = await cmd.progress(f"pallasite: optimizing {Path(doc.path).name} ({mode})")
    run_job, recorder = optimize_job(doc, setup, iterations), setup.recorder()
    provider = make_provider(setup.provider_config())
    gate = step_gate(cmd.ls, run_job.state, progress, setup.workspace) if mode == "step" else None
    try:
        progress.begin()
        body = job_body(cmd.session, setup, run_job, provider, recorder, gate, progress)
        job = await cmd.run_job("optimize", doc.path, body, progress)
    finally:
        await provider.close()
        recorder.close()
    return finished(cmd.ls, doc.uri, job, run_job.state, progress)


def job_body(session: Any, setup: Any, run_job: Any, provider: Any, recorder: Any, gate: Any, progress: Any) -> Any:
    """The optimize job's work: agents/optimize_job.run_optimize, its phases reported as progress."""
    from ...agents.optimize_job import run_optimize

    iterations = run_job.budgets.iterations

    async def body(report: Any) -> RunState:
        def on_phase(iteration: int, phase: str, message: str) -> None:
            progress.report(f"iteration {iteration}/{iterations}: {phase}: {message}")

        judge = setup.judge(session.engine, run_job.trusted())  # the run's one judge
        final = await run_optimize(run_job, setup, judge, provider, recorder, gate=gate, on_phase=on_phase)
        if isinstance(final, str):  # the reviewed tests do not pass on the original
            raise ValueError(final)
        return final

    return body


def optimize_job(doc: Any, setup: Any, iterations: int) -> Any:
    """The same service call as the CLI's (agents/optimize_job.py) on the same run setup
    (agents/run_setup.py): the reviewed <stem>.tests.py, the device backend when asked for, the same
    budgets; a new run state of the document's current text."""
    from ...agents.optimize_job import OptimizeJob, reviewed_tests, tests_path
    from ...agents.optimize_job import budgets as job_budgets

    state = new_run(doc.path, doc.text)
    state.context["chip"] = setup.chip
    tests = reviewed_tests(doc.path)
    budgets = job_budgets(iterations, fix_rounds=setup.agent.optimizeFixRounds,
                          request_timeout_s=setup.agent.requestTimeoutS)
    return OptimizeJob(doc.path, doc.text, budgets, tests=tests,
                       tests_name=tests_path(doc.path).name if tests is not None else "", state=state)


def step_gate(ls: Any, state: RunState, progress: Any, workspace: Path) -> Any:
    """Step mode's gate: the phase's text is written under .pallasite/plans/ and opened; the run
    waits for approve / revise / stop on it (a phase with nothing to review passes)."""
    from ...knowledge.store import pallasite_folder

    async def gate(phase: str, payload: dict) -> Decision:
        found = shown_document(state.run_id, phase, payload)
        if found is None:
            return Decision("approve")
        folder = pallasite_folder(workspace) / "plans"  # .pallasite/ ignores itself in git
        folder.mkdir(parents=True, exist_ok=True)
        file = (folder / found[0]).resolve()
        file.write_text(found[1], encoding="utf-8")
        key = _key(str(file))
        pending(ls)[key] = asyncio.get_running_loop().create_future()
        await show_document(ls, str(file))
        progress.report(f"{phase}: waiting for approve / revise / stop on {Path(key).name}")
        try:
            return await pending(ls)[key]
        finally:
            pending(ls).pop(key, None)

    return gate


def finished(ls: Any, uri: str, job: Any, state: RunState, progress: Any) -> tuple[dict[str, Any], RunState | None]:
    """The command's result of an ended optimize job; a finished run is kept for the hover."""
    if job.state != "done":
        progress.end(job.state)
        return {"ok": False, "message": job.error or job.state, "job": job.id, "run_id": state.run_id}, None
    final: RunState = job.result
    runs(ls)[uri] = final
    progress.end(summary(final))
    return {"ok": final.winner is not None, "message": summary(final), "job": job.id, "run_id": final.run_id,
            "table": final.table(), "method": final.method,
            "speedup": final.outcome().speedup.value if final.winner is not None else None, "written": None}, final


async def show_document(ls: Any, path: str) -> None:
    from lsprotocol import types as lsp
    from pygls.uris import from_fs_path

    try:
        await ls.window_show_document_async(lsp.ShowDocumentParams(uri=from_fs_path(path), take_focus=True))
    except Exception as exc:  # noqa: BLE001 - a client without showDocument still has the file (and its lenses)
        ls.session.log(f"pallasite: could not open {path}: {exc}")


def winner_path(path: str) -> Path:
    """``<stem>.optimized.py`` beside the original."""
    return Path(path).with_name(Path(path).stem + ".optimized.py")


def edit_refusal(doc: Any, version: int, original: str) -> str | None:
    """Why the winner may not replace the document now (None: it may): closed, or changed since the run began."""
    if doc is None:
        return "the document was closed during the run"
    if doc.version != version or doc.text != original:
        return f"the document changed during the run (version {version} -> {doc.version}): your edits are kept"
    return None


async def place(cmd: Any, state: RunState, version: int, original: str, placement: str) -> dict[str, Any]:
    """After a run: the inlay hints of the block sizes the winner changed, then the winner placed
    (``place_winner``) as a versioned edit of the text the run started from, or a new file."""
    from lsprotocol import types as lsp

    from . import inlay_hints
    from ..lsp_convert import whole_document_edit

    ls, uri, winner = cmd.ls, cmd.doc.uri, state.winner
    inlay_hints.remember(ls, uri, "optimize", inlay_hints.from_optimize(
        version, original, winner.source if winner else None, _hint_words(winner)))

    async def apply_edit(new_text: str) -> bool:
        edit = whole_document_edit(uri, version, original, new_text)
        applied = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(
            edit=lsp.WorkspaceEdit(document_changes=[edit]), label="pallasite: optimized kernel"))
        return bool(applied and applied.applied)

    return await place_winner(ls, uri, state, version, placement, apply_edit)


async def place_winner(ls: Any, uri: str, state: RunState, version: int, winner: str,
                       apply_edit: Any) -> dict[str, Any]:
    """Put a faster valid winner where the setting says: ``newFile`` (written beside the original and
    opened) or ``edit`` (``apply_edit(new_text)`` -> applied?, a versioned edit of the document; when
    the document changed meanwhile or the client refuses, the new file is written instead and the
    reason given). Never overwrites the user's text. Returns the result's placement fields."""
    best = state.winner
    if best is None or best.source is None:
        return {"written": None, "applied": False, "placement": "none: no valid candidate faster than the original"}
    why = ""
    if winner == "edit":
        why = edit_refusal(ls.session.documents.get(uri), version, state.original) or ""
        if not why:
            if await apply_edit(best.source):
                return {"written": None, "applied": True, "placement": "edit: the document now holds the winner"}
            why = "the editor did not apply the edit"
    target = winner_path(state.path)
    try:
        target.write_text(best.source, encoding="utf-8")
    except OSError as exc:  # the run's result stays in the store and on hover; say what to do
        return {"written": None, "applied": False,
                "placement": f"none: cannot write {target}: {exc.strerror or exc}"
                             + (f" (and not applied as an edit: {why})" if why else "")
                             + f"; the winner is recorded in the results store as run {state.run_id} (its export holds the source)"}
    await show_document(ls, str(target))
    return {"written": str(target), "applied": False,
            "placement": f"newFile: {target.name}" + (f" (not applied as an edit: {why})" if why else "")}
