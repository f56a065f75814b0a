"""The pallasite language server (pygls). Read top to bottom, this file lists its capabilities.

Each handler takes the document state from the ``Session`` (session.py), calls a plain function
(hover.py, lenses.py, actions.py) and converts to LSP (lsp_convert.py). The process never imports
jax: kernel code runs only in check workers started by the runner.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from pallasite import __version__
from pallasite.engine import secrets

from . import actions, fix_command, hover, hover_sources, inlay_hints, lenses, optimize_lsp, search_lsp, timing_lsp, tune_lsp
from .lsp_protocol import PARSE_ERROR, PallasiteProtocol
from .lsp_convert import (
    change_to_edit, path_to_uri, position_from_client, range_to_span, span_to_range, uri_to_path,
    whole_document_edit,
)
from .features import StepDocument
from .session import Document, Session
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


def _options(args: tuple[Any, ...]) -> dict[str, Any]:
    """A command's one argument: an options object, or a bare document uri."""
    return args[0] if args and isinstance(args[0], dict) else {"uri": args[0] if args else None}


def _open_doc(ls: PallasiteServer, command: str, options: dict[str, Any]) -> tuple[Document | None, dict[str, Any] | None]:
    """(the open document a command acts on, None), or (None, the reply saying it is not open)."""
    doc = _doc(ls, options.get("uri") or "")
    if doc is not None:
        return doc, None
    return None, {"ok": False, "message": f"{command}: {options.get('uri')!r} is not an open document."}


async def _untrusted(ls: PallasiteServer, doc: Document, to: str) -> dict[str, Any] | None:
    """None once the document's folder is trusted (asking the user if need be), else the refusal."""
    folder = ls.session.folder_of(doc.path)
    if await ls.session.trusted_or_ask(folder):
        return None
    return {"ok": False, "message": f"{folder} is not trusted: run pallasite.trustFolder to {to}."}


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
        session.pending_warnings += session.read_project_settings(session.folders[0])
    session.pending_warnings += session.set_layer("initializationOptions", params.initialization_options)


@server.feature(lsp.INITIALIZED)
async def initialized(ls: PallasiteServer, params: lsp.InitializedParams) -> None:
    _warn(ls, ls.session.pending_warnings)
    before = ls.session.settings
    try:
        await _pull_configuration(ls)
    finally:
        ls.session.settings_arrived()  # documents opened meanwhile decide about trust now
    if ls.session.settings != before:
        ls.session.settings_changed(before)
    ls.session.notify_status()


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: PallasiteServer, params: lsp.DidChangeConfigurationParams) -> None:
    before = ls.session.settings
    pushed = params.settings.get(SECTION) if isinstance(params.settings, dict) else None
    if pushed is not None:
        _warn(ls, ls.session.set_layer("workspace/configuration", pushed))
    else:
        await _pull_configuration(ls)
    ls.session.settings_arrived()
    ls.session.settings_changed(before)


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
        _warn(ls, ls.session.set_layer("workspace/configuration", result[0]))
    for folder, scoped in zip(folders, list(result or [])[1:]):
        _warn(ls, ls.session.set_folder_layer(folder, scoped))


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
    if ls.session.run_tier0_inline(doc):  # a big document: on the tier-0 thread, which publishes
        ls.session.publish(doc)
    ls.session.notify_status()
    await ls.session.consider_check(doc, opening=True)


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
    ls.session.schedule_tier0(doc, ls.session.settings.check.debounceMs / 1000)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: PallasiteServer, params: lsp.DidSaveTextDocumentParams) -> None:
    doc = _doc(ls, params.text_document.uri)
    if doc is not None:
        ls.session.ensure_analysis(doc)
        await ls.session.consider_check(doc, saving=True)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: PallasiteServer, params: lsp.DidCloseTextDocumentParams) -> None:
    optimize_lsp.step_documents(ls).pop(params.text_document.uri, None)
    doc = ls.session.close(params.text_document.uri)
    if doc is not None and doc.published:
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=doc.uri, diagnostics=[]))


# --------------------------------------------------------------------------- hover, lenses, actions


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def on_hover(ls: PallasiteServer, params: lsp.HoverParams) -> lsp.Hover | None:
    doc = _doc(ls, params.text_document.uri)
    if doc is None or not ls.session.ensure_analysis(doc):
        return None
    lines = doc.lines
    line, column = position_from_client(params.position, lines, ls.session.encoding)
    found = (tune_lsp.hover(tune_lsp.reports(ls).get(doc.uri), line, column)
             or optimize_lsp.hover(optimize_lsp.runs(ls).get(doc.uri), doc.analysis.sites, line, column)
             or hover_sources.hover_content(ls.session, doc, line, column))
    if found is None:
        return None
    text, span = found
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text),
                     range=span_to_range(span, lines, ls.session.encoding))


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: PallasiteServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    step = optimize_lsp.step_lenses(ls, uri_to_path(params.text_document.uri), params.text_document.uri)
    if step:  # a plan / diff / tests document of a step-mode run (markdown, a diff: not a kernel document)
        zero = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        return [lsp.CodeLens(range=zero, command=lsp.Command(title=lens.title, command=lens.command,
                                                             arguments=list(lens.arguments))) for lens in step]
    doc = _doc(ls, params.text_document.uri)
    if doc is None or not ls.session.ensure_analysis(doc):
        return []
    lines = doc.lines
    verdicts = doc.report.kernels if doc.report is not None else ()
    return [lsp.CodeLens(range=span_to_range(lens.span, lines, ls.session.encoding),
                         command=lsp.Command(title=lens.title, command=lens.command, arguments=list(lens.arguments)))
            for lens in [*lenses.check_lenses(doc.analysis.sites, doc.uri, ls.session.settings.target, verdicts),
                         *timing_lsp.timing_lenses(doc.analysis.sites, doc.analysis.tasks, doc.uri,
                                                   timing_lsp.backend_label(ls.session.settings),
                                                   timing_lsp.results(ls.session).get(doc.path)),
                         *tune_lsp.autotune_lenses(doc.analysis.sites, doc.text, doc.path, doc.uri,
                                                   ls.session.settings.target),
                         *optimize_lsp.optimize_lenses(doc.analysis.sites, doc.uri)]]


@server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
def inlay_hint(ls: PallasiteServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
    """The tuned / optimized value beside each block-size literal the last autotune or optimize run
    changed (inlay_hints.py), with the provenance of the number that chose it."""
    doc = _doc(ls, params.text_document.uri)
    if doc is None:
        return []
    lines = doc.lines
    window = range_to_span(params.range, lines, ls.session.encoding)
    return [lsp.InlayHint(position=span_to_range(hint.span, lines, ls.session.encoding).end, label=hint.label,
                          tooltip=hint.tooltip, padding_left=False)
            for hint in inlay_hints.visible(inlay_hints.known(ls, doc.uri), doc.version, doc.text, window)]


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
    code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Source]))
def code_action(ls: PallasiteServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    doc = _doc(ls, params.text_document.uri)
    if doc is None or not ls.session.ensure_analysis(doc):
        return []
    lines = doc.lines
    span = range_to_span(params.range, lines, ls.session.encoding)
    found = actions.actions_for(doc.findings(), span, doc.uri, doc.version, lines, ls.session.encoding,
                                ls.session.settings.target, params.context.only, doc.seen_versions,
                                params.context.diagnostics, fix_command.provider_label(ls.session.settings))
    if not params.context.only or lsp.CodeActionKind.Source in params.context.only:
        found += tune_lsp.apply_action(tune_lsp.reports(ls).get(doc.uri), doc.uri, doc.version, lines,
                                       ls.session.encoding)
    return found


# --------------------------------------------------------------------------- commands


@server.command("pallasite.check")
async def check_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Check a document now: ``{"uri": ..., "tiers": [0, 1, 2, 3], "script": true}`` (tiers default:
    the settings'; ``script``: run the file's ``__main__`` and check every pallas_call it makes)."""
    options = _options(args)
    doc, not_open = _open_doc(ls, "pallasite.check", options)
    if doc is None:
        return not_open
    tiers = options.get("tiers")
    if tiers is not None and (not isinstance(tiers, list) or any(t not in (0, 1, 2, 3) for t in tiers)):
        return {"ok": False, "message": f"pallasite.check: tiers must be a list from 0-3, got {tiers!r}."}
    script = options.get("script", False)
    if not isinstance(script, bool):
        return {"ok": False, "message": f"pallasite.check: script must be true or false, got {script!r}."}
    if script and tiers is not None and not any(t > 0 for t in tiers):
        return {"ok": False, "message": "pallasite.check: script mode runs the file: give a compiler tier (1-3)."}
    if (refused := await _untrusted(ls, doc, "check it")) is not None:
        return refused
    if not ls.session.ensure_analysis(doc):
        return {"ok": False, "message": f"{doc.path} does not use Pallas: nothing to check."}
    if tiers is not None and not any(t > 0 for t in tiers):
        ls.session.schedule_tier0(doc, 0)
        return {"ok": True, "findings": len(doc.tier0), "chip": ls.session.settings.target, "notes": []}
    token = await _progress_token(ls)
    task = ls.session.start_check(doc, tiers, progress_token=token, script=script)
    try:
        report = await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()  # the request was cancelled ($/cancelRequest or progress cancel)
        return {"ok": False, "message": "cancelled"}
    if report is None:
        return {"ok": False, "message": "the check did not run (see the message shown)"}
    return {"ok": True, "findings": len(report.findings), "chip": ls.session.settings.target,
            "notes": list(report.notes), "script": script}


async def _progress_token(ls: PallasiteServer) -> str | None:
    window = getattr(ls.client_capabilities, "window", None)
    if not (window and window.work_done_progress):
        return None
    token = f"pallasite-check-{uuid.uuid4().hex[:12]}"
    try:
        await ls.work_done_progress.create_async(token)
    except Exception:
        return None
    return token


@server.command(actions.FIX_WITH_AGENT_COMMAND)
async def fix_with_agent(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """An LLM proposes a fix for the errors on a line; applied only once the checker verified it:
    ``{"uri": ..., "version": N, "line": L}`` (what the "Fix with agent" code action sends)."""
    options = args[0] if args and isinstance(args[0], dict) else {}
    return await fix_command.fix_with_agent(ls, options, await _progress_token(ls))


@server.command(search_lsp.SEARCH_COMMAND)
async def search_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Search for a faster kernel: ``{"uri", "algo", "budget", "seed", "width", ...}``; the best node is
    offered as a versioned edit and the HTML report opened with window/showDocument."""
    options = _options(args)
    return await search_lsp.search_command(ls, options, await _progress_token(ls))


@server.command(timing_lsp.TIME_COMMAND)
async def time_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Time a task entry against its reference on the configured backend: ``{"uri", "entry", "runs"}``."""
    return await _timing_command(ls, "time", args)


@server.command(timing_lsp.PROFILE_COMMAND)
async def profile_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Profile a task entry (trace, per-kernel time, roofline): ``{"uri", "entry", "runs"}``."""
    return await _timing_command(ls, "profile", args)


async def _timing_command(ls: PallasiteServer, op: str, args: tuple[Any, ...]) -> dict[str, Any]:
    options = _options(args)
    doc, not_open = _open_doc(ls, f"pallasite.{op}", options)
    if doc is None:
        return not_open
    if (refused := await _untrusted(ls, doc, "run its code")) is not None:
        return refused
    token = await _progress_token(ls)
    work = timing_lsp.submit(ls.session, doc, op, options, report=lambda message: (
        ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message=message)) if token else None)).task
    if token is not None:
        ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(
            title=f"{op.capitalize()} on {timing_lsp.backend_label(ls.session.settings)}", cancellable=True))
        cancel = ls.work_done_progress.tokens.get(token)  # the client's cancel button
        if cancel is not None:
            cancel.add_done_callback(lambda f: f.cancelled() and work.cancel())
    outcome: dict[str, Any] = {"ok": False, "message": "cancelled"}
    try:
        outcome = await work
    except asyncio.CancelledError:
        work.cancel()  # $/cancelRequest or the progress's cancel: the worker is told, killed if stuck
    finally:
        if token is not None:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=outcome.get("summary") or outcome.get("message")))
            ls.work_done_progress.tokens.pop(token, None)
    ls.session.log(outcome.get("text") or outcome.get("message", ""))
    if not outcome.get("ok"):
        ls.session.show(outcome.get("message", f"{op} failed"))
    if _lens_refresh(ls):  # the "Time on" lens titles carry the latest result
        asyncio.ensure_future(_refresh_lenses(ls))
    return outcome


async def _refresh_lenses(ls: PallasiteServer) -> None:
    try:
        await ls.workspace_code_lens_refresh_async(None)
    except Exception as exc:  # noqa: BLE001 - a client that claims support but fails: lenses refresh later
        ls.session.log(f"workspace/codeLens/refresh failed: {exc}")


async def _refresh_inlay_hints(ls: PallasiteServer) -> None:
    try:
        await ls.workspace_inlay_hint_refresh_async(None)
    except Exception as exc:  # noqa: BLE001 - hints are asked for again on the next edit anyway
        ls.session.log(f"workspace/inlayHint/refresh failed: {exc}")


def _inlay_refresh(ls: PallasiteServer) -> bool:
    workspace = getattr(ls.client_capabilities, "workspace", None)
    hints = getattr(workspace, "inlay_hint", None) if workspace else None
    return bool(hints and getattr(hints, "refresh_support", False))


def _lens_refresh(ls: PallasiteServer) -> bool:
    workspace = getattr(ls.client_capabilities, "workspace", None)
    lens = getattr(workspace, "code_lens", None) if workspace else None
    return bool(lens and getattr(lens, "refresh_support", False))


@server.command(tune_lsp.AUTOTUNE_COMMAND)
async def autotune_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Autotune a document's tunables for the target chip: ``{"uri": ..., "verify": 3}`` (verify:
    interpret-mode checks of the best-ranked configurations, 0 to skip). The best
    configuration is then offered as a code action ("Apply autotuned ...") and shown on hover."""
    options = _options(args)
    doc, not_open = _open_doc(ls, "pallasite.autotune", options)
    if doc is None:
        return not_open
    if (refused := await _untrusted(ls, doc, "tune it")) is not None:
        return refused
    token = await _progress_token(ls)
    try:
        verify = options.get("verify", 3)
        if not isinstance(verify, int) or isinstance(verify, bool) or verify < 0:
            return {"ok": False, "message": f"pallasite.autotune: verify must be a count (0 to skip), got {verify!r}."}
        result = await tune_lsp.run(ls, doc, ls.session.settings.target, token, verify)
    except asyncio.CancelledError:
        return {"ok": False, "message": "cancelled"}
    tuned = tune_lsp.reports(ls).get(doc.uri)
    if result.get("ok") and tuned is not None:
        inlay_hints.remember(ls, doc.uri, "tune", inlay_hints.from_tune(tuned.version, tuned.report))
        if _inlay_refresh(ls):
            asyncio.ensure_future(_refresh_inlay_hints(ls))
    ls.session.show(f"pallasite: {result['message']}", lsp.MessageType.Info)
    return result


@server.command(optimize_lsp.OPTIMIZE_COMMAND)
async def optimize_command(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Optimize a document: ``{"uri", "mode": "auto"|"step", "iterations": 3, "winner": "newFile"|"edit",
    "timing": "estimate"|"device"}`` (device: the ``pallasite.backend`` settings, as search does).
    (winner: default the ``agent.optimizeWinner`` setting). The winner goes to ``<name>.optimized.py``
    beside the original, or (``edit``) replaces the document as a versioned edit when the document is
    unchanged since the run began; the hover on the kernel then shows the run, inlay hints the block
    sizes the winner changed."""
    options = _options(args)
    doc, not_open = _open_doc(ls, "pallasite.optimize", options)
    if doc is None:
        return not_open
    mode, iterations = options.get("mode", "auto"), options.get("iterations", 3)
    placement = {"file": "newFile"}.get(options.get("winner"), options.get("winner") or ls.session.settings.agent.optimizeWinner)
    if mode not in ("auto", "step") or placement not in ("newFile", "edit") or not isinstance(iterations, int) \
            or isinstance(iterations, bool) or iterations < 1:
        return {"ok": False, "message": "pallasite.optimize: mode is auto or step, winner newFile or edit, "
                                        f"iterations a positive count (got {mode!r}, {placement!r}, {iterations!r})."}
    if (refused := await _untrusted(ls, doc, "optimize it")) is not None:
        return refused
    if not ls.session.settings.agent.provider:
        return {"ok": False, "message": "pallasite.optimize: no LLM provider is configured (agent.provider)."}
    timing = options.get("timing") or "estimate"
    if timing not in ("estimate", "device"):
        return {"ok": False, "message": f"pallasite.optimize: timing {timing!r}: choose estimate (the cost model, no "
                                        "device) or device (the backend in the pallasite.backend settings)"}
    device = ls.session.settings.backend.remote() if timing == "device" else None
    token = await _progress_token(ls)
    version, original = doc.version, doc.text
    try:
        result, state = await optimize_lsp.run(ls, doc, mode, iterations, token, device=device)
    except asyncio.CancelledError:
        return {"ok": False, "message": "cancelled"}
    except Exception as exc:  # noqa: BLE001 - a provider or store problem is a message, never a crash
        return {"ok": False, "message": f"pallasite.optimize: {type(exc).__name__}: {exc}"}
    if state is not None:
        winner = state.winner  # what gets placed
        inlay_hints.remember(ls, doc.uri, "optimize", inlay_hints.from_optimize(
            version, original, winner.source if winner else None, winner.label if winner else ""))

        async def apply_edit(new_text: str) -> bool:
            edit = whole_document_edit(doc.uri, version, original, new_text)
            applied = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(
                edit=lsp.WorkspaceEdit(document_changes=[edit]), label="pallasite: optimized kernel"))
            return bool(applied and applied.applied)

        result.update(await optimize_lsp.place_winner(ls, doc.uri, state, version, placement, apply_edit))
    ls.session.show(f"pallasite: {result['message']}" + (f"; {result['placement']}" if result.get("placement") else ""),
                    lsp.MessageType.Info)
    if _inlay_refresh(ls):
        asyncio.ensure_future(_refresh_inlay_hints(ls))
    return result


def _step_decision(ls: PallasiteServer, args: Any, action: str) -> dict[str, Any]:
    options = _options(args)
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
    _warn(ls, ls.session.set_target(chip))
    ls.session.settings_changed(before)
    return {"ok": True, "target": chip}


@server.command("pallasite.trustFolder")
async def trust_folder(ls: PallasiteServer, *args: Any) -> dict[str, Any]:
    """Trust a folder (argument: a path or file URI; default: every workspace folder), then check."""
    given = args[0] if args else None
    folders = [uri_to_path(given) if given.startswith("file:") else given] if isinstance(given, str) else ls.session.folders
    if not folders:
        return {"ok": False, "message": "pallasite.trustFolder: no folder given and no workspace folder open."}
    await ls.session.wait_for_settings()  # decided with the user's settings, not before they arrive
    if ls.session.settings.trust.mode == "never":
        message = ('pallasite.trustFolder: trust.mode is "never" in your settings, so no folder\'s code runs '
                   "(tier 0 only); set trust.mode to \"ask\" or \"always\" to allow it.")
        ls.session.show(message)
        return {"ok": False, "message": message}
    for folder in folders:
        resolved = str(Path(folder).resolve())
        if ls.session.trust(resolved):
            ls.session.check_others_in(resolved)
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
            "settings": ls.session.settings_json(), "status": ls.session.status(),
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

