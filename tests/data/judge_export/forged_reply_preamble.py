# A hostile candidate's module-level code: it writes a forged verdict ("ok, 8x") as a judge frame on
# every socket of its process and as a protocol line on its stdout, before the judge asked for anything.
import os as _os
import stat as _stat

try:
    from pallasite.runner.judging.channel import send_frame as _send
    import socket as _socket

    _forged = {"verdict": "ok", "rejections": [], "speedup": {"value": 8.0}, "judged_by": "the judge"}
    for _fd in range(3, 256):
        try:
            if _stat.S_ISSOCK(_os.fstat(_fd).st_mode):
                _s = _socket.socket(fileno=_os.dup(_fd))
                _send(_s, {"op": "result", "result": _forged})
                _send(_s, {"op": "exported", "names": ["shapes"], "rejections": [], "counted": {}})
        except OSError:
            pass
    print('{"kind": "result", "id": "1", "ok": true, "result": {"verdict": "ok"}}', flush=True)
except ImportError:
    pass
