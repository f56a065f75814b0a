"""The pallasite language server (pygls). Read top to bottom, this file lists its capabilities.

Each request handler takes one immutable ``DocumentSnapshot`` from the ``Session``
(``session.snapshot(uri)``: documents.py), calls a plain function (hover.py, lenses.py,
actions.py, the ``*_lsp`` feature modules) and converts to LSP (lsp_convert.py). Each command runs
through ``job_command`` (job_command.py: arguments, provider, trust, progress, the engine job,
cancellation, the reply). The process never imports jax: kernel code runs only in workers.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..engine.workers import secrets

from .editor import actions, fix_command, hover, hover_sources, inlay_hints, lenses, optimize_lsp, search_lsp, timing_lsp, tune_lsp
from .lsp_protocol import PARSE_ERROR, PallasiteProtocol
from .lsp_convert import (
    change_to_edit, path_to_uri, position_from_client, range_to_span, span_to_range, uri_to_path,
)
from .features import StepDocument
from .editor.job_command import Command, Result, job_command, options_of, progress_token
from . import checks, session_settings, views
from .session import Document, Session, status_of
from .shifting import LineIndex
from .settings import SECTION, TARGETS

STATS = "pallasite/serverStats"
DOCUMENT_STATE = "pallasite/documentState"


class PallasiteServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("pallasite", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
                         protocol_cls=PallasiteProtocol)
        self.session = Session(self)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A message body that cannot be decoded (not JSON, not UTF-8, an integer of more than
        4300 digits, nesting deeper than Python's recursion limit) gets a ParseError reply with id
        null, as JSON-RPC asks, and a line in the log: never a popup. Errors of handlers are pygls's."""
        if source is JsonRpcException:  # the read loop: decoding the message failed
            if isinstance(error, RecursionError):
                message = "the message nests arrays or objects too deeply to decode"
            elif isinstance(error, ValueError):  # JSONDecodeError, UnicodeDecodeError, too many digits
                message = f"the message is not valid JSON: {str(error)[:300]}"
            else:
                message = f"the message could not be read: {type(error).__name__}: {str(error)[:300]}"
            self.protocol.send_raw_error(None, PARSE_ERROR, message)
            self.session.log(f"pallasite: {message}")
            return
        super().report_server_error(error, source)

    def report_malformed_notification(self, text: str) -> None:
        self.session.log(f"pallasite: ignored a malformed notification: {text}")


server = PallasiteServer()


def _doc(ls: PallasiteServer, uri: str) -> Document | None:
    return ls.session.documents.get(uri)


def apply_changes(text: str, changes: Any, encoding: str) -> str:
    """``text`` after the client's content changes, each relative to the text after the one before."""
    lines = LineIndex(text)
    for change in changes:
        lines.apply(change_to_edit(change, lines, encoding))
    return lines.text


def _warn(ls: PallasiteServer, warnings: list[str]) -> None:
    for warning in warnings:
        ls.session.show(f"pallasite: {warning}")


# --------------------------------------------------------------------------- lifecycle & settings


@server.feature(lsp.INITIALIZE)
def initialize(ls: PallasiteServer, params: lsp.InitializeParams) -> None:
    session = ls.session
    encoding = ls.workspace.position_encoding or "utf-16"
    session.encoding = str(getattr(encoding, "value", encoding))  # "utf-8", not "PositionEncodingKind.Utf8"
    session.folders = [uri_to_path(f.uri) for f in params.workspace_folders or []]
    if not session.folders and ls.workspace.root_path:
        session.folders = [ls.workspace.root_path]
    if session.folders:  # the project's [tool.pallasite], without trust (only the user gives trust)
        session.pending_warnings += session_settings.read_project_settings(session, session.folders[0])
    session.pending_warnings += session_settings.set_layer(session, "initializationOptions", params.initialization_options)


@server.feature(lsp.INITIALIZED)
async def initialized(ls: PallasiteServer, params: lsp.InitializedParams) -> None:
    _warn(ls, ls.session.pending_warnings)
    before = ls.session.settings
    try:
        await _pull_configuration(ls)
    finally:
        session_settings.settings_arrived(ls.session)  # documents opened meanwhile decide about trust now
    if ls.session.settings != before:
        checks.settings_changed(ls.session, before)
    ls.session.notify_status()


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: PallasiteServer, params: lsp.DidChangeConfigurationParams) -> None:
    before = ls.session.settings
    pushed = params.settings.get(SECTION) if isinstance(params.settings, dict) else None
    if pushed is not None:
        _warn(ls, session_settings.set_layer(ls.session, "workspace/configuration", pushed))
    else:
        await _pull_configuration(ls)
    session_settings.settings_arrived(ls.session)
    checks.settings_changed(ls.session, before)


async def _pull_configuration(ls: PallasiteServer) -> None:
    workspace = getattr(ls.client_capabilities, "workspace", None)
    if not (workspace and workspace.configuration):
        return
    folders = list(ls.session.folders)  # and each workspace folder's own settings, scoped to it
    items = [lsp.ConfigurationItem(section=SECTION),
             *(lsp.ConfigurationItem(scope_uri=path_to_uri(f), section=SECTION) for f in folders)]
    try:
        result = await ls.workspace_configuration_async(lsp.ConfigurationParams(items=items))
    except Exception as exc:
        ls.session.log(f"pallasite: workspace/configuration failed: {exc}")
        return
    if result and result[0] is not None:
        _warn(ls, session_settings.set_layer(ls.session, "workspace/configuration", result[0]))
    for folder, scoped in zip(folders, list(result or [])[1:]):
        _warn(ls, session_settings.set_folder_layer(ls.session, folder, scoped))


@server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_folders(ls: PallasiteServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
    removed = {uri_to_path(f.uri) for f in params.event.removed}
    ls.session.folders = [f for f in ls.session.folders if f not in removed]
    ls.session.folders += [uri_to_path(f.uri) for f in params.event.added]
    ls.session.notify_status()


@server.feature(lsp.SHUTDOWN)
async def shutdown(ls: PallasiteServer, params: Any = None) -> None:
    for uri in list(ls.session.documents):
        ls.session.close(uri)
    await ls.session.engine.close()


@server.feature(lsp.EXIT)
def on_exit(ls: PallasiteServer, params: Any = None) -> None:
    """The editor says goodbye: workers end now, the process within a second (lifetime.py)."""
    from . import lifetime

    lifetime.end_soon(0 if ls.protocol._shutdown else 1)


# --------------------------------------------------------------------------- documents


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: PallasiteServer, params: lsp.DidOpenTextDocumentParams) -> None:
    item = params.text_document
    if optimize_lsp.is_step_document(uri_to_path(item.uri)):  # a step-mode plan/diff/tests: its text only
        optimize_lsp.step_documents(ls)[item.uri] = StepDocument(item.uri, uri_to_path(item.uri), item.version, item.text)
        return
    if item.language_id not in ("python", "") and not item.uri.endswith((".py", ".pyi")):
        return
    doc = ls.session.open(item.uri, uri_to_path(item.uri), item.version, item.text)
    checks.opened(ls.session, doc)  # tier 0 and diagnostics (a big document's: from the tier-0 thread)
    ls.session.notify_status()
    await checks.consider_check(ls.session, doc, opening=True)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: PallasiteServer, params: lsp.DidChangeTextDocumentParams) -> None:
    uri, version = params.text_document.uri, params.text_document.version
    doc = _doc(ls, uri)
    if doc is None:
        step = optimize_lsp.step_documents(ls).get(uri)
        if step is not None:  # a step-mode document: a new copy with the edits applied
            optimize_lsp.step_documents(ls)[uri] = replace(step, version=version, text=apply_changes(
                step.text, params.content_changes, ls.session.encoding))
        return
    for change in params.content_changes:  # each change is relative to the text after the previous one
        doc.apply(version, [change_to_edit(change, doc.lines, ls.session.encoding)])
    checks.schedule_tier0(ls.session, doc, ls.session.settings.check.debounceMs / 1000)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: PallasiteServer, params: lsp.DidSaveTextDocumentParams) -> None:
    doc = _doc(ls, params.text_document.uri)
    if doc is not None:
        ls.session.ensure_analysis(doc)
        await checks.consider_check(ls.session, doc, saving=True)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: PallasiteServer, params: lsp.DidCloseTextDocumentParams) -> None:
    optimize_lsp.step_documents(ls).pop(params.text_document.uri, None)
    doc = ls.session.close(params.text_document.uri)
    if doc is not None and doc.published:
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=doc.uri, diagnostics=[]))
    ls.session.notify_status()  # its status bar entry goes


# --------------------------------------------------------------------------- hover, lenses, actions


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def on_hover(ls: PallasiteServer, params: lsp.HoverParams) -> lsp.Hover | None:
    snap = ls.session.snapshot(params.text_document.uri)
    if snap is None:
        return None
    line, column = position_from_client(params.position, snap.lines, snap.encoding)
    found = (tune_lsp.hover(tune_lsp.reports(ls).get(snap.uri), line, column)
             or optimize_lsp.hover(optimize_lsp.runs(ls).get(snap.uri), snap.analysis.sites, line, column)
             or hover_sources.hover_content(ls.session, snap, line, column))
    if found is None:
        return None
    text, span = found
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text),
                     range=span_to_range(span, snap.lines, snap.encoding))


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: PallasiteServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    step = optimize_lsp.step_lenses(ls, uri_to_path(params.text_document.uri), params.text_document.uri)
    if step:  # a plan / diff / tests document of a step-mode run (markdown, a diff: not a kernel document)
        zero = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        return [lsp.CodeLens(range=zero, command=lsp.Command(title=lens.title, command=lens.command,
                                                             arguments=list(lens.arguments))) for lens in step]
    snap = ls.session.snapshot(params.text_document.uri)
    if snap is None:
        return []
    sites, target = snap.analysis.sites, snap.settings.target
    verdicts = snap.report.kernels if snap.report and snap.report_chip == target else ()  # verdicts for this chip
    doc = _doc(ls, snap.uri)
    checking = doc is not None and doc.check_task is not None and not doc.check_task.done()
    edited = snap.report_version is not None and snap.report_version != snap.version
    return [lsp.CodeLens(range=span_to_range(lens.span, snap.lines, snap.encoding),
                         command=lsp.Command(title=lens.title, command=lens.command, arguments=list(lens.arguments)))
            for lens in [*lenses.check_lenses(sites, snap.uri, target, verdicts, edited=edited, checking=checking),
                         *timing_lsp.timing_lenses(sites, snap.analysis.tasks, snap.uri,
                                                   timing_lsp.backend_label(snap.settings),
                                                   timing_lsp.results(ls.session).get(snap.path)),
                         *tune_lsp.autotune_lenses(sites, snap.text, snap.path, snap.uri, target),
                         *optimize_lsp.optimize_lenses(sites, snap.uri)]]


@server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
def inlay_hint(ls: PallasiteServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
    """The tuned / optimized value beside each block-size literal the last autotune or optimize run
    changed (inlay_hints.py), with the provenance of the number that chose it."""
    snap = ls.session.snapshot(params.text_document.uri, analysed=False)
    if snap is None:
        return []
    window = range_to_span(params.range, snap.lines, snap.encoding)
    return [lsp.InlayHint(position=span_to_range(hint.span, snap.lines, snap.encoding).end, label=hint.label,
                          tooltip=hint.tooltip, padding_left=False)
            for hint in inlay_hints.visible(inlay_hints.known(ls, snap.uri), snap.version, snap.text, window)]


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
    code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Source]))
def code_action(ls: PallasiteServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    snap = ls.session.snapshot(params.text_document.uri)
    if snap is None:
        return []
    span = range_to_span(params.range, snap.lines, snap.encoding)
    found = actions.actions_for(snap.findings(), span, snap.uri, snap.version, snap.lines, snap.encoding,
                                snap.settings.target, params.context.only, snap.seen_versions,
                                params.context.diagnostics, fix_command.provider_label(snap.settings))
    if not params.context.only or lsp.CodeActionKind.Source in params.context.only:
        found += tune_lsp.apply_action(tune_lsp.reports(ls).get(snap.uri), snap.uri, snap.version, snap.lines,
                                       snap.encoding)
    return found


# --------------------------------------------------------------------------- commands (job_command.py)


@server.command("pallasite.check")
async def check_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Check a document now: ``{"uri": ..., "tiers": [0, 1, 2, 3], "script": true}`` (tiers default:
    the settings'; ``script``: run the file's ``__main__`` and check every pallas_call it makes)."""
    return await job_command(ls, "pallasite.check", args, _check)


async def _check(cmd: Command) -> Result:
    session, doc, tiers, script = cmd.session, cmd.doc, cmd.options.get("tiers"), cmd.options.get("script", False)
    cmd.need(tiers is None or (isinstance(tiers, list) and all(t in (0, 1, 2, 3) for t in tiers)),
             f"tiers must be a list from 0-3, got {tiers!r}.")
    cmd.need(isinstance(script, bool), f"script must be true or false, got {script!r}.")
    cmd.need(not script or tiers is None or any(t > 0 for t in tiers),
             "script mode runs the file: give a compiler tier (1-3).")
    await cmd.need_trust("check it")
    if not session.ensure_analysis(doc):
        cmd.refuse(f"{doc.path} does not use Pallas: nothing to check.")
    if tiers is not None and not any(t > 0 for t in tiers):
        checks.schedule_tier0(session, doc, 0)
        return {"ok": True, "findings": len(doc.tier0), "chip": session.settings.target, "notes": []}
    task = checks.start_check(session, doc, tiers, progress_token=await progress_token(ls=cmd.ls), script=script)
    try:
        report = await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()  # the request was cancelled ($/cancelRequest or progress cancel)
        raise
    if report is None:
        return {"ok": False, "message": "the check did not run (see the message shown)"}
    return {"ok": True, "findings": len(report.findings), "chip": session.settings.target,
            "notes": list(report.notes), "script": script}


@server.command(actions.FIX_WITH_AGENT_COMMAND)
async def fix_with_agent(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """An LLM proposes a fix for the errors on a line; applied only once the checker verified it:
    ``{"uri": ..., "version": N, "line": L}`` (what the "Fix with agent" code action sends)."""
    return await job_command(ls, actions.FIX_WITH_AGENT_COMMAND, args, fix_command.fix_with_agent,
                             cancelled=fix_command.CANCELLED, failed=fix_command.failed)


@server.command(actions.SET_UP_PROVIDER_COMMAND)
async def set_up_provider(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """The "Set up an LLM provider…" action (no provider configured): opens docs/agents.md, says how,
    and names the settings to open (``{"settings": "pallasite.agent"}``; the VS Code extension opens them)."""
    return await fix_command.set_up_provider(ls.session)


@server.command(search_lsp.SEARCH_COMMAND)
async def search_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Search for a faster kernel: ``{"uri", "algo", "budget", "seed", "width", ...}``; the best node is
    offered as a versioned edit and the HTML report opened with window/showDocument."""
    return await job_command(ls, search_lsp.SEARCH_COMMAND, args, _search)


async def _search(cmd: Command) -> Result:
    cmd.need_provider("Search for a faster kernel")
    await cmd.need_trust("run its code")
    run = search_lsp.prepare(cmd)
    progress = await cmd.progress(search_lsp.title(run))
    progress.begin()
    try:
        job = await cmd.run_job("search", str(run.path), search_lsp.job_body(cmd.session, run, progress), progress)
    except asyncio.CancelledError:
        return {"ok": False, "message": f"cancelled; the finished nodes are kept (run {run.rid} resumes)"}
    finally:
        run.store.close()
    if job.state != "done" or job.result is None:  # the job failed: engine/jobs.py keeps the error as data
        progress.end("failed")
        return search_lsp.failure(cmd, run, job.error or job.state)
    return await search_lsp.report_and_offer(cmd, run, job.result, progress)


@server.command(timing_lsp.TIME_COMMAND)
async def time_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Time a task entry against its reference on the configured backend: ``{"uri", "entry", "runs"}``."""
    return await job_command(ls, timing_lsp.TIME_COMMAND, args, lambda cmd: _timing(cmd, "time"))


@server.command(timing_lsp.PROFILE_COMMAND)
async def profile_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Profile a task entry (trace, per-kernel time, roofline): ``{"uri", "entry", "runs"}``."""
    return await job_command(ls, timing_lsp.PROFILE_COMMAND, args, lambda cmd: _timing(cmd, "profile"))


async def _timing(cmd: Command, op: str) -> Result:
    session = cmd.session
    await cmd.need_trust("run its code")
    progress = await cmd.progress(f"{op.capitalize()} on {timing_lsp.backend_label(session.settings)}")
    progress.begin()
    work = timing_lsp.submit(session, cmd.doc, op, cmd.options, report=progress.report).task
    outcome: Result = {"ok": False, "message": "cancelled"}
    try:
        outcome = await work
    except asyncio.CancelledError:
        work.cancel()  # $/cancelRequest or the progress's cancel: the worker is told, killed if stuck
    progress.end(outcome.get("summary") or outcome.get("message"))
    session.log(outcome.get("text") or outcome.get("message", ""))
    if not outcome.get("ok"):
        session.show(outcome.get("message", f"{op} failed"))
    views.verdict_changed(session)  # the "Time on" lens titles carry the latest result
    return outcome


@server.command(tune_lsp.AUTOTUNE_COMMAND)
async def autotune_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Autotune a document's tunables for the target chip: ``{"uri": ..., "verify": 3}`` (verify:
    interpret-mode checks of the best-ranked configurations, 0 to skip). The best
    configuration is then offered as a code action ("Apply autotuned ...") and shown on hover."""
    return await job_command(ls, tune_lsp.AUTOTUNE_COMMAND, args, _autotune)


async def _autotune(cmd: Command) -> Result:
    await cmd.need_trust("tune it")
    verify = cmd.count("verify", 3, minimum=0, what="a count (0 to skip)")
    result = await tune_lsp.run(cmd, verify)
    tuned = tune_lsp.reports(cmd.ls).get(cmd.doc.uri)
    if result.get("ok") and tuned is not None:
        inlay_hints.remember(cmd.ls, cmd.doc.uri, "tune", inlay_hints.from_tune(tuned.version, tuned.report))
        views.refresh(cmd.session, "inlayHint")
    views.verdict_changed(cmd.session)  # the autotune lens and the status bar: the tuned file's verdict
    cmd.session.show(f"pallasite: {result['message']}", lsp.MessageType.Info)
    return result


@server.command(optimize_lsp.OPTIMIZE_COMMAND)
async def optimize_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Optimize a document: ``{"uri", "mode": "auto"|"step", "maxIterations": 3, "winner": "newFile"|"edit",
    "timing": "estimate"|"device"}`` (device: the ``pallasite.backend`` settings, as search does).
    (winner: default the ``agent.optimizeWinner`` setting). The winner goes to ``<name>.optimized.py``
    beside the original, or (``edit``) replaces the document as a versioned edit when the document is
    unchanged since the run began; the hover on the kernel then shows the run, inlay hints the block
    sizes the winner changed."""
    return await job_command(ls, optimize_lsp.OPTIMIZE_COMMAND, args, _optimize, failed=lambda cmd, exc: {
        "ok": False, "message": f"pallasite.optimize: {type(exc).__name__}: {exc}"})


async def _optimize(cmd: Command) -> Result:
    session, options = cmd.session, cmd.options
    # maxIterations: the CLI's --max-iterations (``iterations``, its old name, still works)
    mode, iterations = options.get("mode", "auto"), options.get("maxIterations", options.get("iterations", 3))
    placement = {"file": "newFile"}.get(options.get("winner"), options.get("winner") or session.settings.agent.optimizeWinner)
    cmd.need(mode in ("auto", "step") and placement in ("newFile", "edit") and isinstance(iterations, int)
             and not isinstance(iterations, bool) and iterations >= 1,
             "mode is auto or step, winner newFile or edit, "
             f"iterations a positive count (got {mode!r}, {placement!r}, {iterations!r}).")
    await cmd.need_trust("optimize it")
    cmd.need_provider("Optimize", "pallasite.optimize: no LLM provider is configured (agent.provider).")
    device = cmd.device()
    version, original = cmd.doc.version, cmd.doc.text
    result, state = await optimize_lsp.run(cmd, mode, iterations, device=device)
    if state is not None:
        result.update(await optimize_lsp.place(cmd, state, version, original, placement))
    session.show(f"pallasite: {result['message']}" + (f"; {result['placement']}" if result.get("placement") else ""),
                 lsp.MessageType.Info)
    views.refresh(session, "inlayHint")
    views.verdict_changed(session)
    return result


def _step_decision(ls: PallasiteServer, args: Any, action: str) -> dict[str, Any]:
    options = options_of(args)
    from pygls.uris import to_fs_path

    uri = options.get("uri") if isinstance(options.get("uri"), str) else ""
    if not uri:
        return {"ok": False, "message": f"pallasite.optimize.{action}: give the plan or diff document: "
                                        '{"uri": "<.pallasite/plans/... uri>"}'}
    path = to_fs_path(uri) or ""
    doc = optimize_lsp.step_documents(ls).get(uri)  # the editor's text, saved or not: the user's edits
    text = doc.text if doc is not None else (Path(path).read_text(encoding="utf-8") if Path(path).is_file() else "")
    if "text" in options:
        text = str(options["text"])
    if not optimize_lsp.decide(ls, path, action, text):
        return {"ok": False, "message": f"no optimize run is waiting on {path}"}
    return {"ok": True}


@server.command(optimize_lsp.APPROVE_COMMAND)
def optimize_approve(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    return _step_decision(ls, args, "approve")


@server.command(optimize_lsp.REVISE_COMMAND)
def optimize_revise(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Revise: the plan document's current text is the new plan (for a diff: the revision note)."""
    return _step_decision(ls, args, "revise")


@server.command(optimize_lsp.STOP_COMMAND)
def optimize_stop(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    return _step_decision(ls, args, "stop")


@server.command("pallasite.selectTarget")
async def select_target(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Switch the target chip (argument: its name), then re-check open kernel files."""
    chip = args[0] if args else None
    if chip not in TARGETS:
        message = f"pallasite.selectTarget: unknown chip {chip!r}; choose one of {', '.join(TARGETS)}."
        ls.session.show(message)
        return {"ok": False, "message": message}
    before = ls.session.settings
    _warn(ls, session_settings.set_target(ls.session, chip))
    checks.settings_changed(ls.session, before)
    return {"ok": True, "target": chip}


@server.command("pallasite.trustFolder")
async def trust_folder(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Trust a folder (argument: a path or file URI; default: every workspace folder), then check."""
    given = args[0] if args else None
    folders = [uri_to_path(given) if given.startswith("file:") else given] if isinstance(given, str) else ls.session.folders
    if not folders:
        return {"ok": False, "message": "pallasite.trustFolder: no folder given and no workspace folder open."}
    await session_settings.wait_for_settings(ls.session)  # decided with the user's settings, not before they arrive
    if ls.session.settings.trust.mode == "never":
        message = ('pallasite.trustFolder: trust.mode is "never" in your settings, so no folder\'s code runs '
                   "(tier 0 only); set trust.mode to \"ask\" or \"always\" to allow it.")
        ls.session.show(message)
        return {"ok": False, "message": message}
    for folder in folders:
        resolved = str(Path(folder).resolve())
        if session_settings.trust(ls.session, resolved):
            checks.check_others_in(ls.session, resolved)
    ls.session.notify_status()
    return {"ok": True, "trusted": folders}


@server.command("pallasite.explain")
def explain_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """The catalog entry of a finding code (argument: the code, e.g. ``"PLS001"``) as markdown."""
    code = args[0] if args else None
    if isinstance(code, dict):
        code = code.get("code")
    return hover.explain_code(code)


@server.feature(STATS)
def server_stats(ls: PallasiteServer, params: Any = None) -> dict[str, Any]:
    """Diagnostics about the server process itself (used by tests and the benchmark)."""
    import psutil

    return {"pid": os.getpid(), "rssBytes": psutil.Process().memory_info().rss,
            "jaxImported": "jax" in sys.modules, "python": sys.executable,
            "settings": session_settings.settings_json(ls.session), "status": status_of(ls.session),
            "tier0Seconds": list(ls.session.tier0_seconds), "checksStarted": ls.session.checks_started,
            "jobs": [{"id": j.id, "kind": j.kind, "file": j.file, "state": j.state, "error": j.error}
                     for j in ls.session.engine.jobs.list()],
            "secrets": secrets.names(), "secretsOutOfEnvironment": secrets.reexecuted()}


@server.feature(DOCUMENT_STATE)
def document_state(ls: PallasiteServer, params: Any = None) -> dict[str, Any] | None:
    """The server's copy of an open document (``{"uri": ...}``): its version and text, so a client
    (the fuzz test, a bug report) can compare it with its own; None for a document not open."""
    uri = getattr(params, "uri", None) if not isinstance(params, dict) else params.get("uri")
    doc = _doc(ls, uri) if isinstance(uri, str) else None
    if doc is None:
        return None
    return {"uri": doc.uri, "version": doc.version, "text": doc.text, "encoding": ls.session.encoding}

