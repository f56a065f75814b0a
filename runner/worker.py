"""`pallasite worker`: the process where kernel code runs, speaking JSON lines (see protocol.py).

Start-up, in this order: filter the environment (env.py allowlist), move the protocol to private
copies of fds 0 and 1, point fd 1 at stderr (libtpu and user ``print`` calls write to fd 1 and must
not corrupt the protocol) and fd 0 at /dev/null (``input()`` must not eat requests), import jax + Pallas once (the warm worker's whole point), send the
handshake. Then one request at a time on the main thread; a reader thread takes ``cancel`` and
``shutdown`` while a request runs. Cancel (and a request's ``deadline_s``) interrupt the running
op at its next Python bytecode; an op stuck in C code is the client's to kill.

Every request is isolated from the ones before: jax.config values, os.environ, sys.path, the
working folder and sys.argv are snapshotted before and restored after, and user files load under
fresh module names (loader.py). Worker side: imports only the stdlib, jax, and our runner modules.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import json
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..wire import env as env_module
from ..wire import messages, protocol
from ..wire.messages import Progress, Stage

_START = time.monotonic()
# What a worker cleans up when it leaves after a shutdown without Python's finalization
# (``_exit_at_once``): e.g. a remote worker's scratch folder.
_AT_SHUTDOWN: list[Callable[[], Any]] = []


class RequestInterrupted(BaseException):
    """Raised inside a running op by a cancel or its deadline (BaseException: user code's
    ``except Exception`` does not swallow it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Context:
    """What an op gets besides its params: progress reporting and its deadline."""

    def __init__(self, request_id: str, send: Callable[[dict[str, Any]], None], deadline: float | None) -> None:
        self.request_id = request_id
        self._send = send
        self.deadline = deadline  # time.monotonic() value, or None

    def progress(self, message: str = "", *, stage: Stage = Stage.STARTING, tier: int | None = None,
                 entry: str | None = None, line: int | None = None, fraction: float | None = None,
                 vmem: Any = None) -> None:
        self._send(protocol.progress(self.request_id, Progress(stage=Stage(stage), message=str(message), tier=tier,
                                                               entry=entry, line=line, fraction=fraction, vmem=vmem)))

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


# --------------------------------------------------------------------------- ops


def op_ping(params: messages.PingParams, ctx: Context) -> messages.PingResult:
    return messages.PingResult(pong=True, pid=os.getpid())


def op_versions(params: messages.VersionsParams, ctx: Context) -> messages.Versions:
    return _describe_runtime()


def op_chips(params: messages.ChipsParams, ctx: Context) -> messages.ChipsResult:
    """The chip table measured here (the client caches it under the versions reported with it)."""
    from ..analysis.types import installed_versions
    from . import chip_probe

    ctx.progress("reading the chip table" + (" and probing libtpu" if params.probe else ""), stage=Stage.PROBE)
    return messages.ChipsResult(chips=tuple(chip_probe.measure(probe=params.probe)), versions=installed_versions())


def op_import(params: messages.ImportParams, ctx: Context) -> messages.ImportResult:
    """Import the user's file; report its public functions and JSON-plain module constants."""
    import inspect

    from .loader import sent_modules, user_module

    source = params.source
    ctx.progress(f"importing {os.path.basename(source.path)}", stage=Stage.IMPORT)
    with user_module(source.path, source.text, sent_modules(source), source.package) as module:
        functions, constants = [], {}
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            if inspect.isfunction(value) and value.__module__ == module.__name__:
                functions.append(messages.FunctionInfo(name=name, line=value.__code__.co_firstlineno - 1))
            elif _is_plain(value):
                constants[name] = value
        return messages.ImportResult(module=module.__name__, path=module.__file__, functions=tuple(functions),
                                     constants=constants)


def _is_plain(value: Any, depth: int = 0) -> bool:
    """JSON-plain and small: what a module constant like TOLERANCE or TUNABLES is made of."""
    if depth > 4:
        return False
    if value is None or isinstance(value, (bool, int, str)):
        return not isinstance(value, str) or len(value) <= 100_000
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, (list, tuple)):
        return len(value) <= 1000 and all(_is_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return len(value) <= 1000 and all(isinstance(k, str) and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def op_check(params: messages.CheckParams, ctx: Context) -> messages.CheckResult:
    from . import judging
    from .checks import handle_check  # jax-heavy: imported on first use
    from .judging import compile_check

    run = compile_check.judged_check if judging.ACTIVE else handle_check  # model-written code: tier 2 outside its process
    return run(params, ctx.progress)


def op_time(params: messages.TimeParams, ctx: Context) -> messages.TimeResult:
    from .judging import judge  # jax-heavy: imported on first use
    from .measure.timing import plain_params

    # one path for model-written code and the user's own file: the judge runs the exported program
    return messages.time_result_from_plain(judge.judged_time(plain_params(params), _measure(ctx),
                                                             judging=_judging(ctx)))


def op_profile(params: messages.ProfileParams, ctx: Context) -> messages.TimeResult:
    from . import judging
    from .judging import exported_run
    from .measure.timing import plain_params
    from .judging.timing_profile import handle_profile

    if judging.ACTIVE and exported_run.on_accelerator():  # model-written code never runs where the chip is held
        return messages.time_result_from_plain(exported_run.refused_profile(plain_params(params)))
    return messages.time_result_from_plain(handle_profile(plain_params(params), _measure(ctx)))


def _measure(ctx: Context) -> Callable[[str], None]:
    return lambda message: ctx.progress(message, stage=Stage.MEASURE)


def _judging(ctx: Context) -> Callable[[str], None]:
    """Said once the candidate's process is gone and the judge runs the program of the file ``name``: a crash
    from then on is that program's (the client says so: engine/workers/client.py)."""
    return lambda name: ctx.progress(f"the candidate's process is gone; the judge runs {name}'s exported program",
                                     stage=Stage.JUDGE, entry=name)
def op_estimate(params: messages.EstimateParams, ctx: Context) -> messages.EstimateResult:
    from . import judging

    if params.judged or judging.ACTIVE:  # each configuration's exported program, priced by the judge
        from .judging.configs import judged_configs

        return judged_configs(params, ctx.progress)
    from .tune_ops import handle_estimate  # the cost model (issue 17): traces the user's own file, no device

    return handle_estimate(params, ctx.progress)


def op_locate(params: messages.LocateParams, ctx: Context) -> messages.LocateResult:
    from .tier3.locate_step import handle_locate  # after a tier-3 failure: the statement that makes it

    return handle_locate(params, ctx.progress)


OPS: dict[str, Callable[[Any, Context], Any]] = {
    "ping": op_ping,
    "versions": op_versions,
    "chips": op_chips,
    "import": op_import,
    "check": op_check,
    "time": op_time,
    "profile": op_profile,
    "estimate": op_estimate,
    "locate": op_locate,
}


# --------------------------------------------------------------------------- isolation


class Snapshot:
    """Process state a request may change, restored after it: jax.config, env, sys.path, cwd,
    argv, sys.stdout/stderr, and the SIGINT handler and signal mask cancel relies on."""

    def __init__(self) -> None:
        self.environ = dict(os.environ)
        self.path = list(sys.path)
        self.argv = list(sys.argv)
        self.cwd = os.getcwd()
        self.streams = (sys.stdout, sys.stderr)
        self.sigint = signal.getsignal(signal.SIGINT)
        self.sigmask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        jax = sys.modules.get("jax")
        self.jax_config = dict(jax.config.values) if jax is not None else None

    def restore(self) -> list[str]:
        """Put everything back; returns the names of jax config values that were restored."""
        signal.pthread_sigmask(signal.SIG_SETMASK, self.sigmask)
        if signal.getsignal(signal.SIGINT) is not self.sigint:
            signal.signal(signal.SIGINT, self.sigint)
        sys.stdout, sys.stderr = self.streams
        if os.environ != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        sys.path[:] = self.path
        sys.argv[:] = self.argv
        with contextlib.suppress(OSError):
            if os.getcwd() != self.cwd:
                os.chdir(self.cwd)
        restored = []
        jax = sys.modules.get("jax")
        if jax is not None:
            now = jax.config.values
            for name, old in (self.jax_config or {}).items():
                if now.get(name) != old:
                    try:
                        jax.config.update(name, old)
                        restored.append(name)
                    except Exception as exc:  # report, keep serving
                        print(f"pallasite worker: could not restore jax config {name}: {exc}", file=sys.stderr)
        return restored


# --------------------------------------------------------------------------- the loop


class Worker:
    def __init__(self, out_fd: int, ops: dict[str, Callable[[Any, Context], Any]] | None = None,
                 scratch: Any = None, sandboxes: Any = None) -> None:
        self.out_fd = out_fd
        self.ops = dict(OPS if ops is None else ops)
        self.scratch = scratch  # confine.Scratch: a confined worker (model-written code), else None
        self.sandboxes = sandboxes  # sandbox.Sandboxes: each request in a fresh sandboxed child (runner/isolation/sandbox.py)
        self.child: Any = None  # the running request's child (sandbox.Child)
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.send_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.current: str | None = None  # id of the running request
        self.interruptible = False
        self.interrupt_reason: str | None = None
        self.cancelled: set[str] = set()  # ids cancelled before they started

    # ---- output
    def send(self, msg: dict[str, Any]) -> None:
        try:
            data = protocol.encode(msg)
        except (TypeError, ValueError) as exc:
            data = protocol.encode(protocol.result_error(msg.get("id"), protocol.ErrorInfo(
                "BadResult", f"the op's result is not JSON ({exc}); ops must return plain values")))
            print(f"pallasite worker: a message could not be encoded: {exc}", file=sys.stderr)
        with self.send_lock:
            view = memoryview(data)
            while view:
                n = os.write(self.out_fd, view)
                view = view[n:]

    # ---- interruption (cancel, deadline)
    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.interruptible:
            self.interruptible = False
            raise RequestInterrupted(self.interrupt_reason or "cancelled")

    def interrupt(self, request_id: str, reason: str) -> None:
        """Interrupt the running op: a real SIGINT to the main thread, so a blocking system call
        (sleep, read) returns too; the handler raises only while an op is interruptible."""
        with self.state_lock:
            if self.current == request_id and self.child is not None:
                self.child.kill(reason)  # a sandboxed request: its process ends, nothing to unwind
                return
            if self.current == request_id and self.interruptible and self.interrupt_reason is None:
                self.interrupt_reason = reason
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    # ---- input
    def read_loop(self, stream: Any) -> None:
        for line in stream:
            if not line.strip():
                continue
            try:
                msg = protocol.decode(line)
            except protocol.ProtocolError as exc:
                self.send(protocol.result_error(None, protocol.ErrorInfo(protocol.ERROR_BAD_REQUEST, str(exc))))
                continue
            kind = msg["kind"]
            if kind == protocol.REQUEST:
                self.inbox.put(msg)
            elif kind == protocol.CANCEL:
                with self.state_lock:
                    if msg["id"] != self.current:
                        self.cancelled.add(msg["id"])
                self.interrupt(msg["id"], "cancelled")
            elif kind == protocol.SHUTDOWN:
                break
            else:
                self.send(protocol.result_error(msg.get("id"), protocol.ErrorInfo(
                    protocol.ERROR_BAD_REQUEST, f"a client may not send {kind!r} messages")))
        else:
            self.client_gone()
        self.inbox.put(None)

    def client_gone(self, grace_s: float = 3.0) -> None:
        """stdin ended without a shutdown: the client (or its ssh connection) is gone and nobody
        will read a result. Interrupt the running op, and exit if it does not stop within the
        grace, so a remote worker never keeps running (and holding the chips) after a dropped
        connection."""
        with self.state_lock:
            running = self.current
        if running is None:
            return
        self.interrupt(running, "cancelled")

        def exit_later() -> None:
            time.sleep(grace_s)
            if self.current is not None:
                with contextlib.suppress(OSError):  # stderr may be the dropped connection too
                    os.write(2, b"pallasite worker: the client is gone and the running op did not stop; exiting\n")
                os._exit(1)

        threading.Thread(target=exit_later, daemon=True, name="client-gone").start()

    def serve_forever(self) -> None:
        signal.signal(signal.SIGINT, self._on_sigint)
        while True:
            try:
                msg = self.inbox.get()
                if msg is None:
                    return
                self.handle(msg)
            except RequestInterrupted:
                continue  # arrived after its op had finished: nothing to interrupt

    def handle(self, msg: dict[str, Any]) -> None:
        request_id, op = msg["id"], msg["op"]
        handler = self.ops.get(op)
        if handler is None:
            self.send(protocol.result_error(request_id, protocol.ErrorInfo(
                protocol.ERROR_UNKNOWN_OP, f"unknown op {op!r}; this worker serves: {', '.join(sorted(self.ops))}")))
            return
        try:
            params = protocol.read_params(op, msg["params"])
        except protocol.ProtocolError as exc:
            self.send(protocol.result_error(request_id, protocol.ErrorInfo(protocol.ERROR_BAD_REQUEST, str(exc))))
            return
        deadline_s = msg.get("deadline_s")
        deadline = time.monotonic() + deadline_s if deadline_s is not None else None
        timer = None
        if deadline_s is not None:
            timer = threading.Timer(max(0.0, deadline_s), self.interrupt, (request_id, "deadline"))
            timer.daemon = True
        paths: list[Any] = []  # a confined request's map from scratch paths back to the user's

        def send(message: dict[str, Any]) -> None:
            self.send(paths[0].back(message) if paths else message)

        ctx = Context(request_id, send, deadline)
        snapshot = Snapshot()
        reply: dict[str, Any]
        with self.state_lock:  # checked and claimed together: a cancel is either seen here or interrupts
            cancelled_early = request_id in self.cancelled
            self.cancelled.discard(request_id)
            if not cancelled_early:
                self.current, self.interrupt_reason, self.interruptible = request_id, None, True
        if cancelled_early:
            self.send(protocol.result_error(request_id, protocol.ErrorInfo(
                protocol.ERROR_CANCELLED, "cancelled before it started")))
            return
        if self.sandboxes is not None:
            try:
                self._run_sandboxed(request_id, handler, params, deadline, deadline_s, op=op, raw=msg["params"])
            finally:
                with self.state_lock:
                    self.current, self.child = None, None
                    self.cancelled.discard(request_id)
            return
        try:
            if timer is not None:
                timer.start()
            result = self._run(handler, params, ctx, paths)
            self.interruptible = False
            reply = protocol.result_ok(request_id, result)
        except RequestInterrupted as exc:
            reply = _interrupted_reply(request_id, exc.reason, deadline_s)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            self.interruptible = False
            reply = protocol.result_error(request_id, protocol.error_info(exc))
        finally:
            self.interruptible = False
            if timer is not None:
                timer.cancel()
            with self.state_lock:
                self.current = None
                self.cancelled.discard(request_id)
            try:
                snapshot.restore()
            except Exception:  # keep serving; the traceback goes to the client's stderr tail
                print("pallasite worker: restoring state after a request failed:", file=sys.stderr)
                traceback.print_exc()
        send(reply)

    def _run_sandboxed(self, request_id: str, handler: Callable[[Any, Context], Any], params: Any,
                       deadline: float | None, deadline_s: float | None, op: str = "", raw: Any = None) -> None:
        """Model-written code: the op runs in a fresh sandboxed child (runner/isolation/sandbox.py) that this worker's
        fork server forks (runner/isolation/sandbox_server.py: a process with one thread); it never runs here. Each
        line the child sends is checked (a progress or the result of this request) and encoded again before
        it reaches the client; a child that ends without a result ends this worker the same way (a crash or
        the memory limit stays what it was for the client)."""
        body = functools.partial(sandboxed_op, request_id=request_id, op=op, params=raw, deadline=deadline,
                                 confined=bool(getattr(self.sandboxes, "confined", True)),
                                 scratch=self.scratch.root if self.scratch is not None else None)
        try:
            child = self.sandboxes.start(body)
        except OSError as exc:  # the fork server is gone: this worker cannot serve; the client restarts it
            os.write(2, f"pallasite worker: {exc}\n".encode())
            os._exit(1)
        with self.state_lock:
            self.child = child
            early = self.interrupt_reason
        if early:
            child.kill(early)
        reply, answers = None, 0
        for message in child.messages(deadline):
            if not isinstance(message, dict) or message.get("id") != request_id:
                continue  # not a message of this request: dropped
            if message.get("kind") == protocol.PROGRESS and reply is None:
                self.send(_checked(message))
            elif message.get("kind") == protocol.RESULT:
                answers += 1
                reply = _checked(message) if reply is None else reply
        try:
            outcome = child.outcome()
        except OSError as exc:  # the fork server is gone: nobody can say how the child ended
            os.write(2, f"pallasite worker: {exc}\n".encode())
            os._exit(1)
        if answers > 1:  # only one process may answer; a second answer means something forged one: refuse both
            reply = protocol.result_error(request_id, protocol.ErrorInfo(
                "SandboxError", f"the request was answered {answers} times: refused (something in the sandboxed "
                                "process wrote a result of its own)"))
        if outcome.killed_for in ("deadline", "cancelled"):
            self.send(_interrupted_reply(request_id, outcome.killed_for, deadline_s))
        elif outcome.setup_error:
            self.send(protocol.result_error(request_id, protocol.ErrorInfo("SandboxError", outcome.setup_error)))
        elif outcome.memory_exceeded:
            os.write(2, f"pallasite worker: the sandboxed request went over the memory limit of "
                        f"{self.sandboxes.limits.memory_mb} MiB\n".encode())
            os._exit(protocol.EXIT_MEMORY_LIMIT)
        elif reply is not None and outcome.code == 0:
            self.send(reply)
        elif outcome.killed_for:
            self.send(protocol.result_error(request_id, protocol.ErrorInfo(
                "SandboxError", f"the sandboxed request was stopped: {outcome.killed_for}")))
        else:  # the child died: this worker ends the same way, so the client reports the crash as before
            os.write(2, b"pallasite worker: the sandboxed request ended without a reply\n")
            if outcome.code is not None and outcome.code < 0:
                signal.signal(-outcome.code, signal.SIG_DFL)
                os.kill(os.getpid(), -outcome.code)
            os._exit(outcome.code or 1)

    def _child_op(self, request_id: str, handler: Callable[[Any, Context], Any], params: Any,
                  deadline: float | None, send: Callable[[dict[str, Any]], None], confined: bool) -> None:
        """In the sandboxed child: the op in a fresh folder of its scratch; every message to ``send``."""
        from .isolation import confine, sandbox
        from . import judging

        judging.ACTIVE = True
        judging.CONFINED = confined
        if confined:
            self.scratch = confine.Scratch(sandbox.SCRATCH)
        paths: list[Any] = []

        def out(message: dict[str, Any]) -> None:
            message = paths[0].back(message) if paths else message
            try:
                protocol.encode(message)
            except (TypeError, ValueError) as exc:
                message = protocol.result_error(message.get("id"), protocol.ErrorInfo(
                    "BadResult", f"the op's result is not JSON ({exc}); ops must return plain values"))
            send(json.loads(protocol.encode(message)))

        ctx = Context(request_id, out, deadline)
        try:
            result = self._run(handler, params, ctx, paths)
            reply = protocol.result_ok(request_id, result)
        except (Exception, SystemExit, KeyboardInterrupt, RequestInterrupted) as exc:
            reply = protocol.result_error(request_id, protocol.error_info(exc))
        out(reply)

    def _run(self, handler: Callable[[Any, Context], Any], params: Any, ctx: Context, paths: list[Any]) -> Any:
        """The op; in a confined worker, in a fresh scratch folder under scratch paths, with every
        interpret-mode pallas_call refused (runner/isolation/confine.py, runner/tier3/interpret_guard.py)."""
        if self.scratch is None:
            return handler(params, ctx)
        from .tier3 import interpret_guard

        with self.scratch.request(params) as (moved, path_map):
            paths.append(path_map)
            if getattr(moved, "script", False):  # script mode compiles its calls without interpret anyway
                return handler(moved, ctx)
            with interpret_guard.watching(interpret_guard.user_files(moved)) as seen:
                result = handler(moved, ctx)
            return interpret_guard.judge(result, seen)


def sandboxed_op(send: Callable[[dict[str, Any]], None], *, request_id: str, op: str, params: Any,
                 deadline: float | None, confined: bool, scratch: str | None = None) -> None:
    """In a sandboxed child the fork server forked (runner/isolation/sandbox_server.py): the request's op, every message
    to ``send`` (the worker checked the op and its params before). ``scratch``: the worker's scratch root (a
    child without the sandbox works in a fresh folder under it; a sandboxed one, under its own /scratch)."""
    from .isolation import confine

    worker = Worker(-1, scratch=confine.Scratch(scratch) if scratch else None)
    worker._child_op(request_id, worker.ops[op], protocol.read_params(op, params), deadline, send, confined)


def describe_runtime() -> dict[str, Any]:
    """The runtime as a process of this environment sees it once its backend starts (the fork server's
    plain child answers it for a confined worker, which starts no backend)."""
    import dataclasses

    info = dataclasses.asdict(_describe_runtime())
    info["devices"] = list(info.get("devices") or ())
    return info


def _checked(message: dict[str, Any]) -> dict[str, Any]:
    """A sandboxed child's message as the client may see it: decoded and encoded again (the child
    chooses none of the bytes the client reads)."""
    return protocol.decode(protocol.encode(message))


def _interrupted_reply(request_id: str, reason: str, deadline_s: float | None) -> dict[str, Any]:
    if reason == "deadline":
        error = protocol.ErrorInfo(protocol.ERROR_DEADLINE, f"stopped at its deadline of {deadline_s or 0:g} s")
    else:
        error = protocol.ErrorInfo(protocol.ERROR_CANCELLED, "cancelled while running")
    return protocol.result_error(request_id, error)


# --------------------------------------------------------------------------- start-up


def _runtime_versions() -> dict[str, Any]:
    import platform as platform_module

    from ..analysis.types import installed_versions

    return {"python": platform_module.python_version(), **installed_versions()}


def _describe_runtime() -> messages.Versions:
    info = _runtime_versions()
    jax = sys.modules.get("jax")
    if jax is not None:
        info["platform"] = jax.default_backend()
        info["devices"] = tuple(d.device_kind for d in jax.local_devices())
    return messages.Versions(**info)


def _described_by(server: Any) -> messages.Versions:
    """The runtime as a plain child of the fork server sees it once its backend starts (neither the server
    nor this process starts one)."""
    try:
        fields = server.call(describe_runtime)
        fields["devices"] = tuple(fields.get("devices") or ())
        return messages.Versions(**fields)
    except (OSError, RuntimeError, ValueError, TypeError):
        return messages.Versions(**_runtime_versions())


WARM = ("jax", "jax.numpy", "jax.experimental.pallas", "jax.experimental.pallas.tpu")  # what every request imports


def _warm_up(backend: bool = True) -> str | None:
    """Import jax and Pallas and start the backend (a confined worker's fork server imports ``WARM`` and
    starts none: its children fork from it); returns an error text instead of raising."""
    try:
        import jax
        import jax.numpy  # noqa: F401
        from jax.experimental import pallas  # noqa: F401
        from jax.experimental.pallas import tpu  # noqa: F401

        if backend:
            jax.local_devices()
    except Exception as exc:
        return f"jax is not usable in this environment ({type(exc).__name__}: {exc}); only ping/versions work"
    return None


def _memory_watchdog(limit_mb: int, interval_s: float = 0.1) -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    while True:
        try:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            return  # not Linux: the client's own watch still applies
        if rss > limit_mb * 2**20:
            os.write(2, f"pallasite worker: resident memory {rss / 2**20:.0f} MiB is above the limit of "
                        f"{limit_mb} MiB; exiting (code {protocol.EXIT_MEMORY_LIMIT})\n".encode())
            os._exit(protocol.EXIT_MEMORY_LIMIT)
        time.sleep(interval_s)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--platforms", default=None,
                        help="set JAX_PLATFORMS (check workers use 'cpu' so they never hold TPU chips)")
    parser.add_argument("--memory-mb", type=int, default=0,
                        help="exit with code 86 when the worker's resident memory exceeds this (0: off)")
    parser.add_argument("--guard-memory-mb", type=int, default=0,
                        help="stop the user's import or script short of this resident memory, so the calls it made "
                             "are still checked (runner/memory_guard.py; --memory-mb implies it)")
    parser.add_argument("--keep-env", action="append", default=[], metavar="NAME",
                        help="also pass this variable through the environment allowlist (secrets never pass)")
    parser.add_argument("--scratch-mb", type=int, default=1024,
                        help="a confined worker's sandbox: the size of its scratch tmpfs (also /tmp and /dev/shm)")
    parser.add_argument("--allow-unconfined", action="store_true",
                        help="a confined worker where no sandbox can be made (the user opted in): each request runs "
                             "in a plain fresh process, still judged outside it, with the user's rights")
    parser.add_argument("--confine", metavar="SCRATCH", default=None,
                        help="run requests as model-written code: each in a fresh folder under SCRATCH ('auto': a "
                             "new temporary folder), under scratch paths, with HOME/TMPDIR inside it and "
                             "interpret mode refused (runner/isolation/confine.py)")


def run(args: argparse.Namespace) -> int:
    # 1. the environment: allowlist first, before anything of the user's can read it
    _clean_environment(args)
    if args.confine is None:  # tier 2's VMEM as libtpu allocates it; before anything loads libtpu
        _ask_for_vmem_report()
    root, scratch = _scratch(args.confine) if args.confine is not None else (None, None)
    _limit_memory(args)
    # a confined worker's fork server, forked now: this process has one thread and has not imported jax
    # (runner/isolation/sandbox_server.py); it imports jax once and forks each request's sandboxed child
    sandboxes = _fork_server(args, root) if scratch is not None else None
    # 2. the protocol gets private fds: fd 1 (print, libtpu) goes to stderr, fd 0 (input())
    #    reads /dev/null, so user code can neither corrupt nor steal protocol bytes
    out_fd, in_fd = _private_protocol_fds()
    _watch_memory(args)
    # 3. warm up (the fork server did, for a confined worker), then the handshake
    error = _warm_up() if sandboxes is None else sandboxes.error
    worker = Worker(out_fd, scratch=scratch, sandboxes=sandboxes)
    worker.send(_handshake(worker, error, sandboxes).to_message())
    protocol_in = os.fdopen(in_fd, "rb")
    reader = threading.Thread(target=worker.read_loop, args=(protocol_in,), daemon=True, name="protocol-reader")
    reader.start()
    try:
        worker.serve_forever()
    except Exception:
        traceback.print_exc()
        return 2
    _exit_at_once(0)
    return 0  # not reached


def _clean_environment(args: argparse.Namespace) -> None:
    """The environment allowlist (``--keep-env`` adds names; secrets never pass), libtpu kept quiet,
    ``--platforms`` as JAX_PLATFORMS."""
    keep = {name for name in args.keep_env if not env_module.is_denied(name)}
    for name in list(os.environ):
        if not env_module.is_allowed(name) and name not in keep:
            del os.environ[name]
    for name, value in env_module.QUIET_LIBTPU.items():
        os.environ.setdefault(name, value)
    if args.platforms:
        os.environ["JAX_PLATFORMS"] = args.platforms


def _scratch(root: str) -> tuple[str, Any]:
    """Model-written code: a private HOME/TMPDIR and working folder under ``root`` ("" or "auto": a new
    temporary folder, removed at exit); returns the root and its ``confine.Scratch``."""
    from .isolation import confine

    if root in ("", "auto"):  # a worker on another host: its own temporary folder, removed at exit
        root = tempfile.mkdtemp(prefix="pallasite-scratch-")
        atexit.register(shutil.rmtree, root, True)
        _AT_SHUTDOWN.append(lambda: shutil.rmtree(root, True))
    confine.private_environment(root)
    return root, confine.Scratch(root)


def _private_protocol_fds() -> tuple[int, int]:
    """The protocol's own (out, in) fds, not inherited; fd 1 then goes to stderr and fd 0 reads /dev/null."""
    sys.stdout.flush()
    out_fd, in_fd = os.dup(1), os.dup(0)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.set_inheritable(out_fd, False)
    os.set_inheritable(in_fd, False)
    return out_fd, in_fd


def _limit_memory(args: argparse.Namespace) -> None:
    """The memory guard's limit (for this worker and the processes it starts: a confined worker's fork server
    is forked after this)."""
    if args.memory_mb or args.guard_memory_mb:
        from . import memory_guard

        memory_guard.LIMIT_MB = args.memory_mb or args.guard_memory_mb  # the user's runs stop short of it
        # the processes this worker starts (the judge's candidate process) share its limit: their checks
        # size themselves by it too (runner/measure/timing_ladder.budget_bytes), not by a default
        os.environ[memory_guard.LIMIT_ENV] = str(memory_guard.LIMIT_MB)


def _watch_memory(args: argparse.Namespace) -> None:
    """The watchdog of this worker's own resident memory (a thread: after the fork server is forked)."""
    if args.memory_mb:
        threading.Thread(target=_memory_watchdog, args=(args.memory_mb,), daemon=True, name="memory-watchdog").start()


def _fork_server(args: argparse.Namespace, root: str) -> Any:
    """The fork server each request's sandboxed child comes from (runner/isolation/sandbox_server.py), forked from this
    process now; each child mounts its new root under ``root``."""
    import ctypes

    from .isolation import sandbox, sandbox_server

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: what the server leaves comes back here
    mountpoint = os.path.join(root, "root")  # where each child mounts its new root (removed with the scratch)
    os.makedirs(mountpoint, exist_ok=True)
    # the limit the client states is the one its sandbox enforces (files in /tmp and shared memory counted)
    limits = sandbox.Limits(memory_mb=args.memory_mb or args.guard_memory_mb or 8192, scratch_mb=max(16, args.scratch_mb))
    config = sandbox_server.ForkServer.config(limits, confined=not args.allow_unconfined, mountpoint=mountpoint,
                                              preload=WARM)
    return sandbox_server.ForkServer.forked(config)


def _handshake(worker: Worker, error: str | None, server: Any = None) -> protocol.Handshake:
    """The handshake: the runtime as this process sees it, or (a confined worker) as its fork server's child does."""
    info = _describe_runtime() if server is None else _described_by(server)
    return protocol.Handshake(
        protocol=protocol.PROTOCOL_VERSION,
        pid=os.getpid(),
        pallasite=info.pallasite,
        python=info.python,
        jax=info.jax,
        jaxlib=info.jaxlib,
        libtpu=info.libtpu,
        platform=info.platform,
        devices=info.devices,
        ops=tuple(sorted(worker.ops)),
        startup_s=round(time.monotonic() - _START, 3),
        error=error,
    )


def _ask_for_vmem_report() -> None:
    """libtpu's VMEM report for tier 2 (runner/vmem_report.py), its folder removed at shutdown."""
    from . import vmem_report

    reports = vmem_report.enable()
    if reports is not None:
        _AT_SHUTDOWN.append(lambda: shutil.rmtree(reports, True))


def _exit_at_once(code: int) -> None:
    """After a shutdown (or the client's end of stdin) with nothing left to say: clean up what this
    worker made (``_AT_SHUTDOWN``), flush, and leave without Python's finalization. With jax and
    libtpu loaded that finalization takes 0.5-0.75 s, which ``pallasite check`` waited for at
    every run's end; the operating system frees the memory and closes the files anyway."""
    for cleanup in reversed(_AT_SHUTDOWN):
        with contextlib.suppress(Exception):
            cleanup()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """``python -m pallasite.runner.worker`` (what WorkerClient starts locally)."""
    parser = argparse.ArgumentParser(prog="pallasite worker", description=__doc__.splitlines()[0])
    add_arguments(parser, "worker")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
