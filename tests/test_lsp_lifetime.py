"""Nothing outlives the editor: when the editor quits in the middle of a check (its end of our
input, or `exit` without `shutdown`), the server ends within a second, and so do its worker and
the worker's children (checked by pid); a killed server's workers end by themselves (see
test_spawn.py for PR_SET_PDEATHSIG at the client level)."""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from pathlib import Path

import psutil
import pytest

from lsp_wire import WireClient
from test_spawn import gone_within, with_token

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("how", ["end of input", "exit", "SIGKILL"])
def test_editor_quitting_mid_check_leaves_no_process(tmp_path, how):
    mark = f"pallasite-test-{uuid.uuid4().hex[:10]}"
    folder = tmp_path / "ws"
    folder.mkdir()
    path = folder / "blocks_signals_and_sleeps.py"
    shutil.copy(DATA / "spawn" / "blocks_signals_and_sleeps.py", path)
    # the sandbox would end the grandchild by itself: test what the server does without it
    client = WireClient(tmp_path / "home", env={**os.environ, "PALLASITE_TEST_MARK": mark},
                        settings={"tiers": [0, 1], "trust": {"mode": "always"}, "worker": {"sandbox": "off"}})
    try:
        client.initialize(folder)
        client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                                "version": 1, "text": path.read_text()}})
        deadline = time.monotonic() + 60
        while not with_token(mark) and time.monotonic() < deadline:  # the check is running the kernel
            time.sleep(0.1)
        assert with_token(mark), "the check never reached the kernel"
        server = psutil.Process(client.proc.pid)
        family = [client.proc.pid, *[p.pid for p in server.children(recursive=True)]]
        assert len(family) >= 3  # the server, its worker, the kernel's setsid child
        started = time.monotonic()
        if how == "end of input":
            client.proc.stdin.close()
        elif how == "exit":
            client.notify("exit")
        else:
            client.proc.send_signal(signal.SIGKILL)
        client.proc.wait(5)
        ended = time.monotonic() - started
        workers = family[1:]
        if how == "SIGKILL":  # PR_SET_PDEATHSIG ends the worker; its setsid child is out of reach
            workers = [p for p in workers if p not in with_token(mark)]
        assert gone_within(lambda: [p for p in workers if _alive(p)], 1.0), \
            f"still running after the editor left: {[p for p in workers if _alive(p)]}"
        assert ended < 1.0, f"the server took {ended:.2f} s to end"
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
        for pid in with_token(mark):
            os.kill(pid, signal.SIGKILL)
        client.close()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
