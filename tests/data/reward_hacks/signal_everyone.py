# Issue 56: every process the candidate can see is signalled (the judge is process 1 of the sandbox): stopped,
# then killed, so the judging never ends or ends without a verdict of its own.
import os as _os
import signal as _signal

for _name in _os.listdir("/proc"):
    if _name.isdigit() and int(_name) != _os.getpid():
        for _sig in (_signal.SIGSTOP, _signal.SIGKILL):
            try:
                _os.kill(int(_name), _sig)
            except OSError:
                pass
