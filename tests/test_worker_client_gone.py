"""A worker whose client disappears mid-op (a dropped ssh connection, a killed editor) does not keep
running: end of stdin interrupts the op, and a worker stuck in native code exits within seconds."""

from __future__ import annotations

import json
import os
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


def _shutdown(proc: subprocess.Popen) -> int:
    proc.stdin.write((json.dumps({"kind": "shutdown"}) + "\n").encode())
    proc.stdin.flush()
    return proc.wait(timeout=60)


def test_after_a_shutdown_the_worker_leaves_without_pythons_finalization(tmp_path):
    """A shutdown ends the worker with os._exit once its output is flushed: Python's finalization with
    jax loaded took 0.5-0.75 s, which `pallasite check` waited for at every run's end. Observed here
    by an atexit handler the imported file registers: finalization would run it."""
    marker = tmp_path / "finalized"
    kernel = tmp_path / "registers_atexit.py"
    kernel.write_text(f"import atexit\natexit.register(lambda: open({str(marker)!r}, 'w').close())\n")
    proc = subprocess.Popen([sys.executable, "-P", "-m", "pallasite.runner.worker", "--platforms", "cpu"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert json.loads(proc.stdout.readline())["kind"] == "handshake"
        request = {"kind": "request", "id": "1", "op": "import",
                   "params": to_json(ImportParams(sources_for(str(kernel))))}
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        while reply["kind"] == "progress":
            reply = json.loads(proc.stdout.readline())
        assert reply["kind"] == "result" and reply["id"] == "1", reply
        assert _shutdown(proc) == 0
        assert not marker.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_worker_on_another_host_removes_its_scratch_folder_when_it_leaves(tmp_path):
    """``--confine auto`` (a worker started over ssh) makes its own scratch folder; leaving at once
    after a shutdown still removes it."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PALLASITE_NO_NAMESPACES": "forced by the test"}
    proc = subprocess.Popen([sys.executable, "-P", "-m", "pallasite.runner.worker", "--platforms", "cpu",
                             "--confine", "auto", "--allow-unconfined"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert json.loads(proc.stdout.readline())["kind"] == "handshake"
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("pallasite-scratch-")]
        assert _shutdown(proc) == 0
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("pallasite-scratch-")]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
