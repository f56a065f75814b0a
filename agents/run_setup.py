"""One run setup behind every agent command (fix, optimize, search, eval, tune), for the CLI and the
editor alike: the project's settings and the caller's overrides become the chip, the provider and its
configuration, the agent settings, the check options (the judge's tiers: tier 2 for the chip), the
device, the workspace, its results store and recorder, and the confinement refusal said before any
model is asked. Search's run id, stored nodes and replay check live here too.

A front end turns its own arguments (argparse, an LSP command's parameters) into a ``RunRequest``
and renders what comes back; it decides nothing this module decides. The settings object is passed
in, already loaded: the CLI reads the project's pyproject, the editor its session's merged settings."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..analysis.verdict import judge_tiers
from ..engine.checker import TARGETS


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What a caller asks for: the file (or task folder), the loaded settings and its overrides."""

    path: str
    settings: Any  # the project's Settings (agents see their fields, never how they were read)
    options: Any  # the settings' check options (engine/checker.CheckOptions), converted by the caller: agents
    # read data and never call back into the front end's settings (server/run_request.request_for makes both)
    target: str | None = None  # a chip over the settings' target
    provider: str | None = None  # a provider over the settings' agent.provider
    agent: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # agent settings over the project's
    tiers: tuple[int, ...] | None = None  # check tiers over the settings' (the judge adds tier 2)
    judge: bool = True  # candidates are judged: compiled for the chip with tier 2, as every command does
    device: Any = None  # the engine's BackendSettings; None: estimates / local workers
    runs_model_code: bool = True  # model-written code will run: refuse up front where it cannot be confined
    interpreter: str | None = None  # the worker's Python over the settings' (the editor's, until a folder is trusted)
    memory_mb: int | None = None  # a worker's memory limit over the settings' check.memoryMb (--memory-mb)
    time_limit_s: float | None = None  # a worker request's time limit over the settings' check.timeLimitS
    cwd: str | None = None  # the store's folder outside any project (CLI: the current folder; editor: the file's)


@dataclasses.dataclass(frozen=True)
class RunSetup:
    """What every agent command starts from, decided once."""

    path: Path
    workspace: Path
    settings: Any  # the settings the run was set up from (tunables, worker, check limits)
    chip: str
    provider: str
    agent: Any  # the AgentSettings, overrides applied
    tiers: tuple[int, ...]
    options: Any  # the engine's CheckOptions for the chip (the project's settings: the judge's only ones)
    device: Any
    confined: bool = True  # model-written code runs (the judge's workers are confined)

    def provider_config(self) -> Any:
        """The model's configuration, its calls recorded in the workspace's store."""
        from ..knowledge.store import store_path

        config = self.agent.provider_config(self.provider)
        return dataclasses.replace(config, store_path=str(store_path(self.workspace)))

    def where(self) -> str:
        return device_where(self.device)

    def open_store(self, on_error: Callable[[str], None] | None = None) -> Any:
        """The workspace's results store. ``on_error``: a store that cannot be opened is told to it (why,
        and that nothing is remembered this time) and the run goes on without one (None)."""
        from ..knowledge.store import ResultsStore, StoreError

        try:
            return ResultsStore.open(self.workspace)
        except StoreError as exc:
            if on_error is None:
                raise
            on_error(f"results are not recorded (running without the results store): {exc}")
            return None

    def judge(self, engine: Any, trusted: Any, **how: Any) -> Any:
        """The run's one ``Judge`` (engine/judge.py) over ``engine``: these check options, this chip, this
        device and confinement, and ``trusted`` (engine/judge.Trusted: the user's original with its frozen
        tests, or a task's reference). ``how``: the run's own knobs (``verify``, ``timeout_s``, ``runs``, a
        shared ``device_slot``, an already open ``device`` in tests); nothing else decides a verdict."""
        from ..engine.judge import Judge

        device = how.pop("device", self.device)
        where = how.pop("where", self.where() if device is not None else "")
        if device is not None and engine.device_events is None and "on_device_event" in how:
            engine.device_events = how.pop("on_device_event")
        how.pop("on_device_event", None)
        how.setdefault("timeout_s", float(self.options.time_limit_s))
        how.setdefault("confined", self.confined)  # fix: a proposal is model-written code whatever the tiers
        return Judge(engine, self.options, trusted, chip=self.chip, device=device, where=where, **how)

    def recorder(self) -> Any:
        """Every model call of the run, stored under the run's id (what a replay reads)."""
        from .optimize_record import OptimizeRecorder

        return OptimizeRecorder(self.workspace)


def prepare(request: RunRequest, refusal: Callable[[Any, Any], str | None] | None = None) -> RunSetup:
    """The run's setup; ValueError says what is wrong, before any model is asked or any code runs.
    ``refusal(options, device)``: why model-written code cannot run (default ``untrusted_refusal``; the
    editor asks its engine, whose backends tests replace)."""
    from ..engine.store_cache import workspace_for

    settings = request.settings
    chip = request.target or settings.target
    if chip not in TARGETS:
        raise ValueError(f"--target {chip!r}: unknown chip; choose one of {', '.join(TARGETS)}")
    changes = {k: v for k, v in request.agent.items() if v is not None}
    agent = dataclasses.replace(settings.agent, **changes)
    tiers = tuple(request.tiers if request.tiers is not None else settings.tiers)
    options = dataclasses.replace(request.options, tiers=tuple(judge_tiers(tiers) if request.judge else tiers),
                                  target=chip, allow_unconfined=agent.allowUnconfined)
    if request.interpreter:
        options = dataclasses.replace(options, interpreter=request.interpreter)
    limits = {"memory_mb": request.memory_mb, "time_limit_s": request.time_limit_s}
    options = dataclasses.replace(options, **{k: v for k, v in limits.items() if v is not None})
    if request.device is not None:
        request.device.validate()
    if request.runs_model_code:
        refused = (refusal or untrusted_refusal)(options, request.device)
        if refused:  # every candidate would be refused: say so before any model is asked
            raise ValueError(refused)
    path = Path(request.path)
    workspace = Path(workspace_for([str(path.resolve())], cwd=request.cwd))
    return RunSetup(path, workspace, settings, chip, request.provider or agent.provider, agent, tiers, options,
                    request.device, confined=request.runs_model_code)


def local_engine(jobs: int = 1) -> Any:
    """An engine of this machine's workers for a command's run (``jobs`` job workers); the caller closes it."""
    from ..engine.engine import Engine
    from ..engine.workers.pool import local_backend

    return Engine(checks=1, use_store=False,
                  backend_factory=lambda config, checks: local_backend(config, checks=checks, jobs=max(1, jobs)))


def untrusted_refusal(options: Any, device: Any = None) -> str | None:
    """Why the model-written code of this run cannot run, or None: the confined worker these check
    options start (engine/engine.worker_config), and the device's unless it is a Ray cluster's,
    which decides on its own node."""
    from ..engine.workers.confinement import refusal_for
    from ..engine.engine import worker_config
    from ..engine.workers.remote import worker_config as device_config

    base = worker_config(options, untrusted=True)
    if device is not None and device.kind != "ray":
        return refusal_for(base) or refusal_for(device_config(device, base))
    return refusal_for(base)


def device_where(settings: Any) -> str:
    from ..engine.workers.remote import where

    return where(settings) if settings is not None else "estimate"


def search_run_id(text: str, options: Any, provider: str, chip: str, timing: str = "estimate") -> str:
    """Same file, options, seed, provider, chip and timing -> the same run (so a re-run resumes)."""
    parts = [text, options.algo, options.seed, options.params(), list(options.strategies), provider, chip,
             "nodes are optimize iterations", timing]
    return "search-" + hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12]


def stored_nodes(store: Any, rid: str) -> list:
    """The search nodes stored under a run id (a re-run resumes from them, a replay reads them)."""
    from .search_graph import SearchNode

    return [SearchNode.from_json(s.payload) for s in store.agent_steps(rid) if s.kind == "search_node"] if store else []


def stored_nodes_exist(workspace: Any, rid: str) -> bool:
    """Whether the workspace's store holds a search of that run id (what a replay reads)."""
    from ..knowledge.store import ResultsStore

    with ResultsStore.open(workspace) as store:
        return bool(stored_nodes(store, rid))
