# A hostile model's module-level code (tests/test_mcp.py puts it at the top of a right candidate sent to the
# `judge` tool): it starts a detached grandchild that would outlive the judge (`sleep 617.25`, in its own
# session, its parent gone) and reads every /proc/*/environ and cmdline it can see for the API key the
# test put in the server's environment. It raises with what it found (reversed, so redaction cannot hide
# it): a correct verdict means it ran, found nothing, and the test then looks for the sleeper everywhere.
import glob as _glob
import os as _os

if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        try:
            _os.execv("/bin/sleep", ["sleep", "617.25"])
        finally:
            _os._exit(0)
    _os._exit(0)
_found = []
for _path in _glob.glob("/proc/*/environ") + _glob.glob("/proc/*/cmdline"):
    try:
        with open(_path, "rb") as _f:
            _data = _f.read()
    except OSError:
        continue
    if b"conf53-mcp-secret" in _data:
        _found.append(_path)
if _found:
    raise RuntimeError("found the key in " + ", ".join(_found)[::-1])
