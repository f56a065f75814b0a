"""The engine owns the device: one open device pool per run, built from the backend settings.

``Engine.device(settings, base)`` returns a ``DevicePool`` (engine/workers/device_pool.py) for those
settings, opened on its first request and kept open until the engine closes: every device phase of
a run (eval's tests and timings, a search round's evaluations, optimize's tests, timings and
profiles, tune's configurations) goes through it instead of starting a worker of its own. Its
members, from ``members(settings, base)``:

- ``local``: one worker on this machine (its accelerator);
- ``ssh``: one worker per host (``--host a --host b`` or a hosts file; ``{host}`` in
  ``--ssh-command`` is replaced by each host);
- ``ray``: ``--devices N`` actors, each holding ``--ray-resources`` (``TPU=1``: one chip each;
  ``TPU=4``: one v4/v5p host each), optionally in one placement group (``--ray-placement
  strict_spread``: one per node of a multi-host slice).

Each member runs one request at a time (a TPU runs one timing at a time); the pool runs up to N at
once, one queue per chip kind, and re-queues a lost member's job (engine/workers/device_pool.py).
``DeviceWorker(settings, base)`` is the same pool (the name the engine used when it held one worker).
"""

from __future__ import annotations

from typing import Any, Callable

from .client import WorkerConfig
from .device_pool import DevicePool, Member
from .remote import BackendSettings, open_remote, where

Opener = Callable[[BackendSettings, "WorkerConfig | None"], Any]


def members(settings: BackendSettings, base: WorkerConfig | None = None, *, opener: Opener = open_remote,
            actor: type | None = None) -> list[Member]:
    """The pool's members for these settings (nothing is opened yet). ``actor``: a Ray actor class
    instead of the worker's (a benchmark's device stand-in)."""
    settings.validate()
    if settings.kind == "ssh" and len(settings.all_hosts) > 1:
        return [Member(f"w{i}", f"ssh:{host}", _bind(opener, settings.for_host(host), base))
                for i, host in enumerate(settings.all_hosts)]
    if settings.kind == "ray" and (settings.devices > 1 or settings.ray_placement or actor is not None):
        return _ray_members(settings, base, actor)
    return [Member("w0", where(settings), _bind(opener, settings, base))]


def _bind(opener: Opener, settings: BackendSettings, base: WorkerConfig | None) -> Callable[[], Any]:
    return lambda: opener(settings, base)


def _ray_members(settings: BackendSettings, base: WorkerConfig | None, actor: type | None) -> list[Member]:
    import dataclasses

    from .ray_backend import RayBackend, RayPlacement, _WorkerActor
    from .remote import worker_config

    config = worker_config(dataclasses.replace(settings, kind="local", devices=1), base)
    resources = dict(settings.ray_resources)
    num_cpus = resources.pop("CPU", 1.0)  # --ray-resources TPU=1,CPU=0.5: Ray takes CPUs as num_cpus
    group = RayPlacement(settings.devices, resources, settings.ray_placement, num_cpus=num_cpus) \
        if settings.ray_placement else None
    name = where(settings)

    def make(index: int) -> Callable[[], Any]:
        return lambda: RayBackend(config, address=settings.ray_address, resources=resources, num_cpus=num_cpus,
                                  placement=(group, index) if group is not None else None,
                                  actor=actor or _WorkerActor)

    found = [Member(f"w{i}", f"{name} #{i}", make(i)) for i in range(settings.devices)]
    if group is not None:
        found[0].on_close = group.remove  # the group goes when the pool closes
    return found


def device_pool(settings: BackendSettings, base: WorkerConfig | None = None, *, opener: Opener = open_remote,
                on_event: Callable[[str], Any] | None = None, actor: type | None = None) -> DevicePool:
    """The run's device pool for these settings (see the module docstring)."""
    return DevicePool(members(settings, base, opener=opener, actor=actor), kind=settings.kind, where=where(settings),
                      device_kind=settings.device_kind, on_event=on_event)


def candidate_config(memory_mb: int, timeout_s: float = 600.0, *, allow_unconfined: bool = False) -> WorkerConfig:
    """How a device worker for model-written candidates starts: the host's accelerator, confined
    (engine/workers/confinement.py), with the run's memory and time limits."""
    return WorkerConfig(timeout_s=timeout_s, memory_mb=memory_mb, platforms=None, confine=True,
                        allow_unconfined=allow_unconfined)


def DeviceWorker(settings: BackendSettings, base: WorkerConfig | None = None, *,  # noqa: N802 - the old name
                 opener: Opener = open_remote) -> DevicePool:
    """The run's device pool (one member for a single host or actor)."""
    return device_pool(settings, base, opener=opener)
