"""How many virtual CPU devices a check worker starts with (client side, never imports jax).

A worker's jax is imported once, before any user file, so a file cannot change the device count
for itself: ``Mesh``es, ``shard_map`` and sharded inputs need the worker to start with enough
devices. Workers get ``--xla_force_host_platform_device_count=N`` in ``XLA_FLAGS`` (the
``cpuDevices`` setting, default 8); a file that sets that flag itself before importing jax
(``os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"``) gets a worker started
with its own count, as ``python FILE`` would.
"""

from __future__ import annotations

import os
import re

DEFAULT_CPU_DEVICES = 8
_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


def file_device_count(text: str) -> int | None:
    """The device count a file asks for in its own XLA_FLAGS (None: it does not set one)."""
    for match in _FLAG.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        line = text[line_start:match.start()]
        if "XLA_FLAGS" in line or "environ" in line or "XLA_FLAGS" in text[max(0, line_start - 200):line_start]:
            count = int(match.group(1))
            if 1 <= count <= 4096:
                return count
    return None


def xla_flags(count: int, base: str | None = None) -> str:
    """``base`` (the caller's XLA_FLAGS) with the device-count flag set to ``count``."""
    kept = _FLAG.sub("", base if base is not None else os.environ.get("XLA_FLAGS", "")).split()
    return " ".join(kept + [f"--xla_force_host_platform_device_count={count}"])
