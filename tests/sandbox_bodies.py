"""What tests/test_sandbox.py runs in sandboxed children: module-level functions a fork server imports
(runner/isolation/sandbox_server.py: it forks each child from a process with one thread, never from the test's own)."""

from __future__ import annotations

import subprocess
import time


def run_code(send, code: str) -> None:
    """``code`` (hostile code under test) in the sandboxed child; it reports by assigning ``report`` (a dict)."""
    scope: dict = {"report": {}}
    try:
        exec(code, scope)  # noqa: S102 - the hostile code under test
    except BaseException as exc:  # noqa: BLE001
        scope["report"]["raised"] = f"{type(exc).__name__}: {exc}"
    send(scope["report"])


def sleeper(send) -> None:
    """A request that hangs with a grandchild of its own, until it is killed."""
    subprocess.Popen(["sleep", "300"])
    send({"started": True})
    time.sleep(300)
