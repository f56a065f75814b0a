"""The keeper of warm check workers between `pallasite check --keep-warm` runs (engine/workers/warm_pool.py
says what it is for and how a run finds it).

``python -m pallasite.engine.workers.warm_keeper --socket PATH --checks N --idle SECONDS --config JSON``:
the first process binds the socket, then leaves (``daemonize``: the run that started it waits for
that, so it connects to a socket that listens); the keeper goes on in a session of its own with a
local pool of the config's workers (``engine/workers/pool.local_backend``), starts N check workers at once,
and serves runs on the socket: each request is the pool's ``request`` (the worker's limits, cancel,
restarts as without a keeper), its progress and reply sent back as JSON lines. A run that leaves
cancels what it still had running. The keeper leaves ``SECONDS`` after its last run left (or on
SIGTERM/SIGINT), closing its workers and removing its socket. It answers only processes of its
own user (``SO_PEERCRED``). No JAX here: the workers import it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import sys
import time
from typing import Any

from ...analysis.types import to_json
from ...wire import protocol
from ...wire.messages import PingParams
from .backend import Reply
from .pool import PoolBackend, local_backend
from .warm_pool import config_from_json, encode_reply, info_to_json, line


class Keeper:
    def __init__(self, pool: PoolBackend, checks: int, idle_s: float) -> None:
        self.pool = pool
        self.checks = checks
        self.idle_s = idle_s
        self.runs = 0  # runs connected now
        self.busy = 0  # requests running now
        self.last = time.monotonic()

    def facts(self) -> dict[str, Any]:
        workers = [w for lane in self.pool.lanes.values() for w in lane.workers]
        return {"pid": os.getpid(), "workers": len(workers),
                "started": sum(getattr(w, "_started", 0) for w in workers)}

    async def warm(self, checks: int) -> None:
        """Grow the check lane to ``checks`` workers and start them all at once (a ping each)."""
        self.checks = max(self.checks, checks)
        self.pool.grow("check", self.checks)
        await asyncio.gather(*(self.pool.request(PingParams(), purpose="check", timeout_s=120)
                               for _ in range(self.checks)), return_exceptions=True)

    async def serve_run(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One run's connection: its hello, requests and cancels, until it leaves."""
        if not _same_user(writer):
            writer.close()
            return
        self.runs += 1
        running: dict[str, asyncio.Task[None]] = {}
        lock = asyncio.Lock()

        async def send(msg: dict[str, Any]) -> None:
            async with lock:
                writer.write(line(msg))
                with contextlib.suppress(OSError, ConnectionError):
                    await writer.drain()

        try:
            while raw := await reader.readline():
                msg = json.loads(raw)
                kind = msg.get("kind")
                if kind == "hello":
                    self._warming = asyncio.create_task(self.warm(int(msg.get("checks") or 1)))
                    await send({"kind": "hello", "info": info_to_json(self.pool.describe()), "keeper": self.facts()})
                elif kind == "request":
                    task = asyncio.create_task(self.run(msg, send))
                    running[msg["id"]] = task
                    task.add_done_callback(lambda _, key=msg["id"]: running.pop(key, None))
                elif kind == "cancel" and msg.get("id") in running:
                    running[msg["id"]].cancel()
        except (ConnectionError, ValueError):
            pass  # a run that went away, or sent a line that is not JSON: it is left
        finally:
            for task in list(running.values()):
                task.cancel()  # the pool tells the worker (and kills one that does not stop)
            self.runs -= 1
            self.last = time.monotonic()
            writer.close()

    async def run(self, msg: dict[str, Any], send) -> None:
        request_id, op = msg["id"], msg.get("op", "")
        self.busy += 1
        try:
            try:
                params = protocol.read_params(op, msg.get("params"))
            except protocol.ProtocolError as exc:
                reply = Reply("error", error=protocol.ErrorInfo("ProtocolError", str(exc)), message=str(exc))
            else:
                async def progress(report) -> None:
                    await send({"kind": "progress", "id": request_id, "progress": to_json(report)})

                reply = await self.pool.request(params, purpose=msg.get("purpose") or "check",
                                                timeout_s=msg.get("timeout_s"), on_progress=progress)
            await send({"kind": "reply", "id": request_id, "reply": encode_reply(reply),
                        "info": info_to_json(self.pool.describe()), "keeper": self.facts()})
        finally:
            self.busy -= 1
            self.last = time.monotonic()

    async def until_idle(self, stop: asyncio.Event) -> None:
        """Return ``idle_s`` after the last run left (nothing running), or when ``stop`` is set."""
        while not stop.is_set():
            if self.runs == 0 and self.busy == 0 and time.monotonic() - self.last >= self.idle_s:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), min(1.0, max(0.05, self.idle_s / 4)))


def _same_user(writer: asyncio.StreamWriter) -> bool:
    sock = writer.get_extra_info("socket")
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return False
    _, uid, _ = struct.unpack("3i", creds)
    return uid == os.getuid()


async def serve(listener: socket.socket, path: str, keeper: Keeper) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_unix_server(keeper.serve_run, sock=listener, limit=256 * 2**20)
    warming = asyncio.create_task(keeper.warm(keeper.checks))
    try:
        await keeper.until_idle(stop)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a new run starts a new keeper from here on
        server.close()
        warming.cancel()
        await keeper.pool.close()


def daemonize(path: str) -> socket.socket:
    """Bind and listen on ``path`` in a child of a new session; the first process exits once it listens
    (0) or could not (1), so whoever started it may connect when it returns."""
    ready_r, ready_w = os.pipe()
    if os.fork():
        os.close(ready_w)
        said = os.read(ready_r, 1)
        os._exit(0 if said == b"1" else 1)
    os.close(ready_r)
    os.setsid()
    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(16)
    except OSError as exc:
        print(f"pallasite keeper: cannot listen at {path}: {exc}", file=sys.stderr, flush=True)
        os.write(ready_w, b"0")
        os._exit(1)
    os.write(ready_w, b"1")
    os.close(ready_w)
    return listener


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pallasite keeper", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--checks", type=int, default=1)
    parser.add_argument("--idle", type=float, required=True)
    parser.add_argument("--config", required=True, help="the workers' WorkerConfig, as JSON")
    args = parser.parse_args(argv)
    config = config_from_json(args.config)
    listener = daemonize(args.socket)
    pool = local_backend(config, checks=max(1, args.checks), jobs=1)
    asyncio.run(serve(listener, args.socket, Keeper(pool, max(1, args.checks), args.idle)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
