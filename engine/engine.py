"""The engine: one object the CLI, the language server and the agents share (no LSP, no JAX).

It owns what execution needs and builds it in this one place:

- the backend (``engine/workers/pool.py``: a pool of warm workers by purpose; check workers for on-save
  checks, job workers for long work, a device worker for timings), rebuilt when the worker
  settings (interpreter, launcher, limits) change;
- the results stores, one open ``StoreCache`` per workspace (``engine/store_cache.py``): checks
  record and reuse verdicts through it, hovers read it without opening a connection each;
- the chip table the workers report (``chip_table``), for hovers and the cost model;
- the device pool of a run (``device(settings)``, engine/workers/device.py): every device job goes there;
- the jobs registry (``engine/jobs.py``).

    engine = Engine(checks=2)
    reports = await engine.check_paths(["a.py", "b.py"], CheckOptions(target="v5e"))   # input order
    report = await engine.checker("a.py", options).check("a.py", text)
    await engine.close()

``Engine(backend_factory=...)`` swaps the backend (``tests/fake_backend.py`` in tests; ssh later).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..analysis.types import FileReport

from .workers.backend import Backend, Purpose
from .checker import Checker, CheckOptions
from .workers.client import WorkerConfig
from .jobs import JobRegistry
from .workers.pool import local_backend
from .store_cache import StoreCache, workspace_for

BackendFactory = Callable[[WorkerConfig, int], Backend]


def worker_config(options: CheckOptions, *, untrusted: bool = False) -> WorkerConfig:
    """How workers start for these check options (interpreter, launcher, limits); ``untrusted``:
    workers for model-written code (engine/workers/confinement.py)."""
    return WorkerConfig(python=options.interpreter or sys.executable, memory_mb=options.memory_mb,
                        timeout_s=options.time_limit_s, command=options.worker_command,
                        cpu_devices=options.cpu_devices, sandbox=options.sandbox, confine=untrusted,
                        allow_unconfined=options.allow_unconfined)


def _default_factory(config: WorkerConfig, checks: int) -> Backend:
    return local_backend(config, checks=checks, jobs=1)


class Engine:
    """Backends, results stores, the chip table and jobs, built once (see the module docstring)."""

    def __init__(self, *, checks: int = 1, backend_factory: BackendFactory | None = None,
                 use_store: bool = True, workspace: str | Path | None = None) -> None:
        """``workspace``: one results store for every file (the CLI's, found from the first path);
        None: each file's own workspace (the server's: the folder holding .pallasite or pyproject.toml)."""
        self.checks = max(1, int(checks))
        self.workspace = str(Path(workspace).resolve()) if workspace is not None else None
        self.backend_factory = backend_factory or _default_factory
        self.use_store = use_store
        self.jobs = JobRegistry()
        self.chip_table: list[Any] | None = None
        # untrusted -> (backend, the config it was built for): False the user's code, True model-written code
        self._backends: dict[bool, tuple[Backend, WorkerConfig]] = {}
        self._stores: dict[str, StoreCache] = {}
        self._retired: set[asyncio.Future[Any]] = set()
        self._devices: dict[Any, Any] = {}  # (backend settings, worker config) -> DeviceWorker
        self.device_opener: Any = None  # tests: how a device backend is opened (default engine/workers/remote.open_remote)
        self.device_actor: Any = None  # benchmarks: a Ray actor class standing in for the device worker
        self.device_events: Callable[[str], Any] | None = None  # the device pool's state lines (progress)

    # ------------------------------------------------------------------ backends

    def backend(self, options: CheckOptions, *, untrusted: bool = False) -> Backend:
        """The backend for these options' worker settings; a different setting retires the old one.
        ``untrusted``: the backend for model-written code, whose workers are confined (or refuse to
        start: engine/workers/confinement.py); every agent call site that runs a model's code asks for it."""
        config = worker_config(options, untrusted=untrusted)
        current = self._backends.get(untrusted)
        if current is not None and current[1] != config:
            self._retire(current[0])
            current = None
        if current is None:
            current = self._backends[untrusted] = (self.backend_factory(config, self.checks), config)
        return current[0]

    def untrusted_problem(self, options: CheckOptions) -> str | None:
        """Why model-written code cannot run for these options (the refusal to show before any model is
        asked), or None. A backend factory that is not the local pool (tests) is taken as confined."""
        if self.backend_factory is not _default_factory:
            return None
        from .workers.confinement import refusal_for

        return refusal_for(worker_config(options, untrusted=True))

    @property
    def current_backend(self) -> Backend | None:
        """The backend of the user's own checks (None until the first one)."""
        current = self._backends.get(False)
        return current[0] if current is not None else None

    def drop_backend(self) -> None:
        """Stop the workers; the next request starts fresh ones (settings changed, or a reset)."""
        for backend, _ in self._backends.values():
            self._retire(backend)
        self._backends.clear()

    def _retire(self, backend: Backend) -> None:
        future = asyncio.ensure_future(backend.close())
        self._retired.add(future)
        future.add_done_callback(self._retired.discard)

    # ------------------------------------------------------------------ stores

    def store_for(self, path: str) -> StoreCache | None:
        """The results cache of the workspace holding ``path`` (opened once, kept open)."""
        if not self.use_store:
            return None
        workspace = self.workspace or str(workspace_for([path], cwd=Path(path).parent))
        cache = self._stores.get(workspace)
        if cache is None:
            cache = self._stores[workspace] = StoreCache(workspace)
        return cache

    def stored_checks(self, path: str) -> list[Any]:
        """The newest stored verdicts for a file (hovers); [] without a store or when it is unreadable."""
        cache = self.store_for(path)
        if cache is None:
            return []
        try:
            return cache.latest_checks(path)
        except Exception:  # noqa: BLE001 - an unreadable store must not break a hover
            return []

    def stored_measurements(self, path: str) -> list[Any]:
        """The newest stored measurements of a file (hovers); [] without a store or when it is unreadable."""
        cache = self.store_for(path)
        if cache is None:
            return []
        try:
            return cache.latest_measurements(path)
        except Exception:  # noqa: BLE001 - an unreadable store must not break a hover
            return []

    # ------------------------------------------------------------------ checks

    def checker(self, path: str, options: CheckOptions, *, purpose: Purpose = "check",
                untrusted: bool = False) -> Checker:
        """A checker for ``path``'s workspace on the shared backend (cheap: make one per check).
        ``untrusted``: for model-written text: confined workers, and no results cache (a candidate's
        verdicts are not the file's)."""
        if untrusted:
            return Checker(options, client=self.backend(options, untrusted=True), cache=None, purpose=purpose,
                           untrusted=True)
        return Checker(options, client=self.backend(options), cache=self.store_for(path), purpose=purpose)

    async def check(self, path: str, options: CheckOptions, text: str | None = None, *,
                    tiers: Sequence[int] | None = None, on_progress: Callable[[str], Any] | None = None,
                    purpose: Purpose = "check", store: bool = True, untrusted: bool = False) -> FileReport:
        """``store=False``: a text that is not the file's (an agent's candidate checked under the file's
        path) neither reads nor records stored verdicts, which are read back per path (hovers).
        ``untrusted``: model-written text, checked in confined workers (implies ``store=False``)."""
        checker = self.checker(path, options, purpose=purpose, untrusted=untrusted)
        if not store:
            checker.cache = None
        return await checker.check(path, text, tiers=tiers, on_progress=on_progress)

    async def check_paths(self, paths: Sequence[str], options: CheckOptions, *,
                          on_report: Callable[[FileReport], Any] | None = None) -> list[FileReport]:
        """Check files concurrently on the check workers; reports in the order of ``paths``.
        ``on_report`` is called with each report as its file finishes (in the order they finish)."""
        if not paths:
            return []

        async def one(path: str) -> FileReport:
            report = await self.check(path, options)
            if on_report is not None:
                on_report(report)
            return report

        return list(await asyncio.gather(*(one(path) for path in paths)))

    # ------------------------------------------------------------------ the chip table

    async def fetch_chip_table(self, options: CheckOptions, *, purpose: Purpose = "check") -> tuple[list[Any] | None, str | None]:
        """Ask a worker for the chip table (it probes libtpu for scoped-VMEM limits); keeps it, and
        caches it under the versions the worker reported. Returns (specs, None), (specs, why the
        cache was not written) or (None, why). The server asks its warm check worker once, after a
        check, rather than starting a job worker for it."""
        from . import chip_table

        measured = await chip_table.from_worker(self.backend(options), probe=True, purpose=purpose,
                                                timeout_s=options.time_limit_s)
        if measured.error:
            return None, measured.error
        self.chip_table = measured.specs
        try:  # the cache `pallasite chips` reads, named by the versions the worker reported
            chip_table.remember(measured.specs, measured.versions)
        except OSError as exc:
            return measured.specs, f"could not write the chip table cache ({exc})"
        return measured.specs, None

    # ------------------------------------------------------------------ life

    def device(self, settings: Any, base: Any = None) -> Any:
        """The run's one open device pool for these backend settings (engine/workers/device.py: N workers, one
        queue per chip kind, a lost worker's job re-queued): shared by eval's, search's, tune's and
        optimize's tests and timings; closed with the engine. ``device_events`` receives the pool's
        state lines (a worker started, lost, a job re-queued)."""
        from .workers.device import device_pool

        key = repr((settings, base))  # settings may hold dicts (Ray resources): keyed by their text
        found = self._devices.get(key)
        if found is None:
            found = self._devices[key] = device_pool(settings, base, on_event=self._device_event,
                                                     **({"opener": self.device_opener} if self.device_opener else {}),
                                                     **({"actor": self.device_actor} if self.device_actor else {}))
        return found

    def _device_event(self, line: str) -> None:
        """A device pool's state line, to whoever listens now (``device_events``: the current run's progress)."""
        if self.device_events is not None:
            self.device_events(line)

    async def close(self) -> None:
        for device in list(self._devices.values()):
            await device.close()
        self._devices.clear()
        await self.jobs.cancel_all()
        for backend, _ in self._backends.values():
            await backend.close()
        self._backends.clear()
        if self._retired:
            await asyncio.gather(*list(self._retired), return_exceptions=True)
        for cache in self._stores.values():
            cache.close()
        self._stores.clear()


def check_paths_sync(paths: Sequence[str], options: CheckOptions, *, jobs: int = 1, use_store: bool = True,
                     on_report: Callable[[FileReport], Any] | None = None,
                     backend_factory: BackendFactory | None = None,
                     keep_warm_s: float | None = None) -> list[FileReport]:
    """The CLI's entry: an engine with ``jobs`` check workers, the files checked (``on_report`` as each
    finishes), the engine closed. ``keep_warm_s``: the workers are a keeper's, kept warm that many
    seconds after the run for the next one (engine/workers/warm_pool.py)."""
    if keep_warm_s and backend_factory is None:
        from .workers.warm_pool import warm_factory

        backend_factory = warm_factory(keep_warm_s)

    async def go() -> list[FileReport]:
        engine = Engine(checks=min(max(1, jobs), max(1, len(paths))), use_store=use_store,
                        workspace=workspace_for(list(paths)), backend_factory=backend_factory)
        try:
            return await engine.check_paths(paths, options, on_report=on_report)
        finally:
            await engine.close()

    return asyncio.run(go())


def check_paths(paths: Sequence[str], options: CheckOptions, *, jobs: int = 1) -> list[FileReport]:
    """Check files without a results store (synchronous, for scripts and tests); reports in the
    order of ``paths``. The CLI uses ``check_paths_sync`` (the same engine, with its store)."""
    return check_paths_sync(paths, options, jobs=jobs, use_store=False)

