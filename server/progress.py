"""LSP work-done progress for a check: shown at once for an explicit command (the client gets a
token first), otherwise only once the work has run for a second; cancellable from the client."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Sequence

from lsprotocol import types as lsp


class WorkProgress:
    """One check's progress: ``begin``, ``report`` (the worker's stage messages), ``end``."""

    DELAY_S = 1.0

    def __init__(self, client: Any, title: str, token: Any = None):
        self.client, self.title, self.token = client, title, token
        self.started = False
        self.pending: asyncio.Task | None = None
        self.message = ""
        self.task = asyncio.current_task()

    def _supported(self) -> bool:
        window = getattr(self.client.client_capabilities, "window", None)
        return bool(window and window.work_done_progress)

    def begin(self, tiers: Sequence[int] = ()) -> None:
        self.message = "tiers " + ", ".join(map(str, tiers)) if tiers else ""
        if self.token is not None:
            self._begin()
        elif self._supported():
            self.pending = asyncio.ensure_future(self._begin_later())

    async def _begin_later(self) -> None:
        await asyncio.sleep(self.DELAY_S)
        self.token = f"pallasite-check-{uuid.uuid4().hex[:12]}"
        try:
            await self.client.work_done_progress.create_async(self.token)
        except Exception:
            self.token = None
            return
        self._begin()

    def _begin(self) -> None:
        self.started = True
        self.client.work_done_progress.begin(self.token, lsp.WorkDoneProgressBegin(
            title=self.title, message=self.message or None, cancellable=True))
        future = self.client.work_done_progress.tokens.get(self.token)
        if future is not None and self.task is not None:
            future.add_done_callback(lambda f: f.cancelled() and self.task.cancel())

    def report(self, message: str) -> None:
        self.message = message
        if self.started:
            self.client.work_done_progress.report(self.token, lsp.WorkDoneProgressReport(message=message))

    def end(self, message: str) -> None:
        if self.pending is not None:
            self.pending.cancel()
        if self.started:
            self.started = False
            self.client.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
            self.client.work_done_progress.tokens.pop(self.token, None)
