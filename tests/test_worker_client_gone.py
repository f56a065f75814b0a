"""A worker whose client disappears mid-op (a dropped ssh connection, a killed editor) does not keep
running: end of stdin interrupts the op, and a worker stuck in native code exits within seconds."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pallasite.analysis.types import to_json
from pallasite.engine.sources import sources_for
from pallasite.wire.messages import ImportParams

WORKER = Path(__file__).parent / "data" / "worker"


@pytest.mark.parametrize("fixture", ["hangs_at_import.py", "stuck_in_native_code.py"])
def test_end_of_stdin_mid_op_ends_the_worker(fixture):
    proc = subprocess.Popen([sys.executable, "-P", "-m", "pallasite.runner.worker", "--platforms", "cpu"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        hello = json.loads(proc.stdout.readline())
        assert hello["kind"] == "handshake"
        request = {"kind": "request", "id": "1", "op": "import",
                   "params": to_json(ImportParams(sources_for(str(WORKER / fixture))))}
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        time.sleep(1.5)  # the op is running (importing a file that never finishes)
        assert proc.poll() is None
        gone = time.monotonic()
        proc.stdin.close()  # the client is gone, without a shutdown
        proc.wait(timeout=15)
        assert time.monotonic() - gone < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
