"""Pressing Ctrl-C on a real `pallasite` command at a chosen moment, without races (tests of issue 52).

``interrupt_at(argv, cwd, marker)`` starts the command, reads its stdout and stderr on two threads
(each line kept, nothing buffered away, no pipe left to fill), waits for the first line holding
``marker`` (an event, not a sleep), sends SIGINT, and waits for the command to end. What the command
does between the marker and the signal must not matter to the test: the marker must be printed
where the command then waits (a model call that never answers, a kernel whose import sleeps)."""

from __future__ import annotations

import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import IO


@dataclass(frozen=True)
class Interrupted:
    returncode: int
    stdout: str
    stderr: str


def _read(stream: IO[str], into: list[str], marker: str, seen: threading.Event) -> None:
    for line in iter(stream.readline, ""):
        into.append(line)
        if marker in line:
            seen.set()
    seen.set()  # the stream ended (the command exited): nothing more to wait for


def _ctrl_c_delivered() -> None:
    """In the child before exec: SIGINT unblocked and at its default, as in a user's terminal. A signal mask and an
    ignored SIGINT are inherited across exec, and a test run earlier in the same pytest process may leave SIGINT
    blocked (the in-process worker tests block it while an op runs): the command then never saw the Ctrl-C (the
    full suite's interrupt tests hung or ran to the end; alone they passed)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_at(argv: list[str], cwd, marker: str, *, stream: str = "stderr", wait_s: float = 240.0,
                 exit_s: float = 120.0) -> Interrupted:
    """Run ``argv``; at the first line of ``stream`` holding ``marker``, SIGINT; its exit and output.
    Fails (AssertionError with the output) when the marker never comes or the command does not end."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_delivered)
    lines = {"stdout": [], "stderr": []}
    seen = {"stdout": threading.Event(), "stderr": threading.Event()}
    readers = [threading.Thread(target=_read, args=(getattr(proc, name), lines[name],
                                                    marker if name == stream else "\0never\0", seen[name]),
                                daemon=True) for name in ("stdout", "stderr")]
    for reader in readers:
        reader.start()
    try:
        came = seen[stream].wait(wait_s) and any(marker in line for line in lines[stream])
        assert came, f"no line with {marker!r} within {wait_s:g} s:\n{''.join(lines['stderr'])[-3000:]}"
        proc.send_signal(signal.SIGINT)
        proc.wait(exit_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for reader in readers:
            reader.join(30)
    return Interrupted(proc.returncode, "".join(lines["stdout"]), "".join(lines["stderr"]))
