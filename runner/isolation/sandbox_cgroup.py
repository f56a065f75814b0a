"""Per-child memory and process limits for the sandbox (runner/isolation/sandbox.py): a cgroup of the v1
``memory`` and ``pids`` hierarchies created under this process's own, where it may create one
(pallasite as root, or a delegated tree). Pages of tmpfs, memfd and shared memory are charged to
it, which an RSS watch never saw. Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import time


class MemoryCgroup:
    """A memory (and pids) cgroup for one child, where this process may create one; else ``None``."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    @staticmethod
    def create(name: str, memory_mb: int, processes: int) -> "MemoryCgroup | None":
        made = []
        for kind, files in (("memory", {"memory.limit_in_bytes": memory_mb * 2**20,
                                        "memory.memsw.limit_in_bytes": memory_mb * 2**20}),
                            ("pids", {"pids.max": processes})):
            base = _cgroup_base(kind)
            if base is None:
                continue
            path = os.path.join(base, name)
            try:
                os.mkdir(path)
                for file, value in files.items():
                    with contextlib.suppress(OSError):
                        with open(os.path.join(path, file), "w") as out:
                            out.write(str(value))
                made.append(path)
            except OSError:
                continue
        if not any("memory" in p for p in made):
            for path in made:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            return None
        return MemoryCgroup(made)

    def add(self, pid: int) -> None:
        for path in self.paths:
            with open(os.path.join(path, "cgroup.procs"), "w") as out:
                out.write(str(pid))

    def exceeded(self) -> bool:
        for path in self.paths:
            with contextlib.suppress(OSError, ValueError):
                with open(os.path.join(path, "memory.failcnt")) as f:
                    if int(f.read()) > 0:
                        return True
        return False

    def remove(self) -> None:
        for path in self.paths:
            for _ in range(50):
                try:
                    os.rmdir(path)
                    break
                except OSError:
                    time.sleep(0.01)


def _cgroup_base(kind: str) -> str | None:
    """This process's own cgroup folder of the v1 hierarchy ``kind`` where it is writable."""
    mount = f"/sys/fs/cgroup/{kind}"
    if not os.path.isdir(mount):
        return None
    own = ""
    with contextlib.suppress(OSError):
        for line in open("/proc/self/cgroup"):
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if kind in controllers.split(","):
                own = path
    for candidate in (mount + own, mount):
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK):
            return candidate
    return None
