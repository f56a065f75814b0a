"""The client side of the worker protocol, for asyncio callers (the server) and the CLI.

``WorkerClient`` owns one ``pallasite worker`` process: it starts it (handshake), sends one request
at a time (concurrent callers queue on a lock: a worker runs one op at a time), enforces the time
limit (cancel, then kill after a grace period) and the memory limit (RSS of the worker and its
children polled with psutil — an RLIMIT_AS makes jax abort), drains the worker's stderr into a
bounded tail, and replaces a dead or hung worker on the next request. Worker death is data: every
``request`` returns a ``Reply`` whose status says what happened, never raises for it.

Requests and results are the typed messages of ``wire/messages.py``; ``Reply`` (engine/workers/backend.py)
says what became of each. ``engine/workers/pool.py`` pools several clients; ``run_requests_sync``
serves the CLI. The client never imports jax.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import re
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...wire import env as env_module

from .devices import DEFAULT_CPU_DEVICES, xla_flags
from ...wire import protocol
from ...wire.messages import Stage

from . import confinement, secrets, spawn
from .backend import ProgressCallback, Reply, StartProblem, call_progress

_STREAM_LIMIT = 256 * 2**20  # the longest protocol line accepted (results may carry compiler dumps)


@dataclass(frozen=True)
class WorkerConfig:
    """How to start a worker and what limits apply to it.

    ``command`` is a prefix that starts the worker elsewhere: with ``("ssh", "tpu-host")`` the
    client runs ``ssh tpu-host pallasite worker --platforms ... --memory-mb ...`` instead of the
    local interpreter (the remote worker then filters its own environment and enforces the memory
    limit itself, exiting with code 86).
    """

    python: str = sys.executable
    worker_args: tuple[str, ...] = ()
    cwd: str | None = None
    timeout_s: float = 60.0  # per request
    memory_mb: int = 4096  # resident memory of the worker and its children
    startup_timeout_s: float = 60.0
    cancel_grace_s: float = 1.0  # after a cancel, how long before the worker is killed
    platforms: str | None = "cpu"  # JAX_PLATFORMS; None leaves the user's (TPU hosts)
    env: Mapping[str, str] = field(default_factory=dict)  # extra variables (secrets never pass)
    command: tuple[str, ...] = ()  # e.g. ("ssh", "host"): run `pallasite worker` through it
    remote_worker: tuple[str, ...] = ("pallasite", "worker")  # the worker command a launcher runs
    stderr_lines: int = 200  # how much of the worker's stderr is kept
    poll_interval_s: float = 0.1  # memory polling period
    cpu_devices: int | None = DEFAULT_CPU_DEVICES  # virtual CPU devices (engine/workers/devices.py); None: leave XLA_FLAGS
    sandbox: str = "auto"  # local workers in a PID/mount namespace: "auto" (where it works), "on", "off"
    confine: bool = False  # a worker for model-written code (engine/workers/confinement.py)
    allow_unconfined: bool = False  # ... which may run without namespaces (the user opted in)

    def argv(self, scratch: str | None = None) -> list[str]:
        """The command line; ``scratch``: a confined worker's scratch folder (``auto`` remotely)."""
        flags = [*self.worker_args]
        if self.platforms:
            flags += ["--platforms", self.platforms]
        if self.confine:
            flags += ["--confine", scratch or "auto"]
        if self.command:
            if self.memory_mb:
                flags += ["--memory-mb", str(self.memory_mb)]
            from .launcher import launch_argv  # {worker} placeholder or appended (engine/workers/launcher.py)

            return launch_argv(self.command, [*self.remote_worker, *flags])
        if self.memory_mb:  # this client enforces the limit; the worker stops the user's runs short of it
            flags += ["--guard-memory-mb", str(self.memory_mb)]
        # -P: the working folder is not put on sys.path (a user's numpy.py must not shadow numpy);
        # the loader puts the kernel file's own folder there for each request instead.
        return [self.python, "-P", "-m", "pallasite.runner.worker", *flags]

    def environment(self) -> dict[str, str]:
        """The local process's environment. Locally that is the worker: the allowlist applies.
        With a ``command`` prefix the local process is the launcher (ssh needs SSH_AUTH_SOCK and
        its config), which keeps the caller's environment; the worker it starts filters its own
        environment at start-up. ``env`` extras do not reach a remote worker: set them there."""
        if self.command:
            return secrets.launcher_environment()
        env = env_module.worker_environment(os.environ, platforms=self.platforms, extra=self.env)
        if self.cpu_devices and self.platforms == "cpu":
            env["XLA_FLAGS"] = xla_flags(self.cpu_devices, env.get("XLA_FLAGS", ""))
        return env


REPLACE_SHARE = 0.5  # of its memory limit: a local worker holding more after a request is replaced
# tune's estimate requests of configurations (engine/tuning/tune_workers.py worker_estimator; those without the reference): the
# worker keeps what jax traced for every configuration, so one holding more than this many MiB after one is
# replaced, and tune's parallel estimating workers stay small together (issue 44: tune under 2 GiB). A worker that
# priced a reference (libtpu loaded: ~1 GiB) keeps serving the judge's estimates of candidates warm.
REPLACE_AFTER_MB = {"estimate": 640}


def _resident(pid: int) -> int | None:
    """Resident memory of a process and its descendants (None: it is gone). On Linux from /proc: the
    process's threads' ``children`` lists and each one's ``statm`` (psutil finds descendants by reading
    every process's status, about 2.5 ms a call on a desktop; this runs after every request and
    every ``poll_interval_s`` while one runs)."""
    if _children_lists():
        return _resident_from_proc(pid)
    import psutil

    try:
        root = psutil.Process(pid)
        rss = root.memory_info().rss
        for child in root.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                rss += child.memory_info().rss
    except psutil.Error:
        return None
    return rss


@functools.cache
def _children_lists() -> bool:
    """Whether this kernel has ``/proc/PID/task/TID/children`` (Linux 3.5+ with CONFIG_PROC_CHILDREN)."""
    return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")


def _resident_from_proc(pid: int) -> int | None:
    """``_resident`` from /proc (None: ``pid`` is gone); a descendant that ends meanwhile is not counted."""
    try:
        rss = _statm_rss(pid)
    except OSError:
        return None
    seen, todo = {pid}, [pid]
    while todo:
        for kid in _children(todo.pop()):
            if kid not in seen:
                seen.add(kid)
                todo.append(kid)
                with contextlib.suppress(OSError):
                    rss += _statm_rss(kid)
    return rss


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.extend(map(int, f.read().split()))
    return kids


def _statm_rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class WorkerStartError(RuntimeError):
    """The worker did not start or did not say hello in time (the message says why; ``problem`` which case)."""

    def __init__(self, message: str, problem: StartProblem, missing_module: str | None = None,
                 cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.problem = problem
        self.missing_module = missing_module
        self.cause = cause  # the OSError of a launcher or interpreter that cannot be run


_NO_MODULE = re.compile(r"No module named '?(?P<module>[\w.]+)'?")


def _missing_module(stderr_tail: str) -> str | None:
    """The module a worker's interpreter could not import, from the last lines of its stderr (the
    interpreter's own ``ModuleNotFoundError``, printed before any of our code ran)."""
    for line in reversed([ln for ln in stderr_tail.splitlines() if ln.strip()][-5:]):
        m = _NO_MODULE.search(line)
        if m:
            return m.group("module")
    return None


@dataclass
class _Exited:
    code: int | None


def describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker's output ended"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker was killed by {name} ({-code})"
    if code == protocol.EXIT_MEMORY_LIMIT:
        return f"the worker exited with code {code} (its own memory limit)"
    return f"the worker exited with code {code}"


def judge_crash(name: str, code: int) -> str:
    """A judging request whose judge died of signal ``-code`` after the candidate's process was gone: the
    candidate's program did it (the judge runs nothing else of the candidate's), and nothing is ranked."""
    try:
        signame = signal.Signals(-code).name
    except ValueError:
        signame = f"signal {-code}"
    return (f"the candidate's program crashed the judge ({signame}): the judge was running {name}'s exported "
            "program (and the reference beside it) after the candidate's process had ended; nothing is ranked "
            "(the worker will be restarted)")


class WorkerClient:
    """One worker process, restarted as needed. Use ``async with WorkerClient(cfg) as w``."""

    def __init__(self, config: WorkerConfig | None = None) -> None:
        self.config = config or WorkerConfig()
        self.handshake: protocol.Handshake | None = None
        self.restarts = 0  # how many times a worker was (re)started after the first
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._progress: dict[str, ProgressCallback] = {}
        self._judging: dict[str, str] = {}  # request id -> the candidate's file whose program the judge now runs
        self._hello: asyncio.Future[protocol.Handshake] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._stderr: collections.deque[str] = collections.deque(maxlen=self.config.stderr_lines)
        self._kill_reason: str | None = None  # why we killed the current process, if we did
        self._started = 0
        self._scratch: str | None = None  # a confined worker's scratch folder (removed with the process)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> "WorkerClient":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def stderr_tail(self, lines: int = 40) -> str:  # a crash dump of the stack the worker was on fits
        return "\n".join(list(self._stderr)[-lines:])

    async def start(self) -> protocol.Handshake:
        """Start the worker if it is not running; returns its handshake."""
        if self.alive and self.handshake is not None:
            return self.handshake
        await self._reap()
        self._stderr.clear()
        self._kill_reason = None
        loop = asyncio.get_running_loop()
        self._hello = loop.create_future()
        if self.config.confine:  # model-written code: a confined worker, or none (engine/workers/confinement.py)
            argv, refused = confinement.worker_argv(self.config, self._new_scratch())
            if refused:
                raise WorkerStartError(refused, "unconfined")
        else:
            argv = self.config.argv()
        if not self.config.command and not self.config.confine:  # a local worker: in the sandbox where it works
            argv, problem = spawn.sandboxed(argv, self.config.sandbox)
            if problem:
                raise WorkerStartError(f"the worker sandbox is required (sandbox = \"on\") but {problem}; "
                                       "set the sandbox setting to \"auto\" or \"off\" to run without it")
        try:  # its own session and process group, killed with it; ends when we die (spawn.py)
            cwd = self._scratch if self.config.confine and not self.config.command else self.config.cwd
            self._proc = await spawn.start(argv, env=self.config.environment(), cwd=cwd, limit=_STREAM_LIMIT)
        except OSError as exc:
            raise WorkerStartError(f"could not start the worker ({' '.join(argv)}): {exc}", "not_found",
                                   cause=exc) from None
        if self._started:
            self.restarts += 1
        self._started += 1
        proc = self._proc
        self._tasks = [
            asyncio.create_task(self._read_stdout(proc), name="worker-stdout"),
            asyncio.create_task(self._read_stderr(proc), name="worker-stderr"),
            asyncio.create_task(self._watch_memory(proc), name="worker-memory"),
            asyncio.create_task(self._watch_exit(proc), name="worker-exit"),
        ]
        try:
            hello = await asyncio.wait_for(asyncio.shield(self._hello), self.config.startup_timeout_s)
        except asyncio.TimeoutError:
            await self._kill("startup timeout")
            raise WorkerStartError(
                f"the worker did not send its handshake within {self.config.startup_timeout_s:g} s "
                f"({' '.join(argv)})", "no_handshake") from None
        if isinstance(hello, _Exited):
            await self._reap()
            missing = _missing_module(self.stderr_tail())
            why = ""
            if self.config.command:  # the launcher (ssh, gcloud) ended: its own words, and what to try
                from .launcher import launch_failure

                why = launch_failure(self.config.command, hello.code, self.stderr_tail())
            raise WorkerStartError(
                f"the worker stopped before its handshake: {describe_exit(hello.code)} ({' '.join(argv)})"
                + (f": {why}" if why else ""), "missing_module" if missing else "exited", missing)
        try:
            protocol.check_handshake(hello)
        except protocol.ProtocolError as exc:
            await self._kill("protocol mismatch")
            raise WorkerStartError(str(exc), "version_mismatch") from None
        self.handshake = hello
        return hello

    async def close(self) -> None:
        """Ask the worker to stop; kill it if it does not within 2 s."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(OSError, RuntimeError):
                proc.stdin.write(protocol.encode(protocol.shutdown()))
                await proc.stdin.drain()
                proc.stdin.close()
            try:
                await asyncio.wait_for(spawn.exited(proc), 2.0)
            except asyncio.TimeoutError:
                await self._kill("close")
        await self._reap()

    # ------------------------------------------------------------------ requests

    async def request(
        self,
        params: Any,
        *,
        purpose: str = "check",
        timeout_s: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Reply:
        """Run the op ``params`` names (a params type of wire/messages.py) in the worker. Never raises
        for the worker's sake: see ``Reply.status``; an ok reply's ``result`` is the op's typed result.

        Cancelling the calling task sends ``cancel``, kills the worker if it does not stop within
        the grace period, and re-raises CancelledError. ``purpose`` is accepted so one client can
        stand in for a ``Backend`` (engine/workers/backend.py): a single worker serves every purpose in turn.
        """
        async with self._lock:
            return await self._request(params, timeout_s or self.config.timeout_s, on_progress)

    async def _request(self, params: Any, timeout_s: float, on_progress: ProgressCallback | None) -> Reply:
        started = time.monotonic()
        op = type(params).OP
        try:
            await self.start()
        except WorkerStartError as exc:
            cause = protocol.ErrorInfo(type(exc.cause).__name__, exc.cause.strerror or str(exc.cause)) \
                if isinstance(exc.cause, OSError) else None
            return Reply("not_started", message=str(exc), error=cause, elapsed_s=time.monotonic() - started,
                         exit_code=self._proc.returncode if self._proc else None, stderr_tail=self.stderr_tail(),
                         start_problem=exc.problem, missing_module=exc.missing_module,
                         launcher=tuple(self.config.command))
        request_id = protocol.new_request_id()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        if on_progress is not None:
            self._progress[request_id] = on_progress
        try:
            await self._send(protocol.request(request_id, params, deadline_s=timeout_s))
            try:
                outcome = await asyncio.wait_for(asyncio.shield(future), timeout_s)
            except asyncio.TimeoutError:
                outcome = await self._stop(request_id, future, "timeout")
                return self._reply(op, outcome, started, timeout_s, timed_out=True)
            reply = self._reply(op, outcome, started, timeout_s, judging=self._judging.get(request_id))
            await self._replace_if_heavy(params)
            return reply
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(request_id, future, "cancelled"))
            raise
        finally:
            self._pending.pop(request_id, None)
            self._progress.pop(request_id, None)
            self._judging.pop(request_id, None)

    async def _stop(self, request_id: str, future: asyncio.Future[Any], why: str) -> Any:
        """Cancel a running request; kill the worker if it does not answer within the grace."""
        with contextlib.suppress(OSError, RuntimeError, ConnectionError):
            await self._send(protocol.cancel(request_id))
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.config.cancel_grace_s)
        except asyncio.TimeoutError:
            await self._kill(why)
            return await future  # the stdout reader resolves it with _Exited

    def _reply(self, op: str, outcome: Any, started: float, limit_s: float, timed_out: bool = False,
               judging: str | None = None) -> Reply:
        """What became of a request limited to ``limit_s`` (``timed_out``: the client's wait ran out;
        ``judging``: the candidate's file whose exported program the judge was running, once its process was gone)."""
        elapsed = time.monotonic() - started
        if isinstance(outcome, _Exited):
            tail = self.stderr_tail()
            how = describe_exit(outcome.code)
            reason = self._kill_reason
            if reason == "memory" or outcome.code == protocol.EXIT_MEMORY_LIMIT:
                return Reply("memory", message=f"the worker went over its memory limit of "
                             f"{self.config.memory_mb} MiB and was stopped ({how}); it will be restarted",
                             elapsed_s=elapsed, exit_code=outcome.code, stderr_tail=tail, memory_mb=self.config.memory_mb)
            if reason == "timeout" or timed_out:
                return Reply("timed_out", message=f"the request ran past its limit of {limit_s:g} s and "
                             f"did not stop when cancelled; the worker was killed and will be restarted",
                             elapsed_s=elapsed, exit_code=outcome.code, stderr_tail=tail, limit_s=limit_s)
            if reason == "close":
                return Reply("cancelled", message="the client was closed while the request ran",
                             elapsed_s=elapsed, exit_code=outcome.code, stderr_tail=tail)
            if reason == "cancelled":
                return Reply("cancelled", message="cancelled; the worker did not stop and was killed",
                             elapsed_s=elapsed, exit_code=outcome.code, stderr_tail=tail)
            if judging is not None and outcome.code is not None and outcome.code < 0:
                return Reply("crashed", message=judge_crash(judging, outcome.code), elapsed_s=elapsed,
                             exit_code=outcome.code, stderr_tail=tail)
            return Reply("crashed", message=f"{how} while running the request; it will be restarted",
                         elapsed_s=elapsed, exit_code=outcome.code, stderr_tail=tail)
        if outcome.get("ok"):
            try:
                result = protocol.read_result(op, outcome.get("result"))
            except protocol.ProtocolError as exc:
                error = protocol.ErrorInfo("ProtocolError", str(exc))
                return Reply("error", error=error, elapsed_s=elapsed,
                             message=f"the worker's reply does not follow protocol {protocol.PROTOCOL_VERSION}: {exc}")
            from ..device_floor import floored_reply  # a device timing below the physical floor is implausible

            return floored_reply(op, Reply("ok", result=result, elapsed_s=elapsed))
        try:
            error = protocol.read_error(outcome)
        except protocol.ProtocolError as exc:
            error = protocol.ErrorInfo("ProtocolError", str(exc))
        if error.type == protocol.ERROR_DEADLINE or (timed_out and error.type == protocol.ERROR_CANCELLED):
            return Reply("timed_out", error=error, elapsed_s=elapsed, limit_s=limit_s,
                         message=f"the request ran past its limit of {limit_s:g} s and was stopped (the worker keeps running)")
        if error.type == protocol.ERROR_CANCELLED:
            return Reply("cancelled", error=error, message=error.message, elapsed_s=elapsed)
        return Reply("error", error=error, message=f"{error.type}: {error.message}", elapsed_s=elapsed)

    # ------------------------------------------------------------------ process plumbing

    async def _send(self, msg: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ConnectionError("no worker")
        try:
            proc.stdin.write(protocol.encode(msg))
            await proc.stdin.drain()
        except (ConnectionError, OSError):
            pass  # the worker died: the stdout reader resolves the pending request

    async def _read_stdout(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            try:
                line = await proc.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError) as exc:
                self._stderr.append(f"[pallasite client] protocol line dropped: {exc}")
                continue
            if not line:
                break
            try:
                msg = protocol.decode(line)
            except protocol.ProtocolError as exc:
                self._stderr.append(f"[pallasite client] {exc}")
                continue
            kind = msg["kind"]
            if kind == protocol.HANDSHAKE and self._hello is not None and not self._hello.done():
                try:
                    self._hello.set_result(protocol.Handshake.from_message(msg))
                except protocol.ProtocolError as exc:
                    self._stderr.append(f"[pallasite client] {exc}")
            elif kind == protocol.PROGRESS:
                if msg.get("stage") == Stage.JUDGE.value and msg.get("id") in self._pending:
                    self._judging[msg["id"]] = str(msg.get("entry") or "the candidate")[:200]
                callback = self._progress.get(msg["id"])
                if callback is not None:
                    try:
                        report = protocol.read_progress(msg)
                    except protocol.ProtocolError as exc:
                        self._stderr.append(f"[pallasite client] {exc}")
                        continue
                    await call_progress(callback, report)
            elif kind == protocol.RESULT:
                future = self._pending.get(msg.get("id"))
                if future is not None and not future.done():
                    future.set_result(msg)
                elif msg.get("id") is None:
                    self._stderr.append(f"[pallasite client] worker: {msg.get('error', {}).get('message', msg)}")
        self._resolve_exit(await spawn.exited(proc))

    async def _watch_exit(self, proc: asyncio.subprocess.Process) -> None:
        """Notice the worker's exit from the process, not from its pipes (a child of the kernel
        may hold them open): answer what waits, end its leftovers, let go of the pipes."""
        code = await spawn.exited(proc)
        self._resolve_exit(code)
        spawn.kill(proc)  # its group, descendants and our adopted orphans
        await asyncio.sleep(0.2)  # let the readers take the output already written
        spawn.release(proc)

    def _resolve_exit(self, code: int | None) -> None:
        exited = _Exited(code)
        if self._hello is not None and not self._hello.done():
            self._hello.set_result(exited)  # type: ignore[arg-type]
        for future in self._pending.values():
            if not future.done():
                future.set_result(exited)

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while True:
            try:
                line = await proc.stderr.readline()
            except (ValueError, asyncio.LimitOverrunError):
                continue
            if not line:
                return
            self._stderr.append(line.decode("utf-8", "replace").rstrip("\n")[:2000])

    async def _replace_if_heavy(self, params: Any = None) -> None:
        """A local worker left holding more than ``REPLACE_SHARE`` of its memory limit after a request
        (a file's big arrays: freed memory stays with the process) is replaced before the next one, so
        that one does not start near the limit (runner/memory_guard.py stops user code short of it); after
        an op of ``REPLACE_AFTER_MB`` that priced no reference (tune's configurations), one holding more than
        that many MiB; after a check that carried the workspace's callers, always."""
        proc = self._proc
        if self.config.command or not self.config.memory_mb or proc is None or proc.returncode is not None:
            return
        rss = _resident(proc.pid)
        limit = REPLACE_SHARE * self.config.memory_mb * 2**20
        after_mb = REPLACE_AFTER_MB.get(getattr(type(params), "OP", ""))
        if after_mb is not None and not getattr(params, "reference", False):
            limit = min(limit, after_mb * 2**20)
        if (rss is not None and rss > limit) or getattr(params, "callers", ()):
            # a check that may have run the workspace's tests (runner/tasks/tasks_callers.py): they change the
            # process (registered PRNGs, config flags, imported modules), so the next file gets a fresh one
            await self._reap()

    async def _watch_memory(self, proc: asyncio.subprocess.Process) -> None:
        if self.config.command or not self.config.memory_mb:
            return  # a remote worker watches itself (--memory-mb)
        limit = self.config.memory_mb * 2**20
        while proc.returncode is None:
            rss = _resident(proc.pid)
            if rss is None:
                return
            if rss > limit:
                self._stderr.append(f"[pallasite client] worker RSS {rss / 2**20:.0f} MiB is above the "
                                    f"limit of {self.config.memory_mb} MiB: killing it")
                await self._kill("memory")
                return
            await asyncio.sleep(self.config.poll_interval_s)

    async def _kill(self, reason: str) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        self._kill_reason = reason
        spawn.kill(proc)  # the group, every descendant (also in other sessions), adopted orphans
        await spawn.exited(proc)

    def _new_scratch(self) -> str:
        self._drop_scratch()
        self._scratch = confinement.new_scratch()
        return self._scratch

    def _drop_scratch(self) -> None:
        if self._scratch is not None:
            confinement.remove_scratch(self._scratch)
            self._scratch = None

    async def _reap(self) -> None:
        """Forget a finished process: wait for its readers, drop its tasks (and a confined one's scratch)."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            await self._kill("replaced")
        for task in self._tasks:
            if task.get_name() in ("worker-memory", "worker-exit"):
                task.cancel()
        if proc is not None:
            spawn.release(proc)
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 2.0)
        self._tasks = []
        self.handshake = None
        self._drop_scratch()


# --------------------------------------------------------------------------- the CLI's helper


def run_requests_sync(config: WorkerConfig | None, requests: Iterable[Any],
                      on_progress: ProgressCallback | None = None) -> list[Reply]:
    """Start a worker, run the requests (params objects) in order, stop it; one Reply per request."""

    async def go() -> list[Reply]:
        client = WorkerClient(config)
        try:
            return [await client.request(params, on_progress=on_progress) for params in requests]
        finally:
            await client.close()

    return asyncio.run(go())
