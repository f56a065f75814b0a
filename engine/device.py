"""The engine owns the device: one open, queued device worker per run.

``Engine.device(settings, base)`` returns a ``DeviceWorker`` for those backend settings (local,
ssh or Ray: engine/remote.open_remote), opened on its first request and kept open until the engine
closes: every device phase of a run (the tests, the timings, the profiles, the autotuner's
timings, and every search node) goes through it instead of starting a worker of its own. Requests
queue, one at a time (a TPU runs one timing at a time; a worker answers one request at a time),
while deviceless work (compiles, estimates, model calls) overlaps elsewhere. ``opened`` counts the
workers it started (1 per run unless the worker died and was replaced).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from .client import WorkerConfig
from .remote import BackendSettings, open_remote, where


class DeviceWorker:
    def __init__(self, settings: BackendSettings, base: WorkerConfig | None = None, *,
                 opener: Callable[[BackendSettings, WorkerConfig | None], Any] = open_remote) -> None:
        self.settings, self.base, self._opener = settings, base, opener
        self.kind = settings.kind
        self.where = where(settings)
        self.opened = 0
        self.requests = 0
        self._backend: Any = None
        self._lock = asyncio.Lock()

    @property
    def handshake(self) -> Any:
        return getattr(self._backend, "handshake", None)

    async def request(self, params: Any, *, purpose: str = "device", timeout_s: float | None = None,
                      on_progress: Any = None) -> Any:
        async with self._lock:  # queued: one device request at a time
            if self._backend is None:
                self._backend = self._opener(self.settings, self.base)
                self.opened += 1
            self.requests += 1
            reply = await self._backend.request(params, purpose=purpose, timeout_s=timeout_s, on_progress=on_progress)
            if getattr(self._backend, "node", None):
                self.where = self._backend.where
            return reply

    async def close(self) -> None:
        async with self._lock:
            if self._backend is not None:
                await self._backend.close()
                self._backend = None
