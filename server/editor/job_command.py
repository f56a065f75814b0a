"""One job-command helper: what every ``workspace/executeCommand`` that runs work shares.

A command handler (lsp.py) is a few lines over ``Command``: ``job_command`` reads the one
argument (an options object or a bare uri), finds the open document, and maps the outcomes every
command has the same way: a refusal (``Refused``: bad arguments, no provider, an untrusted folder)
is the reply ``{"ok": False, "message": ...}``, a cancelled request (``$/cancelRequest`` or the
progress's cancel button) the command's cancelled reply, an unexpected failure a message, never a
crash. ``Command`` holds the checks (``need``, ``count``, ``device``, ``need_provider``,
``need_trust``), the progress (``progress``: begun at once with the client's token, cancellable)
and ``run_job``: the work as an engine job (engine/jobs.py) that a cancelled request cancels too.
The work itself is the agents' and the engine's services; the feature modules (search_lsp,
optimize_lsp, tune_lsp, timing_lsp, fix_command) prepare their calls and render their results.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, NoReturn

from lsprotocol import types as lsp

from ..progress import WorkProgress

Result = dict[str, Any]  # a command's reply: {"ok": bool, "message": str, ...}


class Refused(Exception):
    """A command stops before any work: its reply (``{"ok": False, "message": ...}`` and more)."""

    def __init__(self, result: Result):
        super().__init__(result.get("message", ""))
        self.result = result


def options_of(args: tuple[Any, ...]) -> dict[str, Any]:
    """A command's one argument: an options object, or a bare document uri."""
    return args[0] if args and isinstance(args[0], dict) else {"uri": args[0] if args else None}


@dataclass
class Command:
    """One run of a command: the server, the command's name, its options and its open document."""

    ls: Any
    name: str
    options: dict[str, Any]
    doc: Any = None
    token: Any = None
    shown: WorkProgress | None = None  # the progress ``progress`` made: ended on a cancel or failure

    @property
    def session(self) -> Any:
        return self.ls.session

    # ------------------------------------------------------------- checks (each refuses or passes)

    def refuse(self, message: str, show: lsp.MessageType | None = None, **extra: Any) -> NoReturn:
        if show is not None:
            self.session.show(message, show)
        raise Refused({"ok": False, **extra, "message": message})

    def need(self, ok: bool, message: str) -> None:
        if not ok:
            self.refuse(f"{self.name}: {message}")

    def count(self, key: str, default: int, minimum: int = 1, what: str = "a positive count") -> int:
        """An integer option of at least ``minimum`` (booleans are not counts)."""
        value = self.options.get(key, default)
        self.need(isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
                  f"{key} must be {what}, got {value!r}.")
        return value

    def device(self) -> Any:
        """The ``timing`` option: None for estimates (the cost model, no device), else the remote
        backend of the ``pallasite.backend`` settings."""
        timing = self.options.get("timing") or "estimate"
        self.need(timing in ("estimate", "device"), f"timing {timing!r}: choose estimate (the cost model, no "
                                                    "device) or device (the backend in the pallasite.backend settings)")
        return self.session.settings.backend.remote() if timing == "device" else None

    def run_setup(self, feature: str, **fields: Any) -> Any:
        """The run's setup (agents/run_setup.prepare) for the document, as the CLI's commands make it: the
        folder's settings, the Python its checks use, the device of ``timing``; a problem (an unknown chip,
        no confined worker for model-written code) is the command's refusal, shown as an error."""
        from pathlib import Path

        from ...agents.run_setup import prepare
        from ..run_request import request_for

        from ..session_settings import settings_for

        path = self.doc.path
        if "device" not in fields:
            fields["device"] = self.device()
        try:
            return prepare(request_for(path, settings_for(self.session, path), cwd=str(Path(path).parent),
                                      interpreter=self.session.check_options(path).interpreter, **fields),
                           refusal=lambda options, device: self.session.engine.untrusted_problem(options))
        except ValueError as exc:
            self.refuse(f"pallasite: {feature}: {exc}", lsp.MessageType.Error)

    def need_provider(self, feature: str, message: str | None = None) -> None:
        """Refuse (and tell the user how to configure one) when no LLM provider is configured."""
        if self.session.settings.agent.provider:
            return
        if message is not None:
            self.refuse(message)
        from ...agents.llm.providers import HOW_TO_CONFIGURE

        self.refuse(f"pallasite: {feature} needs an LLM provider. {HOW_TO_CONFIGURE}", lsp.MessageType.Info)

    async def trusted(self) -> bool:
        """Whether the document's folder may run code (asking the user once if need be)."""
        from ..checks import trusted_or_ask

        return await trusted_or_ask(self.session, self.session.folder_of(self.doc.path))

    async def need_trust(self, to: str) -> None:
        if not await self.trusted():
            self.refuse(f"{self.session.folder_of(self.doc.path)} is not trusted: run pallasite.trustFolder to {to}.")

    # ------------------------------------------------------------- progress and the job

    async def progress(self, title: str) -> WorkProgress:
        """Work-done progress under a token the client created (shown at once, cancellable: the
        client's cancel button cancels this request), or begun after a second without one."""
        if self.token is None:
            self.token = await progress_token(self.ls)
        self.shown = WorkProgress(self.ls, title, self.token)
        return self.shown

    async def run_job(self, kind: str, path: str, work: Callable[[Any], Awaitable[Any]],
                      progress: WorkProgress | None = None, wait_s: float = 30.0) -> Any:
        """``work`` as an engine job (kind, file); the finished job (its state, result, error).
        A cancelled request cancels the job and waits (up to ``wait_s``) for it to stop."""
        jobs = self.session.engine.jobs
        job = jobs.submit(kind, path, work)
        try:
            return await jobs.wait(job.id)
        except asyncio.CancelledError:
            jobs.cancel(job.id)  # the work stops at its next await (a model call, a worker, a gate)
            if job.task is not None:
                await asyncio.wait([job.task], timeout=wait_s)
            if progress is not None:
                progress.end("cancelled")
            raise


async def progress_token(ls: Any) -> str | None:
    """A work-done progress token the client created, or None (a client without progress)."""
    window = getattr(ls.client_capabilities, "window", None)
    if not (window and window.work_done_progress):
        return None
    token = f"pallasite-check-{uuid.uuid4().hex[:12]}"
    try:
        await ls.work_done_progress.create_async(token)
    except Exception:  # noqa: BLE001 - progress is optional
        return None
    return token


def open_document(ls: Any, name: str, options: dict[str, Any]) -> Any:
    """The open document a command acts on (``options["uri"]``), or the refusal saying it is not open."""
    uri = options.get("uri")
    doc = ls.session.documents.get(uri) if isinstance(uri, str) else None
    if doc is None:
        raise Refused({"ok": False, "message": f"{name}: {uri!r} is not an open document."})
    return doc


async def job_command(ls: Any, name: str, args: tuple[Any, ...], handler: Callable[[Command], Awaitable[Result]], *,
                      document: bool = True, cancelled: Result | None = None,
                      failed: Callable[[Command, Exception], Result] | None = None) -> Result:
    """Run ``handler`` for one command request with the shared outcome mapping: a refusal is its
    reply, a cancelled request ``cancelled`` (default ``{"ok": False, "message": "cancelled"}``),
    an exception ``failed(command, exc)`` when given (else it propagates: pygls answers with the error)."""
    command = Command(ls, name, options_of(args))
    try:
        if document:
            command.doc = open_document(ls, name, command.options)
        return await handler(command)
    except Refused as refusal:
        return refusal.result
    except asyncio.CancelledError:
        _end(command, "cancelled")
        return dict(cancelled or {"ok": False, "message": "cancelled"})
    except Exception as exc:
        _end(command, "failed")
        if failed is None:
            raise
        return failed(command, exc)


def _end(command: Command, message: str) -> None:
    if command.shown is not None:
        command.shown.end(message)  # a no-op once the handler ended it
