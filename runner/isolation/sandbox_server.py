"""The process the sandbox's children are forked from: one thread, jax imported but no backend started, nothing
else running, so no sandboxed child is a fork of a multithreaded process (issue 59 item 8).

Before, a confined worker forked each request's child from itself, while its protocol reader thread ran (and a
test process from itself, with jax's backends running: "os.fork() was called ... JAX is multithreaded, so this
will likely lead to a deadlock"); a lock another thread held at the fork stays held in the child.

- ``ForkServer.forked(config)``: a confined worker makes its server by forking itself at start-up, before it
  imports jax or starts a thread (a clean pre-fork point); ``ForkServer.spawned(config)``: any other process (a
  test) starts a fresh interpreter as its server (``python -m pallasite.runner.isolation.sandbox_server FD``). The server
  imports ``config["preload"]`` once (what every child needs warm) and becomes the child subreaper of what its
  children leave.
- ``start(body)``: ``body`` is a ``functools.partial`` of a module-level function with JSON-plain keywords; the
  server imports that function and forks a sandboxed child (runner/isolation/sandbox.py ``Sandboxes.start``) that runs
  ``function(send, **keywords)``. The child's message pipe comes back over the socket: ``RemoteChild`` reads it
  and kills by pid as ``Child`` does; the server, its parent, reaps it and says how it ended (``outcome``).
- ``call(function, **keywords)``: the function in a plain forked child of the server, its JSON answer back (a
  confined worker's runtime description: a backend is started in that child, never in the server).

Each fork reports how many threads the server had then (always 1; tests/test_sandbox.py holds it). Stdlib only
here; the server imports what its ``preload`` names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
from typing import Any

from . import process_tree
from .sandbox import Child, Limits, Outcome, Sandboxes

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
MAX_MESSAGE = 1 << 30


class ForkServerGone(OSError):
    """The fork server ended (the message says when)."""


# --------------------------------------------------------------------------- framing


def _send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    data = json.dumps(message, default=str).encode()
    sock.sendall(struct.pack(">Q", len(data)) + data)
    if fds:
        socket.send_fds(sock, [b"f"], list(fds))


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    """``n`` bytes from the socket, or None when it closes first (read in chunks of at most 1 MiB)."""
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> dict[str, Any] | None:
    head = recv_exactly(sock, 8)
    if head is None:
        return None
    (size,) = struct.unpack(">Q", head)
    data = recv_exactly(sock, size) if size <= MAX_MESSAGE else None
    return json.loads(data) if data is not None else None


def _recv_fd(sock: socket.socket) -> int:
    _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    if not fds:
        raise ForkServerGone("the fork server sent no descriptor")
    return fds[0]


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _function(name: str) -> Any:
    module, _, qualname = name.partition(":")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def _name(function: Any) -> str:
    return f"{function.__module__}:{function.__qualname__}"


# --------------------------------------------------------------------------- the server


def _preload(names: list[str]) -> str | None:
    """Import what every child needs warm (numpy's BLAS without its thread pool: this process forks); the
    error's text instead of raising."""
    ours = "OPENBLAS_NUM_THREADS" not in os.environ
    if ours:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        for name in names:
            importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - said in the hello
        return f"{type(exc).__name__}: {exc}"
    finally:
        if ours:  # what the children start gets the environment it had
            os.environ.pop("OPENBLAS_NUM_THREADS", None)
    return None


def serve(sock: socket.socket, config: dict[str, Any]) -> None:
    """The server's loop (never returns): its hello, then one request at a time."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # what a killed child leaves comes back here, to be reaped
    error = _preload(list(config.get("preload") or ()))
    sandboxes = Sandboxes(limits=Limits(**config.get("limits") or {}), confined=bool(config.get("confined", True)),
                          mountpoint=str(config.get("mountpoint") or ""), binds=config.get("binds"),
                          links=config.get("links"))
    children: dict[int, Child] = {}
    _send(sock, {"hello": True, "error": error, "threads": _threads(), "mountpoint": sandboxes.mountpoint})
    while True:
        try:
            message = _recv(sock)
        except OSError:
            message = None
        if message is None:  # the client is gone: so is everything forked for it
            for child in children.values():
                child.kill("the fork server's client is gone")
            os._exit(0)
        reply, fds = _answer(message, sandboxes, children)
        try:
            _send(sock, reply, fds)
        finally:
            for fd in fds:  # (the client has its own copy now)
                with contextlib.suppress(OSError):
                    os.close(fd)


def _answer(message: dict[str, Any], sandboxes: Sandboxes, children: dict[int, Child]) -> tuple[dict, tuple]:
    op = message.get("op")
    try:
        if op == "start":
            function, keywords = _function(message["function"]), dict(message.get("keywords") or {})
            threads = _threads()
            child = sandboxes.start(lambda send: function(send, **keywords))
            children[child.pid] = child
            fd = child.out_r
            child.out_r = -1
            return ({"pid": child.pid, "inner": child.inner, "setup_failed": child.setup_failed, "threads": threads},
                    (fd,))
        if op == "outcome":
            child = children.pop(int(message["pid"]))
            child.killed_for = message.get("killed_for")
            child.descendants = [int(p) for p in message.get("descendants") or ()]
            return dataclasses.asdict(child.outcome()), ()
        if op == "call":
            return {"result": _call(_function(message["function"]), dict(message.get("keywords") or {}))}, ()
    except Exception as exc:  # noqa: BLE001 - the client's request failed: said, the server goes on
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}, ()
    return {"error": f"unknown op {op!r}"}, ()


def _call(function: Any, keywords: dict[str, Any]) -> Any:
    """``function(**keywords)`` in a plain forked child (it may start what the server must not: a backend)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 0
        try:
            os.write(write, json.dumps(function(**keywords), default=str).encode())
        except BaseException:  # noqa: BLE001 - no answer: the caller is told
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        data = stream.read()
    os.waitpid(pid, 0)
    if not data:
        raise RuntimeError(f"{_name(function)} gave no answer")
    return json.loads(data)


# --------------------------------------------------------------------------- the client


class RemoteChild(Child):
    """A sandboxed child the server forked: its messages and kills as ``Child``'s; its end is the server's to reap."""

    def __init__(self, server: "ForkServer", pid: int, out_r: int, setup_failed: str | None, inner: int | None,
                 threads: int) -> None:
        super().__init__(pid, out_r, cgroup=None, setup_failed=setup_failed, inner=inner)
        self.server, self.threads = server, threads

    def outcome(self) -> Outcome:
        answer = self.server.ask({"op": "outcome", "pid": self.pid, "killed_for": self.killed_for,
                                  "descendants": self.descendants})
        return Outcome(**{f.name: answer.get(f.name) for f in dataclasses.fields(Outcome)})


class ForkServer:
    """A client's end of a fork server (see the module docstring): ``start`` as ``Sandboxes.start`` does."""

    def __init__(self, sock: socket.socket, pid: int, proc: Any = None) -> None:
        self.sock, self.pid, self.proc = sock, pid, proc
        try:
            hello = _recv(sock)
        except OSError:
            hello = None
        if not hello or not hello.get("hello"):
            raise ForkServerGone("the fork server ended before it was ready")
        self.error: str | None = hello.get("error")
        self.threads: int = int(hello.get("threads") or -1)
        self.mountpoint: str = str(hello.get("mountpoint") or "")
        self.confined: bool = True
        self.limits = Limits()

    @staticmethod
    def config(limits: Limits, confined: bool = True, mountpoint: str = "", preload: tuple[str, ...] = (),
               binds: list[str] | None = None, links: list[str] | None = None) -> dict[str, Any]:
        return {"limits": dataclasses.asdict(limits), "confined": confined, "mountpoint": mountpoint,
                "preload": list(preload), "binds": binds, "links": links}

    @classmethod
    def forked(cls, config: dict[str, Any]) -> "ForkServer":
        """Fork this process into the server now: call it where this process has one thread and no backend."""
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ours.close()
            code = 0
            try:
                _detach_stdio()
                serve(theirs, config)
            except BaseException:  # noqa: BLE001
                code = 1
            os._exit(code)
        theirs.close()
        return cls._made(ours, pid, None, config)

    @classmethod
    def spawned(cls, config: dict[str, Any], env: dict[str, str] | None = None,
                python: str | None = None) -> "ForkServer":
        """A fresh interpreter (``python``, else this one's) as the server, for a process that already runs threads."""
        ours, theirs = socket.socketpair()
        try:
            proc = subprocess.Popen([python or sys.executable, "-m", "pallasite.runner.isolation.sandbox_server",
                                     str(theirs.fileno())],
                                    stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), close_fds=True,
                                    env=env if env is not None else dict(os.environ))
        finally:
            theirs.close()
        _send(ours, config)
        return cls._made(ours, proc.pid, proc, config)

    @classmethod
    def _made(cls, sock: socket.socket, pid: int, proc: Any, config: dict[str, Any]) -> "ForkServer":
        server = cls(sock, pid, proc)
        server.confined = bool(config.get("confined", True))
        server.limits = Limits(**config.get("limits") or {})
        return server

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            _send(self.sock, message)
            answer = _recv(self.sock)
        except OSError as exc:
            raise ForkServerGone(f"the fork server could not be reached ({exc})") from None
        if answer is None:
            raise ForkServerGone("the fork server ended")
        if answer.get("error") and set(answer) == {"error"}:
            raise RuntimeError(f"the fork server: {answer['error']}")
        return answer

    def start(self, body: Any) -> RemoteChild:
        """``body``: ``functools.partial(function, **keywords)``, ``function(send, **keywords)`` run in the child."""
        if not isinstance(body, functools.partial) or body.args:
            raise TypeError("a fork server's child runs functools.partial(module-level function, **JSON keywords)")
        answer = self.ask({"op": "start", "function": _name(body.func), "keywords": body.keywords})
        try:
            out_r = _recv_fd(self.sock)
        except OSError as exc:
            raise ForkServerGone(f"the child's pipe did not come back ({exc})") from None
        return RemoteChild(self, int(answer["pid"]), out_r, answer.get("setup_failed"), answer.get("inner"),
                           int(answer.get("threads") or -1))

    def call(self, function: Any, **keywords: Any) -> Any:
        return self.ask({"op": "call", "function": _name(function), "keywords": keywords}).get("result")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=10)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        else:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


def _detach_stdio() -> None:
    """The server holds no protocol descriptor of its parent: stdin from /dev/null, stdout to stderr."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[1]))
    config = _recv(sock)
    if config is None:
        return 1
    _detach_stdio()
    serve(sock, config)
    return 0


if __name__ == "__main__":
    os._exit(main(sys.argv))
