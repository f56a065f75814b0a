"""The TPU chip table on the client side: its JSON cache per jax + libtpu version, and its text.

The table is measured by a worker (runner/chip_probe.py: jax's numbers and a libtpu probe of the
scoped-VMEM limit, a few seconds); here it is kept so hovers and `pallasite chips` can show it
without a worker and without importing jax. The cache file is named by the versions the table is
valid for (those the measuring worker reported), under $XDG_CACHE_HOME/pallasite (default
~/.cache/pallasite).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from ..analysis.types import ChipSpec, from_json, to_json

MIB = 1 << 20
Versions = Mapping[str, str | None]


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pallasite")


def cache_path(versions: Versions) -> str:
    """The cache file for a table measured under ``versions`` (its jax and libtpu entries)."""
    return os.path.join(cache_dir(), f"chips-jax{versions.get('jax')}-libtpu{versions.get('libtpu') or 'none'}.json")


def read_cache(versions: Versions, path: str | None = None) -> list[ChipSpec] | None:
    """The cached table for ``versions``, or None if there is none (or it is unreadable)."""
    try:
        with open(path or cache_path(versions), encoding="utf-8") as f:
            data = json.load(f)
        return [from_json(ChipSpec, item) for item in data["chips"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_cache(specs: list[ChipSpec], versions: Versions, path: str | None = None) -> str:
    """Store the table measured under ``versions`` (atomically: a reader never sees half a file)."""
    path = path or cache_path(versions)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"versions": dict(versions), "chips": to_json(specs)}, f, indent=1)
    os.replace(tmp, path)
    return path


def complete(specs: list[ChipSpec]) -> bool:
    """Whether every chip's scoped-VMEM limit was measured (only then is a table worth caching)."""
    return bool(specs) and all(s.scoped_vmem_limit_bytes for s in specs)


# --------------------------------------------------------------------------- display


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / MIB:.4g} MiB"


def format_chip_table(specs: list[ChipSpec]) -> str:
    """The table as text for `pallasite chips`: per TensorCore, then per chip, with sources."""
    header = ("chip", "tier-1 kind", "tier-2 topology", "cores", "bf16/core", "bf16/chip",
              "HBM BW/chip", "HBM/chip", "VMEM/core", "scoped VMEM", "SMEM", "MXU")
    rows = [header]
    for s in specs:
        rows.append((
            s.name, s.device_kind, s.topology,
            f"{s.cores_per_chip}{' (megacore)' if s.megacore else ''}",
            _si(s.bf16_flops, "FLOP/s"), _si(s.chip_bf16_flops, "FLOP/s"),
            _si(s.chip_hbm_bytes_per_s, "B/s"), f"{s.chip_hbm_bytes / 1e9:.4g} GB",
            _mib(s.vmem_bytes), _mib(s.scoped_vmem_limit_bytes), f"{s.smem_bytes // 1024} KiB",
            f"{s.num_mxus}x{s.mxu_size}",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    sources = sorted({s.source for s in specs if s.source} | {f"scoped VMEM: {s.scoped_vmem_source}" for s in specs})
    lines.append("")
    lines.extend(f"source: {src}" for src in sources)
    return "\n".join(lines)
