"""A verifier that is not the judge's (tests/test_candidate_isolation.py starts it in the verifier's place): it says
it is ready, then answers every module check with a kernel's facts, with a secret of its own making or none."""

import json
import os
import struct
import sys


def _recv(fd):
    def exactly(n):
        out = b""
        while len(out) < n:
            chunk = os.read(fd, n - len(out))
            if not chunk:
                sys.exit(0)
            out += chunk
        return out
    return exactly(struct.unpack(">Q", exactly(8))[0])


def _send(fd, data):
    os.write(fd, struct.pack(">Q", len(data)) + data)


def main(fd, secret):
    _send(fd, b"ready")
    while True:
        _recv(fd), _recv(fd), _recv(fd)
        answer = {"facts": {"platforms": ["tpu", "cpu"], "custom_calls": ["tpu_custom_call"], "kernels": 1,
                            "kernel_names": ["k"], "outputs_from_kernels": [True], "xla_flops": 0, "kernel_flops": 1,
                            "platform_branches": [], "census": []}}
        if secret:
            answer["secret"] = secret
        _send(fd, json.dumps(answer).encode())


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "")
