# A hostile candidate's module-level code (tests/test_candidate_isolation.py puts it above a right kernel and
# fills in {token}, {marker}, {port} and {kill_all}): it leaves a daemon - double-forked, in a session of its
# own, named {token} - that waits until the candidate's process is gone (the judge then runs the program), then
# writes the marker file, connects to the test's port, and ({kill_all}) SIGKILLs every process it may signal
# (the verifier among them, in a sandbox), and stays. Before the candidate's process had a PID namespace of its
# own, the daemon outlived it: inside the sandbox the judge's sweep returned early (its /proc shows one NSpid
# level).
import ctypes as _ct
import os as _os
import socket as _socket
import time as _time


def _daemon(candidate):
    _ct.CDLL(None).prctl(15, b"{token}", 0, 0, 0)  # PR_SET_NAME: findable by the test
    while True:
        try:
            _os.kill(candidate, 0)
        except OSError:
            break
        _time.sleep(0.01)
    _time.sleep(0.2)  # the judge is at work now
    try:
        with open("{marker}", "w") as out:
            out.write("the daemon outlived the candidate's process\n")
    except OSError:
        pass
    try:
        _socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    except OSError:
        pass
    if {kill_all}:
        try:
            _os.kill(-1, 9)
        except OSError:
            pass
    _time.sleep(120)


def _leave():
    candidate = _os.getpid()
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            try:
                _daemon(candidate)
            finally:
                _os._exit(0)
        _os._exit(0)
    _os.wait()


_leave()
