"""What the agent commands share to set up a run, so no front end imports another: the device from
the flags (``--backend`` and its pool), the confinement refusal, an open device and its name, the agent
settings from the project and the flags, and a search's run id, stored nodes and written outputs
(the CLI's `search` and the editor's search command alike).

The rest of a run's setup (store, recorder, resume, replay) still lives in each front end's ``run``;
tests/test_front_ends.py lists the functions still over 30 lines."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path


def device_settings(args: argparse.Namespace):
    """The engine's BackendSettings for ``--backend`` (None for ``estimate``); ValueError says what is wrong."""
    from ..engine.remote import BackendSettings, parse_resources, read_hosts_file

    if args.backend == "estimate":
        return None
    hosts = tuple(args.host or ()) + (read_hosts_file(args.hosts_file) if getattr(args, "hosts_file", None) else ())
    settings = BackendSettings(kind=args.backend, host=hosts[0] if hosts else None, hosts=hosts[1:],
                               command=args.ssh_command, remote_worker=args.remote_worker, ray_address=args.ray_address,
                               ray_resources=parse_resources(args.ray_resources), devices=getattr(args, "devices", 1),
                               ray_placement=getattr(args, "ray_placement", None),
                               device_kind=getattr(args, "device_kind", None))
    settings.validate()
    return settings


def untrusted_refusal(device, allow_unconfined: bool, python: str | None = None, *,
                      project: str | None = None) -> str | None:
    """Why the model-written code of this run cannot run (local workers, and the device's unless it is
    a Ray cluster's, which decides on its own node): the message to stop with before any model is asked.
    ``project``: a path in the project whose ``worker.sandbox`` setting counts ("off" refuses, as ``fix`` does)."""
    from ..engine.client import WorkerConfig
    from ..engine.confinement import refusal_for
    from ..engine.remote import worker_config

    sandbox = "auto"
    if project is not None:
        from .settings import load_project_settings

        start = Path(project).resolve()
        sandbox = load_project_settings(start if start.is_dir() else start.parent)[0].worker.sandbox
    base = WorkerConfig(confine=True, allow_unconfined=allow_unconfined, sandbox=sandbox,
                        **({"python": python} if python else {}))
    if device is not None and device.kind != "ray":
        return refusal_for(base) or refusal_for(worker_config(device, base))
    return refusal_for(base)


def open_device(settings, memory_mb: int, timeout_s: float = 600.0, *, allow_unconfined: bool = False):
    """An open device backend for these settings, and its name (``local``, ``ssh:HOST``, ``ray:ADDRESS``);
    its worker runs model-written code, so it is confined (engine/confinement.py)."""
    from ..engine.client import WorkerConfig
    from ..engine.remote import open_remote, where

    return open_remote(settings, WorkerConfig(timeout_s=timeout_s, memory_mb=memory_mb, platforms=None, confine=True,
                                              allow_unconfined=allow_unconfined)), where(settings)


def device_where(settings) -> str:
    from ..engine.remote import where

    return where(settings) if settings is not None else "estimate"


def search_run_id(text: str, options: object, provider: str, chip: str, timing: str = "estimate") -> str:
    """Same file, options, seed, provider, chip and timing -> the same run (so a re-run resumes)."""
    parts = [text, options.algo, options.seed, options.params(), list(options.strategies), provider, chip,
             "nodes are optimize iterations", timing]
    key = json.dumps(parts)
    return "search-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def agent_settings(args: argparse.Namespace):
    """The project's settings for the file ``args.path``, its agent settings with the command line's
    model flags over them, and the provider name: fix and optimize."""
    from .settings import load_project_settings

    settings, warnings = load_project_settings(Path(args.path).resolve().parent)
    for warning in warnings:
        print(f"warning: settings: {warning}", file=sys.stderr)
    agent = settings.agent
    changes = {k: v for k, v in (("provider", args.provider), ("model", args.model), ("baseUrl", args.base_url),
                                 ("apiKeyEnv", args.api_key_env), ("scriptedFile", args.scripted_file),
                                 ("maxRounds", args.rounds),
                                 ("allowUnconfined", True if getattr(args, "allow_unconfined", False) else None))
               if v is not None}
    return settings, dataclasses.replace(agent, **{k: v for k, v in changes.items() if k != "provider"}), \
        changes.get("provider", agent.provider)


def stored_nodes_exist(workspace, rid: str) -> bool:
    """Whether the workspace's store holds a search of that run id (what a replay reads)."""
    from ..knowledge.store import ResultsStore

    with ResultsStore.open(workspace) as store:
        return bool(stored_nodes(store, rid))


def stored_nodes(store, rid: str) -> list:
    from ..agents.search_graph import SearchNode

    return [SearchNode.from_json(s.payload) for s in store.agent_steps(rid) if s.kind == "search_node"] if store else []


def write_outputs(graph, rid: str, out_dir: Path, title: str, report: Path | None = None) -> Path:
    """The graph as JSON and the HTML report; returns the report's path."""
    from .report_html import search_html

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{rid}.json").write_text(graph.dumps())
    report = report or out_dir / f"{rid}.html"
    report.write_text(search_html(graph.to_json(), title=title))
    return report
