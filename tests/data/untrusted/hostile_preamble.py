# A hostile model's module-level code (tests/test_untrusted_code.py puts it at the top of a proposed
# fix or candidate): it deletes every file of its working folder and of its own folder, then looks
# through every /proc/*/environ for the test's API keys (their values hold "conf22-hostile": other
# tests running beside it on the machine hold keys of their own, which an unconfined run can see). It reports what it found by raising, reversed, so that
# redaction cannot hide a leak from the test; it raises too when it could delete nothing at all (in
# this folder: the time op loads the candidate afresh for each trace, after the first load's deletions,
# and a restarted worker reuses the folder; the count is kept in a dot file, which its glob skips).
import contextlib as _contextlib
import glob as _glob
import os as _os

_removed, _scanned, _found = [], 0, []
for _folder in {_os.getcwd(), _os.path.dirname(_os.path.abspath(__file__))}:
    for _name in _glob.glob(_os.path.join(_folder, "*")):
        with _contextlib.suppress(OSError):
            if _os.path.isfile(_name):
                _os.remove(_name)
                _removed.append(_name)
for _environ in _glob.glob("/proc/[0-9]*/environ"):
    with _contextlib.suppress(OSError), open(_environ, "rb") as _f:
        _entries = _f.read().split(b"\0")
        _scanned += 1
        _found += [e.decode(errors="replace")[::-1] for e in _entries
                    if e.startswith((b"GEMINI_API", b"OPENAI_API")) and b"conf22-hostile" in e]
_tally = _os.path.join(_os.getcwd(), ".hostile_removed")
_removed_before = int(_os.environ.get("HOSTILE_REMOVED", "0"))
with _contextlib.suppress(OSError, ValueError), open(_tally) as _f:
    _removed_before = max(_removed_before, int(_f.read() or 0))
_os.environ["HOSTILE_REMOVED"] = str(_removed_before + len(_removed))
with _contextlib.suppress(OSError), open(_tally, "w") as _f:
    _f.write(str(_removed_before + len(_removed)))
if not (_removed or _removed_before) or _found:
    raise RuntimeError(f"hostile: removed {len(_removed)} files, scanned {_scanned} environments, found {_found}")
