"""A device stand-in: a Ray actor that answers each ``time`` job after a fixed time, for measuring the
device pool's scheduling (benchmarks/bench_device_pool.py) and testing its faults on a Ray cluster.

``StandInActor`` has the methods ``RayBackend`` calls on its actor (``start``, ``request``, ``node``,
``close``), so ``Engine.device_actor = StandInActor`` (or ``RayBackend(actor=StandInActor)``) puts it
where a ``pallasite worker`` would run: the Ray placement, the pool's queues and re-queues are the
real ones, the device is not. It handshakes as a worker whose device kind is ``STANDIN_KIND``
(``PALLASITE_STANDIN_KIND`` in its environment or the pool's ``WorkerConfig.env`` overrides it) and
answers a ``time`` job after ``PALLASITE_STANDIN_SECONDS`` (default 0.5 s) with made-up device medians: the candidate's a pure
function of its text, the reference 100 us. Its timings are labelled as the stand-in's: never a
chip's time. Nothing here imports JAX.

``standin_device_config(...)``: a real ``pallasite worker`` that plays an accelerator for the judge
(``PALLASITE_STANDIN_DEVICE=1``; runner/judging/exported_run.py): its JAX runs on the CPU, but model-written
code is judged as on a chip, from the candidate's exported program in the process that holds the
"device", so tests run the device path without a TPU.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
from typing import Any

from ...analysis.types import Measurement, Provenance
from ...wire import messages, protocol

from .backend import Reply

STANDIN_KIND = "stand-in device"
STANDIN_DEVICE_ENV = "PALLASITE_STANDIN_DEVICE"  # read by runner/judging/exported_run.py
METHOD = "stand-in: a fixed time per job, made-up medians (not a device timing of any chip)"


def standin_median_ns(text: str) -> float:
    """The candidate's made-up median: 50-150 us, a pure function of its text."""
    digest = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return 50e3 + (digest % 100_000) / 1000.0 * 1e3


class StandInActor:
    """A Ray actor standing in for a device worker (see the module docstring)."""

    def __init__(self, config: Any = None) -> None:
        env = {**os.environ, **dict(getattr(config, "env", None) or {})}  # the pool's WorkerConfig.env wins
        self.kind = env.get("PALLASITE_STANDIN_KIND", STANDIN_KIND)
        self.seconds = float(env.get("PALLASITE_STANDIN_SECONDS", "0.5"))
        self.jobs = 0

    async def start(self) -> protocol.Handshake:
        return protocol.Handshake(protocol=protocol.PROTOCOL_VERSION, pid=os.getpid(), platform="standin",
                                  devices=(self.kind,), ops=("time",))

    async def request(self, params: Any, timeout_s: float | None = None) -> Reply:
        await asyncio.sleep(self.seconds)
        self.jobs += 1
        if not isinstance(params, messages.TimeParams):
            return Reply("ok", result=None)
        text = params.source.file.text or params.source.file.path or ""
        cand = standin_median_ns(text)
        ref = 100e3 if params.reference is not None or getattr(params, "trusted", None) is not None else None
        return Reply("ok", result=messages.TimeResult(
            verdict="ok", entry=params.entry, path=params.source.file.path, provenance=Provenance.DEVICE.value,
            candidate=Measurement("ok", Provenance.DEVICE, self.kind, METHOD, (cand,) * 3, cand),
            reference=Measurement("ok", Provenance.DEVICE, self.kind, METHOD, (ref,) * 3, ref) if ref else None))

    async def node(self) -> dict[str, Any]:
        import ray

        return {"hostname": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id(),
                "pid": os.getpid()}

    async def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        return None


def standin_device_config(*, confine: bool = True, allow_unconfined: bool = False, **options: Any) -> Any:
    """A ``WorkerConfig`` for a confined worker that plays an accelerator (see the module docstring);
    ``allow_unconfined``: each request in a plain fresh process instead of a sandbox (still judged)."""
    from .client import WorkerConfig

    env = {**dict(options.pop("env", None) or {}), STANDIN_DEVICE_ENV: "1"}
    args = tuple(options.pop("worker_args", ())) + (("--allow-unconfined",) if allow_unconfined else ())
    return WorkerConfig(confine=confine, platforms="cpu", env=env, worker_args=args, **options)
