"""Scratch folders for workers: each worker's own writable folder (its working directory and the
only place a confined worker may write), named for the process that owns it so a killed run's
folders are removed by the next one. Used by ``confinement`` (the worker's argv) and by ``spawn``
(the probe that checks confinement works here)."""

from __future__ import annotations

import os
import shutil
import tempfile


def new_scratch() -> str:
    """A new scratch folder, named for the process that owns it: under the user's cache folder
    (outside /tmp, so the worker can get a private /tmp), else the system's temporary folder. Those
    of owners that are gone (a killed run) are removed."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    try:
        folder = os.path.join(base, "pallasite", "scratch")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        for old in os.scandir(folder):
            owner = old.name.split("-")[1] if old.name.startswith("worker-") else ""
            if owner.isdigit() and not _alive(int(owner)):
                remove_scratch(old.path)
        return tempfile.mkdtemp(prefix=f"worker-{os.getpid()}-", dir=folder)
    except OSError:
        return tempfile.mkdtemp(prefix="pallasite-scratch-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (another user's process: alive)
        return True
    return True


def remove_scratch(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
