"""The `pallasite.fixWithAgent` command behind the "Fix with agent (<provider>)" code action.

The command runs in the request's asyncio task, with work-done progress (cancellable from the
client, or by ``$/cancelRequest``): it snapshots the document (text and version), asks the fixer
(agents/fix_action.py) for a verified edit, then applies it as a versioned workspace edit (a client
whose document moved on refuses it) and shows the explanation with what was verified and what it
cost. Without a configured provider it says how to configure one; a fix that was not verified is
never applied, and the user is told what was tried.

Proposals are verified with the compiler tiers only in a trusted folder (they run the file in a
worker, like a check); elsewhere with tier 0, and the label says so.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from pallasite.analysis.types import FileReport

from .progress import WorkProgress
from .settings import Settings


def provider_label(settings: Settings) -> str | None:
    """The provider as the code action names it, or None when none is configured."""
    agent = settings.agent
    if not agent.provider:
        return None
    return agent.provider_config().label()


async def fix_with_agent(ls: Any, options: dict, token: Any = None) -> dict[str, Any]:
    from pallasite.agents.fix_action import FixJob, fix_file
    from pallasite.agents.fixer import outcome_json
    from pallasite.agents.providers import HOW_TO_CONFIGURE, ProviderError

    session = ls.session
    uri, line = options.get("uri"), options.get("line")
    doc = session.documents.get(uri or "")
    if doc is None:
        return {"ok": False, "message": f"pallasite.fixWithAgent: {uri!r} is not an open document."}
    if not isinstance(line, int) or isinstance(line, bool) or line < 0:
        return {"ok": False, "message": f"pallasite.fixWithAgent: line must be a line number (0-based), got {line!r}."}
    agent = session.settings.agent
    if not agent.provider:
        message = "pallasite: Fix with agent needs an LLM provider. " + HOW_TO_CONFIGURE
        session.show(message, lsp.MessageType.Info)
        return {"ok": False, "message": message}
    if not session.ensure_analysis(doc):
        return {"ok": False, "message": f"{doc.path} does not use Pallas: nothing to fix."}
    version, text = doc.version, doc.text
    folder = session.folder_of(doc.path)
    trusted = await session.trusted_or_ask(folder)
    tiers = tuple(session.settings.tiers) if trusted else (0,)
    report = FileReport(path=doc.path, findings=tuple(doc.findings()),
                        kernels=doc.report.kernels if doc.report is not None and trusted else ())
    job = FixJob(path=doc.path, text=text, report=report, chip=session.settings.target, tiers=tiers, line=line,
                 docs_passages=agent.docsPassages, **_vmem(session))
    refused = session.engine.untrusted_problem(session.check_options(doc.path)) if trusted else None
    if refused:  # proposals run in the compiler tiers, only in a confined worker (engine/confinement.py)
        session.show(f"pallasite: Fix with agent: {refused}", lsp.MessageType.Error)
        return {"ok": False, "message": refused}
    label = provider_label(session.settings)
    progress = WorkProgress(ls, f"pallasite: fixing {Path(doc.path).name} with {label}", token)
    progress.begin(tiers)
    from pallasite.agents.fix_action import has_reference
    from pallasite.engine.store_cache import workspace_for

    # a run against reference() is long: a job worker takes it, so saves are not kept waiting
    purpose = "job" if trusted and has_reference(text, doc.path, job.chip) else "check"
    try:
        outcome = await fix_file(job, agent.provider_config(), agent.budgets(),
                                 session.get_checker(doc.path, purpose=purpose, untrusted=True),
                                 workspace=workspace_for([doc.path], cwd=Path(doc.path).parent),
                                 on_progress=progress.report)
    except asyncio.CancelledError:  # from the progress's cancel button or $/cancelRequest
        progress.end("cancelled")
        return {"ok": False, "applied": False, "message": "cancelled; nothing was changed"}
    except ProviderError as err:
        progress.end("failed")
        session.show(f"pallasite: Fix with agent: {err}", lsp.MessageType.Error)
        return {"ok": False, "message": str(err)}
    except Exception as err:  # noqa: BLE001 - the fixer failing must not take the server down
        progress.end("failed")
        message = f"pallasite: Fix with agent failed ({type(err).__name__}: {err}); nothing was changed."
        session.show(message, lsp.MessageType.Error)
        return {"ok": False, "message": message}
    result = {**outcome_json(outcome, include_text=False), "applied": False}
    cost = f"{len(outcome.attempts)} round(s), {outcome.usage.describe()}"
    if not outcome.ok:
        progress.end("no verified fix")
        if not trusted:
            outcome_message = outcome.message + " (checked with tier 0 only: the folder is not trusted)"
        else:
            outcome_message = outcome.message
        session.show(f"pallasite: {outcome_message} ({cost}). Nothing was changed.", lsp.MessageType.Warning)
        return result
    progress.end("verified")
    if session.documents.get(uri) is not doc or doc.version != version:
        message = "pallasite: the document changed while the fix was verified; nothing was applied (run it again)."
        session.show(message, lsp.MessageType.Warning)
        return {**result, "message": message}
    edit = lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=[lsp.TextEdit(lsp.Range(lsp.Position(h.start, 0), lsp.Position(h.end, 0)), "".join(h.lines))
               for h in outcome.hunks])])
    applied = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label="Fix with agent"))
    if not getattr(applied, "applied", False):
        reason = getattr(applied, "failure_reason", None) or "the editor refused it"
        session.show(f"pallasite: the verified fix was not applied ({reason}).", lsp.MessageType.Warning)
        return {**result, "message": f"not applied: {reason}"}
    why = f" {outcome.explanation}" if outcome.explanation else ""
    session.show(f"pallasite: applied a verified fix ({outcome.label}).{why} [{cost}]", lsp.MessageType.Info)
    return {**result, "applied": True}


def _vmem(session: Any) -> dict[str, Any]:
    """The target's scoped-VMEM limit from the chip table the warm worker sent, when known."""
    for spec in session.chip_table or ():
        if spec.name == session.settings.target and spec.scoped_vmem_limit_bytes:
            return {"vmem_limit_bytes": spec.scoped_vmem_limit_bytes, "vmem_source": spec.scoped_vmem_source}
    return {}
