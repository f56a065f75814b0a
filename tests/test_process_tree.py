"""A request's child that the worker kills (a cancel, a deadline) ends with everything it started
(runner/isolation/process_tree.py, runner/isolation/sandbox.Child.kill).

Before: an unconfined child (the user's ``worker.sandbox: off``) was killed alone; the judge's candidate
process, in a session of its own, kept running the model's code after a cancel.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and a child subreaper: Linux")

# Run in a fresh interpreter that is a child subreaper, as a confined worker is (runner/worker.py).
SCRIPT = textwrap.dedent("""
    import ctypes, json, os, subprocess, sys, time
    from pallasite.runner.isolation import sandbox

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    sandboxes = sandbox.Sandboxes(confined=False)  # the user's `worker.sandbox: off`

    def body(send):  # a process in a session of its own, that starts one more, as a candidate's code may
        proc = subprocess.Popen([sys.executable, "-c",
                                 "import subprocess, sys, time; p = subprocess.Popen(['sleep', '30']);"
                                 "print(p.pid, flush=True); time.sleep(30)"],
                                stdout=subprocess.PIPE, start_new_session=True, text=True)
        send({"pids": [proc.pid, int(proc.stdout.readline())]})
        time.sleep(30)

    child = sandboxes.start(body)
    pids = []
    for message in child.messages(time.monotonic() + 60):
        if isinstance(message, dict) and "pids" in message:
            pids = [int(p) for p in message["pids"]]
            child.kill("cancelled")
    outcome = child.outcome()
    left = [p for p in pids if os.path.exists(f"/proc/{p}")]  # a zombie counts: nobody reaped it
    print(json.dumps({"killed_for": outcome.killed_for, "seen": pids, "left": left}))
""")


def test_a_killed_unconfined_child_ends_the_processes_it_started_in_other_sessions():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["killed_for"] == "cancelled"
    assert len(report["seen"]) == 2  # the new session's process and the one it started
    assert report["left"] == [], f"still there after the kill (running or unreaped): {report}"


def test_the_descendants_of_a_process_are_found_across_sessions():
    from pallasite.runner.isolation import process_tree

    outer = subprocess.Popen([sys.executable, "-c",
                              "import subprocess, time; p = subprocess.Popen(['sleep', '60'], start_new_session=True);"
                              "print(p.pid, flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        inner = int(outer.stdout.readline())
        assert process_tree.descendants(outer.pid) == [inner]
        killed = process_tree.kill_tree(outer.pid)
        assert killed == [inner]
        assert outer.wait(timeout=10) == -9
    finally:
        outer.kill()
        outer.wait()
