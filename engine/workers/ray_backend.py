"""The ``ray`` backend: workers as Ray actors on a cluster with accelerator resources.

``pip install 'ray>=2.40'`` (pallasite's ``ray`` extra). Each ``RayBackend`` holds one actor, created with the resources
the work needs (``resources={"TPU": 4}`` on a TPU cluster; nothing extra on a CPU-only one; a device
pool of N of them, engine/workers/device.py, optionally in one ``RayPlacement`` group), whose
only job is to run ``pallasite worker`` as a subprocess on its node through the same
``WorkerClient`` the local backend uses: the environment allowlist, the memory limit (RSS polled on
the node), time limits, cancel-then-kill and the protocol are identical everywhere. Kernel code
never runs in the Ray worker process itself.

It implements the ``Backend`` seam (engine/workers/backend.py): ``start``, ``request(params, purpose=...)``,
``describe``, ``close``. Faults are replies, not exceptions: the worker dying mid-job is "crashed"
(the actor starts a new one for the next request); the actor or its node dying (a dropped
connection) is "crashed" too and the next request creates a new actor; a request past its limit
is "timed_out" (the actor's client
cancels, then kills the worker; the backend also gives up waiting after the limit plus a grace).
Progress is not streamed back from a Ray task (the request's result arrives whole).

Client side: ``ray`` is imported only when this backend is used; no JAX.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from .backend import BackendInfo, Reply
from .client import WorkerClient, WorkerConfig

GRACE_S = 15.0  # past the request's limit, how long to wait for the actor before giving up on it


class _WorkerActor:
    """Lives in a Ray worker process; owns one ``pallasite worker`` subprocess (async actor)."""

    def __init__(self, config: WorkerConfig) -> None:
        # The node's own interpreter: the driver's path may not exist there.
        self.client = WorkerClient(dataclasses.replace(config, python=sys.executable))

    async def start(self) -> Any:
        return await self.client.start()

    async def request(self, params: Any, timeout_s: float | None) -> Reply:
        return await self.client.request(params, timeout_s=timeout_s)

    async def node(self) -> dict[str, Any]:
        import socket

        import ray

        return {"hostname": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id(),
                "pid": os.getpid()}

    async def close(self) -> None:
        await self.client.close()


class RayBackend:
    """One Ray actor running one worker; recreated when it dies. Use as ``async with``."""

    def __init__(self, config: WorkerConfig | None = None, *, address: str | None = None,
                 resources: Mapping[str, float] | None = None, num_cpus: float = 1,
                 init_kwargs: Mapping[str, Any] | None = None, placement: "tuple[RayPlacement, int] | None" = None,
                 actor: type = _WorkerActor) -> None:
        """``placement``: the placement group (engine/workers/ray_backend.RayPlacement) and bundle this actor takes
        (a device pool spread over a slice's hosts); ``actor``: the actor class (benchmarks pass a device
        stand-in with the same methods)."""
        self.config = config or WorkerConfig()
        self.placement = placement
        self.actor_class = actor
        self.address = address
        self.resources = dict(resources or {})
        self.num_cpus = num_cpus
        self.init_kwargs = dict(init_kwargs or {})
        self.handshake: Any = None
        self.node: dict[str, Any] | None = None
        self.restarts = 0
        self._actor: Any = None
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> "RayBackend":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _ray(self) -> Any:
        try:
            import ray
        except ImportError:
            raise RuntimeError("the ray backend needs Ray: pip install 'ray>=2.40' (pallasite's ray extra)") from None
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, "log_to_driver": False, **self.init_kwargs}
            address = self.address or os.environ.get("RAY_ADDRESS")
            ray.init(address=address, **kwargs) if address else ray.init(**kwargs)
        return ray

    async def start(self) -> Any:
        """Create the actor (with its resources) and start its worker; returns the handshake."""
        ray = self._ray()
        if self._actor is None:
            if self.handshake is not None:
                self.restarts += 1
            _check_resources(ray, {"CPU": self.num_cpus, **self.resources})
            options: dict[str, Any] = {"num_cpus": self.num_cpus, "max_concurrency": 4}
            if self.resources:
                options["resources"] = dict(self.resources)
            if self.placement is not None:
                group, index = self.placement
                options["scheduling_strategy"] = await group.strategy(ray, index)
            self._actor = ray.remote(self.actor_class).options(**options).remote(self.config)
            self.handshake = await self._actor.start.remote()
            self.node = await self._actor.node.remote()
        return self.handshake

    @property
    def where(self) -> str:
        host = (self.node or {}).get("hostname", "?")
        return f"ray:{self.address or 'local'} (node {host})"

    async def request(self, params: Any, *, purpose: str = "job", timeout_s: float | None = None,
                      on_progress: Any = None) -> Reply:
        """Run the op ``params`` names (wire/messages.py) on the actor's worker. Never raises for the
        worker's or the actor's sake. ``purpose`` is accepted as for any Backend: one worker serves all."""
        started = time.monotonic()
        limit = timeout_s or self.config.timeout_s
        async with self._lock:
            try:
                await self.start()
            except Exception as exc:  # noqa: BLE001 - no actor, no worker: a reply that says why
                self._actor = None
                return Reply("not_started", message=f"could not start a worker on Ray ({type(exc).__name__}: {exc})",
                             elapsed_s=time.monotonic() - started, start_problem="exited")
            ray = self._ray()
            ref = self._actor.request.remote(params, limit)
            try:
                return await asyncio.wait_for(asyncio.shield(_as_future(ref)), limit + GRACE_S)
            except asyncio.TimeoutError:
                self._drop(ray)
                return Reply("timed_out", message=f"the request ran past its limit of {limit:g} s and the Ray actor did "
                             "not answer; the actor was killed and will be replaced", elapsed_s=time.monotonic() - started,
                             limit_s=limit)
            except asyncio.CancelledError:
                ray.cancel(ref)  # async actor: the actor's WorkerClient sees CancelledError, cancels, kills
                raise
            except Exception as exc:  # noqa: BLE001 - RayActorError and friends: the actor or its node died
                self._drop(ray)
                return Reply("crashed", message=f"the Ray actor running the worker died ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}); a new one starts for the next request",
                             elapsed_s=time.monotonic() - started)

    def _drop(self, ray: Any) -> None:
        actor, self._actor = self._actor, None
        if actor is not None:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def describe(self) -> BackendInfo:
        hello = self.handshake
        return BackendInfo(kind="ray", host=self.where, workers=1,
                           devices=tuple(getattr(hello, "devices", ()) or ()),
                           versions={k: getattr(hello, k, None) for k in ("python", "pallasite", "jax", "jaxlib", "libtpu")}
                           if hello is not None else {},
                           protocol=getattr(hello, "protocol", None), problem=getattr(hello, "error", None))

    async def close(self) -> None:
        if self._actor is None:
            return
        import ray

        try:
            await asyncio.wait_for(_as_future(self._actor.close.remote()), 10)
        except Exception:  # noqa: BLE001
            pass
        self._drop(ray)


class RayPlacement:
    """One placement group shared by a pool's actors: ``bundles`` bundles of ``resources`` (one per
    device worker) placed by ``strategy`` (``strict_spread``: one per node, e.g. one per host of a
    multi-host TPU slice). Created by the first actor that needs it; a group the cluster cannot place
    within ``timeout_s`` is an error that says so, not a wait."""

    def __init__(self, bundles: int, resources: Mapping[str, float], strategy: str = "spread", *,
                 num_cpus: float = 1, timeout_s: float = 120.0) -> None:
        self.bundles, self.strategy_name, self.timeout_s = bundles, strategy.upper(), timeout_s
        self.bundle = {"CPU": num_cpus, **{k: v for k, v in resources.items() if v}}
        self.group: Any = None
        self._lock = asyncio.Lock()

    async def strategy(self, ray: Any, index: int) -> Any:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        async with self._lock:
            if self.group is None:
                group = placement_group([dict(self.bundle) for _ in range(self.bundles)], strategy=self.strategy_name)
                try:
                    await asyncio.wait_for(_as_future(group.ready()), self.timeout_s)
                except asyncio.TimeoutError:
                    ray.util.remove_placement_group(group)
                    raise RuntimeError(f"the Ray cluster could not place {self.bundles} bundles of {self.bundle} "
                                       f"({self.strategy_name}) within {self.timeout_s:g} s; fewer --devices, other "
                                       "--ray-resources or --ray-placement spread") from None
                self.group = group
        return PlacementGroupSchedulingStrategy(placement_group=self.group, placement_group_bundle_index=index)

    def remove(self) -> None:
        if self.group is not None:
            import ray

            try:
                ray.util.remove_placement_group(self.group)
            except Exception:  # noqa: BLE001 - the cluster is gone
                pass
            self.group = None


def _check_resources(ray: Any, wanted: Mapping[str, float]) -> None:
    """Refuse at once what the cluster can never give (Ray would wait for it forever)."""
    have = ray.cluster_resources()
    missing = {k: v for k, v in wanted.items() if v and have.get(k, 0) < v}
    if missing:
        offer = ", ".join(f"{k}={v:g}" for k, v in sorted(have.items()) if not k.startswith("node:")
                          and "memory" not in k) or "nothing"
        raise RuntimeError("the Ray cluster cannot give " + ", ".join(f"{k}={v:g}" for k, v in missing.items())
                           + f" (it has {offer}); start it with those resources or change --ray-resources")


def _as_future(ref: Any) -> "asyncio.Future[Any]":
    return asyncio.wrap_future(ref.future()) if hasattr(ref, "future") else ref  # ObjectRef is awaitable too
