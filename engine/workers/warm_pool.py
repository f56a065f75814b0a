"""Check workers kept warm between runs of `pallasite check --keep-warm SECONDS` (opt-in).

A `pallasite check` run pays, before its files divide among workers, each worker's start (jax,
Pallas and libtpu imports, about 1 s on this project's 2-core machine) and its first compile (about
0.5 s): paid once per run whatever ``--jobs`` is, that part kept ``--jobs 2`` at 1.2x ``--jobs 1``
on 24 small files (docs/editor-performance.md, "`pallasite check --jobs`"). With ``--keep-warm``, a
*keeper* process (``engine/workers/warm_keeper.py``) owns the run's check workers and keeps them for the
next run for ``SECONDS`` after its last client left; a run then connects to it and sends its
requests there. Everything a request meets in the keeper is the local pool's (``engine/workers/pool.py``,
``WorkerClient``: the time and memory limits, cancel, a crashed worker restarted), so a reply says
the same as without it; the keeper ends its workers when it leaves.

- One keeper per *key*: the worker's command line, environment (as the allowlist passes it),
  limits, working folder, interpreter, user and the pallasite sources it would run (their sizes and
  times): a run with other settings, in another folder, or after pallasite changed starts its own
  keeper, and the old one leaves when its time is up.
- Its socket is in a folder only this user can use (``$XDG_RUNTIME_DIR/pallasite-UID``, else the
  temporary folder's; made with mode 0700, refused when it is anyone else's or open to others),
  and the keeper answers only processes of its own user (``SO_PEERCRED``).
- ``WarmBackend`` is the client: a ``Backend`` (engine/workers/backend.py) whose requests go to the keeper
  over that socket, as JSON lines (``encode_reply``/``decode_reply`` carry a ``Reply``; params and
  results travel as the worker protocol writes them). Closing it leaves the workers warm.
- ``warm_factory(seconds)`` is the engine's backend factory for it; where no keeper can be used
  (no such folder can be made safely), it says why once on stderr and the run uses the local pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ...analysis.types import to_json
from ...wire import protocol
from ...wire.messages import ErrorInfo, decode_as
from .backend import BackendInfo, ProgressCallback, Purpose, Reply, call_progress
from .client import WorkerConfig

KEEPER_START_S = 30.0  # how long a run waits for a keeper it started to listen
KEY_CHARS = 24
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with its NUL
_SOURCES = ("engine", "runner", "wire", "analysis")  # what a keeper and its workers run


# ------------------------------------------------------------------------------ where and which


def runtime_folder() -> tuple[Path | None, str | None]:
    """This user's folder for keepers' sockets, made if missing; (None, why) when it is not safe."""
    uid = os.getuid()
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    folder = Path(base) / f"pallasite-{uid}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        return None, f"cannot make {folder} ({exc})"
    if not stat.S_ISDIR(info.st_mode):
        return None, f"{folder} is not a folder"
    if info.st_uid != uid:
        return None, f"{folder} belongs to user {info.st_uid}, not to you ({uid})"
    if info.st_mode & 0o077:
        return None, f"{folder} is open to other users (mode {stat.S_IMODE(info.st_mode):04o}); make it 0700"
    if len(str(folder / f"pool-{'0' * KEY_CHARS}.sock")) > MAX_SOCKET_PATH:
        return None, f"{folder} is too deep for a socket's path ({MAX_SOCKET_PATH} bytes at most); set XDG_RUNTIME_DIR"
    return folder, None


def pool_key(config: WorkerConfig, cwd: str | None = None) -> str:
    """What a keeper is kept under: every input of its workers' behaviour (see the module docstring)."""
    root = Path(__file__).resolve().parents[2]
    sources = []
    for folder in _SOURCES:
        for entry in sorted((root / folder).rglob("*.py")):
            with contextlib.suppress(OSError):
                info = entry.stat()
                sources.append((str(entry.relative_to(root)), info.st_size, info.st_mtime_ns))
    key = {"config": repr(config), "env": sorted(config.environment().items()),
           "cwd": config.cwd or cwd or os.getcwd(), "python": sys.executable, "uid": os.getuid(),
           "protocol": protocol.PROTOCOL_VERSION, "sources": sources}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:KEY_CHARS]


def config_to_json(config: WorkerConfig) -> str:
    return json.dumps(dataclasses.asdict(config), default=dict)


def config_from_json(text: str) -> WorkerConfig:
    fields = json.loads(text)
    for name in ("worker_args", "command", "remote_worker"):
        fields[name] = tuple(fields.get(name) or ())
    return WorkerConfig(**fields)


# ------------------------------------------------------------------------------ what travels


def encode_reply(reply: Reply) -> dict[str, Any]:
    out = {f.name: getattr(reply, f.name) for f in dataclasses.fields(Reply)}
    out["result"] = to_json(reply.result) if reply.result is not None else None
    out["error"] = to_json(reply.error) if reply.error is not None else None
    out["launcher"] = list(reply.launcher)
    return out


def decode_reply(op: str, data: dict[str, Any]) -> Reply:
    """A ``Reply`` as the keeper sent it; its result read as the worker protocol reads one."""
    fields = {f.name: data.get(f.name, f.default) for f in dataclasses.fields(Reply)}
    if data.get("result") is not None:
        fields["result"] = protocol.read_result(op, data["result"])
    if data.get("error") is not None:
        fields["error"] = decode_as(ErrorInfo, data["error"], "reply.error")
    fields["launcher"] = tuple(data.get("launcher") or ())
    return Reply(**fields)


def info_to_json(info: BackendInfo) -> dict[str, Any]:
    return {**dataclasses.asdict(info), "devices": list(info.devices), "versions": dict(info.versions)}


def info_from_json(data: dict[str, Any]) -> BackendInfo:
    fields = {f.name: data.get(f.name, f.default) for f in dataclasses.fields(BackendInfo)
              if f.name in data or f.default is not dataclasses.MISSING}
    fields["devices"] = tuple(data.get("devices") or ())
    return BackendInfo(**fields)


def line(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


# ------------------------------------------------------------------------------ the client


class KeeperError(Exception):
    """No keeper could be reached or started (the message says why)."""


async def connect(folder: Path, key: str, config: WorkerConfig, checks: int, idle_s: float):
    """A connection to the keeper of ``key``, started first (under a lock: one per key) when none listens."""
    path = folder / f"pool-{key}.sock"
    try:
        return await asyncio.open_unix_connection(str(path), limit=256 * 2**20)
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    await asyncio.to_thread(_start_keeper, folder, key, config, checks, idle_s)
    try:
        return await asyncio.open_unix_connection(str(path), limit=256 * 2**20)
    except OSError as exc:
        raise KeeperError(f"the keeper of warm workers does not answer at {path} ({exc}); its log: "
                          f"{folder / f'pool-{key}.log'}") from None


def _start_keeper(folder: Path, key: str, config: WorkerConfig, checks: int, idle_s: float) -> None:
    """Start the keeper of ``key`` unless one listens (checked again under the key's lock); returns when
    it listens (its first process exits once the socket is bound: warm_keeper.daemonize)."""
    path, log = folder / f"pool-{key}.sock", folder / f"pool-{key}.log"
    with open(folder / f"pool-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            return  # another run started it meanwhile
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a keeper that died without removing its socket
        finally:
            probe.close()
        argv = [sys.executable, "-m", "pallasite.engine.workers.warm_keeper", "--socket", str(path), "--checks", str(checks),
                "--idle", str(idle_s), "--config", config_to_json(config)]
        with open(log, "wb") as err:  # the log of the keeper last started for this key
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                  timeout=KEEPER_START_S, check=False)
        if done.returncode != 0:
            raise KeeperError(f"the keeper of warm workers did not start (exit {done.returncode}); its log: {log}")


class WarmBackend:
    """A ``Backend`` whose requests run on the workers of a keeper (see the module docstring)."""

    def __init__(self, config: WorkerConfig, checks: int, idle_s: float, folder: Path) -> None:
        self.config, self.checks, self.idle_s, self.folder = config, checks, idle_s, folder
        self.key = pool_key(config)
        self.keeper: dict[str, Any] = {}  # what the keeper said of itself last (pid, workers started)
        self._info: BackendInfo | None = None
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._opening: asyncio.Lock | None = None
        self._pending: dict[str, tuple[asyncio.Future[Reply], str, ProgressCallback | None]] = {}
        self._reading: asyncio.Task[None] | None = None
        # at most ``checks`` check requests (one of another purpose) at once, as this run's own pool would
        # run: the keeper may hold more workers (an earlier run's --jobs)
        self._slots: dict[str, asyncio.Semaphore] = {}

    async def _open(self) -> asyncio.StreamWriter:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            for attempt in (1, 2):  # a keeper that was dying as we connected: once more, which starts a new one
                if self._streams is not None:
                    break
                try:
                    await self._hello()
                except (ConnectionError, KeeperError):
                    if attempt == 2:
                        raise
                    await asyncio.sleep(0.2)
            return self._streams[1]

    async def _hello(self) -> None:
        reader, writer = await connect(self.folder, self.key, self.config, self.checks, self.idle_s)
        writer.write(line({"kind": "hello", "checks": self.checks}))
        await writer.drain()
        hello = json.loads(await reader.readline() or b"{}")
        if hello.get("kind") != "hello":
            writer.close()
            raise KeeperError(f"the keeper at {self.folder} answered {hello!r} to hello")
        self._note(hello)
        self._streams = reader, writer
        self._reading = asyncio.create_task(self._read(reader), name="warm-pool-reader")

    def _note(self, msg: dict[str, Any]) -> None:
        if msg.get("info"):
            self._info = info_from_json(msg["info"])
        if msg.get("keeper"):
            self.keeper = dict(msg["keeper"])

    async def start(self) -> BackendInfo:
        try:
            await self._open()
        except (OSError, KeeperError, subprocess.SubprocessError) as exc:
            return dataclasses.replace(self.describe(), problem=str(exc))
        return self.describe()

    async def request(self, params: Any, *, purpose: Purpose = "check", timeout_s: float | None = None,
                      on_progress: ProgressCallback | None = None) -> Reply:
        slots = self._slots.get(purpose)
        if slots is None:
            slots = self._slots[purpose] = asyncio.Semaphore(self.checks if purpose == "check" else 1)
        async with slots:
            return await self._request(params, purpose, timeout_s, on_progress)

    async def _request(self, params: Any, purpose: str, timeout_s: float | None,
                       on_progress: ProgressCallback | None) -> Reply:
        started = time.monotonic()
        try:
            writer = await self._open()
        except (OSError, KeeperError, subprocess.SubprocessError) as exc:
            return Reply("not_started", message=f"warm workers: {exc}", elapsed_s=time.monotonic() - started,
                         start_problem="not_found")
        op = type(params).OP
        request_id = protocol.new_request_id()
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (future, op, on_progress)
        # the keeper's worker answers within the request's limit, its start-up and the cancel's grace: a
        # keeper that says nothing well past that is not waited for
        bound = (timeout_s or self.config.timeout_s) + self.config.startup_timeout_s + self.config.cancel_grace_s + 30
        try:
            writer.write(line({"kind": "request", "id": request_id, "op": op, "params": to_json(params),
                               "purpose": purpose, "timeout_s": timeout_s}))
            await writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), bound)
        except asyncio.TimeoutError:
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(line({"kind": "cancel", "id": request_id}))
            return Reply("timed_out", message=f"the keeper of warm workers did not answer within {bound:g} s "
                         f"(its log: {self.folder / f'pool-{self.key}.log'})", elapsed_s=time.monotonic() - started,
                         limit_s=timeout_s or self.config.timeout_s)
        except asyncio.CancelledError:
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(line({"kind": "cancel", "id": request_id}))  # the keeper stops the worker's op
            raise
        finally:
            self._pending.pop(request_id, None)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            await self._read_lines(reader)
        except (ValueError, OSError, ConnectionError, KeyError, TypeError):
            pass  # a line that is not the keeper's: what waits is answered below, as if it had gone
        for future, _, _ in list(self._pending.values()):  # the keeper went away
            if not future.done():
                future.set_result(Reply("crashed", message="the keeper of warm workers went away while the "
                                        "request ran (its log: " + str(self.folder / f"pool-{self.key}.log") + ")"))
        self._streams = None

    async def _read_lines(self, reader: asyncio.StreamReader) -> None:
        while True:
            raw = await reader.readline()
            if not raw:
                return
            msg = json.loads(raw)
            future, op, on_progress = self._pending.get(msg.get("id"), (None, "", None))
            if msg.get("kind") == "progress" and on_progress is not None:
                await call_progress(on_progress, protocol.read_progress(msg["progress"]))
            elif msg.get("kind") == "reply" and future is not None and not future.done():
                self._note(msg)
                try:
                    future.set_result(decode_reply(op, msg["reply"]))
                except protocol.ProtocolError as exc:
                    future.set_result(Reply("error", error=ErrorInfo("ProtocolError", str(exc)),
                                            message=f"the keeper's reply does not follow the protocol: {exc}"))

    def describe(self) -> BackendInfo:
        return self._info or BackendInfo(kind="local", host=socket.gethostname(), workers=self.checks)

    async def close(self) -> None:
        """Leave the keeper (its workers stay warm for the next run)."""
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()
            with contextlib.suppress(OSError, ConnectionError):
                await streams[1].wait_closed()
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reading


def warm_factory(idle_s: float):
    """The engine's backend factory for ``--keep-warm``: a ``WarmBackend`` where a keeper can be used,
    else (saying why, once) the local pool."""
    from .pool import local_backend

    said: list[str] = []

    def make(config: WorkerConfig, checks: int):
        folder, problem = runtime_folder()
        if folder is None:
            if not said:
                said.append(problem or "")
                print(f"warning: --keep-warm: {problem}; this run starts its own workers", file=sys.stderr)
            return local_backend(config, checks=checks, jobs=1)
        return WarmBackend(config, checks, idle_s, folder)

    return make
