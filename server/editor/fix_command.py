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

from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from ...analysis.types import FileReport

from ..settings import Settings


def provider_label(settings: Settings) -> str | None:
    """The provider as the code action names it, or None when none is configured."""
    agent = settings.agent
    if not agent.provider:
        return None
    return agent.provider_config().label()


CANCELLED = {"ok": False, "applied": False, "message": "cancelled; nothing was changed"}
AGENTS_DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"  # in a source checkout
PROVIDER_SETTINGS = "pallasite.agent"  # the settings a client with a settings UI opens (VS Code's query)


async def set_up_provider(session: Any) -> dict[str, Any]:
    """The "Set up an LLM provider…" action: the provider docs (docs/agents.md) opened in the editor
    where this is a source checkout, how to set one up said in a message, and ``settings`` in the reply:
    the query a client with a settings UI opens (the VS Code extension opens it; Neovim's settings are
    its ``setup()`` call, which the message names)."""
    from ...agents.llm.providers import HOW_TO_CONFIGURE

    docs = AGENTS_DOC.as_uri() if AGENTS_DOC.is_file() else None
    if docs is not None:
        try:
            await session.client.window_show_document_async(lsp.ShowDocumentParams(uri=docs, take_focus=True))
        except Exception as exc:  # noqa: BLE001 - a client without showDocument: the message still says how
            session.log(f"pallasite: could not open {AGENTS_DOC}: {exc}")
            docs = None
    where = f" The providers are described in {AGENTS_DOC}." if docs else ""
    message = f"pallasite: to fix with an agent, set up an LLM provider. {HOW_TO_CONFIGURE}{where}"
    session.show(message, lsp.MessageType.Info)
    return {"ok": True, "settings": PROVIDER_SETTINGS, "docs": docs, "message": message}


def proposal_judge(run: Any, session: Any, doc: Any, checker: Any) -> Any:
    """The run's judge of the fixer's proposals (engine/judge.py): the run setup's options on the session's
    confined checker (a proposal is model-written code whatever the tiers)."""
    from ...engine.judge import Trusted

    return run.judge(session.engine, Trusted(doc.path, doc.text), device=None, confined=True, checker=checker)


async def fix_with_agent(cmd: Any) -> dict[str, Any]:
    """The command (``{"uri", "version", "line"}``): a verified fix of the line's errors, applied as
    a versioned edit of the text it was computed for; refusals and failures are replies."""
    from ...agents.fix_action import fix_file
    from ...agents.fixer import outcome_json

    from ..checks import get_checker

    session, doc = cmd.session, cmd.doc
    line = cmd.count("line", None, minimum=0, what="a line number (0-based)")
    cmd.need_provider("Fix with agent")
    if not session.ensure_analysis(doc):
        cmd.refuse(f"{doc.path} does not use Pallas: nothing to fix.")
    version, trusted = doc.version, await cmd.trusted()
    job, purpose, run = fix_job(cmd, line, trusted)
    progress = await cmd.progress(f"pallasite: fixing {Path(doc.path).name} with {provider_label(session.settings)}")
    progress.begin(job.tiers)
    judge = proposal_judge(run, session, doc, get_checker(session, doc.path, purpose=purpose, untrusted=True))
    outcome = await fix_file(job, run.provider_config(), run.agent.budgets(), judge, workspace=run.workspace,
                             on_progress=progress.report)
    result = {**outcome_json(outcome, include_text=False), "applied": False}
    cost = f"{len(outcome.attempts)} round(s), {outcome.usage.describe()}"
    if not outcome.ok:
        progress.end("no verified fix")
        told = outcome.message + ("" if trusted else " (checked with tier 0 only: the folder is not trusted)")
        session.show(f"pallasite: {told} ({cost}). Nothing was changed.", lsp.MessageType.Warning)
        return result
    progress.end("verified")
    return await apply_fix(cmd, outcome, version, result, cost)


def fix_job(cmd: Any, line: int, trusted: bool) -> tuple[Any, str, Any]:
    """(the FixJob of the document's current text and findings, the worker purpose, the run's setup):
    proposals are checked with the compiler tiers in a trusted folder (confined: refused up front where
    a confined worker cannot be made), else with tier 0."""
    from ...agents.fix_action import FixJob, has_reference

    session, doc = cmd.session, cmd.doc
    run = cmd.run_setup("Fix with agent", device=None, judge=False, tiers=None if trusted else (0,),
                        runs_model_code=trusted)
    report = FileReport(path=doc.path, findings=tuple(doc.findings()),
                        kernels=doc.report.kernels if doc.report is not None and trusted else ())
    job = FixJob(path=doc.path, text=doc.text, report=report, chip=run.chip, tiers=run.tiers, line=line,
                 docs_passages=run.agent.docsPassages, **_vmem(session))
    # a run against reference() is long: a job worker takes it, so saves are not kept waiting
    return job, "job" if trusted and has_reference(doc.text, doc.path, job.chip) else "check", run


def failed(cmd: Any, exc: Exception) -> dict[str, Any]:
    """The reply (and what the user is shown) when the fixer fails: a provider error, or a bug."""
    from ...agents.llm.providers import ProviderError

    if isinstance(exc, ProviderError):
        cmd.session.show(f"pallasite: Fix with agent: {exc}", lsp.MessageType.Error)
        return {"ok": False, "message": str(exc)}
    message = f"pallasite: Fix with agent failed ({type(exc).__name__}: {exc}); nothing was changed."
    cmd.session.show(message, lsp.MessageType.Error)
    return {"ok": False, "message": message}


async def apply_fix(cmd: Any, outcome: Any, version: int, result: dict[str, Any], cost: str) -> dict[str, Any]:
    """Apply the verified fix as an edit of the version it was computed for (the editor refuses it
    when the document moved on); say what was applied, what it cost, or why not."""
    session, doc = cmd.session, cmd.doc
    if session.documents.get(doc.uri) is not doc or doc.version != version:
        message = "pallasite: the document changed while the fix was verified; nothing was applied (run it again)."
        session.show(message, lsp.MessageType.Warning)
        return {**result, "message": message}
    edit = lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=version),
        edits=[lsp.TextEdit(lsp.Range(lsp.Position(h.start, 0), lsp.Position(h.end, 0)), "".join(h.lines))
               for h in outcome.hunks])])
    applied = await cmd.ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label="Fix with agent"))
    if not getattr(applied, "applied", False):
        reason = getattr(applied, "failure_reason", None) or "the editor refused it"
        session.show(f"pallasite: the verified fix was not applied ({reason}).", lsp.MessageType.Warning)
        return {**result, "message": f"not applied: {reason}"}
    why = f" {outcome.explanation}" if outcome.explanation else ""
    session.show(f"pallasite: applied a verified fix ({outcome.label}).{why} [{cost}]", lsp.MessageType.Info)
    return {**result, "applied": True}


def _vmem(session: Any) -> dict[str, Any]:
    """The target's scoped-VMEM limit from the chip table the warm worker sent, when known."""
    for spec in session.engine.chip_table or ():
        if spec.name == session.settings.target and spec.scoped_vmem_limit_bytes:
            return {"vmem_limit_bytes": spec.scoped_vmem_limit_bytes, "vmem_source": spec.scoped_vmem_source}
    return {}
