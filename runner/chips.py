"""The TPU chip table, read from the installed jax and measured with libtpu (worker side).

Rates and capacities come from jax's own ``get_tpu_info_for_chip`` (so they match the installed
version); the tier-1 device kind and the tier-2 topology name are fixed per generation here and
verified by ``tests/test_chips.py`` against libtpu; the compiler's default scoped-VMEM limit is
measured by compiling a probe kernel whose pipelined block is too big and reading the limit from
the compiler's out-of-memory message (bisecting if the message has no number). The measured table
is cached as JSON per jax + libtpu version under $XDG_CACHE_HOME/pallasite (default
~/.cache/pallasite), so the server can read it without importing jax.

Imports jax lazily: ``format_chip_table``, the cache readers and the `pallasite chips` command
(``add_arguments``/``run``, which asks a worker when there is no cache) work without it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable
from importlib import metadata

from pallasite.analysis.types import ChipSpec, from_json, to_json


@dataclasses.dataclass(frozen=True)
class ChipTarget:
    """How pallasite names one generation: jax's ChipVersion value, tier-1 kind, tier-2 topology."""

    name: str
    chip_version: str  # jax ChipVersion value
    device_kind: str
    topology: str
    device_cores: int  # TensorCores per logical device libtpu reports for ``topology``


# The generations pallasite knows (the checker's targets are these names: engine/checker.py).
# 7x is one of them: with jax 0.10.2 + libtpu 0.0.42.1 its tier-1 lowering ("TPU7x") and its
# deviceless tier-2 compile (tpu7x:2x2x1) both work; its table row needs a jax that knows it.
TARGETS: tuple[ChipTarget, ...] = (
    ChipTarget("v4", "v4", "TPU v4", "v4:2x2x1", 1),  # libtpu gives v4 split (8 devices)
    ChipTarget("v5e", "v5e", "TPU v5 lite", "v5e:2x2", 1),
    ChipTarget("v5p", "v5p", "TPU v5", "v5p:2x2x1", 2),  # megacore
    ChipTarget("v6e", "v6e", "TPU v6 lite", "v6e:2x2", 1),
    ChipTarget("7x", "7x", "TPU7x", "tpu7x:2x2x1", 1),
)
DEFAULT_CHIP = "v6e"  # the chip checked when none is named (CheckOptions.target)


def target(name: str) -> ChipTarget:
    """The target called ``name`` (also accepts its device kind or topology); ValueError lists them."""
    for t in TARGETS:
        if name in (t.name, t.device_kind, t.topology):
            return t
    raise ValueError(f"unknown TPU chip {name!r}; known: {', '.join(t.name for t in TARGETS)}")


def versions() -> dict[str, str | None]:
    """jax, jaxlib and libtpu versions as installed (without importing them)."""
    out: dict[str, str | None] = {}
    for dist in ("jax", "jaxlib", "libtpu"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


# --------------------------------------------------------------------------- from jax's table


def spec_from_jax(t: ChipTarget) -> ChipSpec | None:
    """The ChipSpec for one target from the installed jax, or None if this jax does not know it."""
    from jax.experimental.pallas import tpu as pltpu

    try:
        version = pltpu.ChipVersion(t.chip_version)
    except ValueError:
        return None
    cores = version.num_physical_tensor_cores_per_chip
    megacore = bool(version.supports_megacore)
    info = pltpu.get_tpu_info_for_chip(version, 1)
    return ChipSpec(
        name=t.name,
        device_kind=t.device_kind,
        topology=t.topology,
        generation=info.generation,
        cores_per_chip=cores,
        device_cores=t.device_cores,
        megacore=megacore,
        bf16_flops=float(info.bf16_ops_per_second),
        int8_ops=float(info.int8_ops_per_second),
        fp8_ops=float(info.fp8_ops_per_second),
        hbm_bytes=int(info.hbm_capacity_bytes),
        hbm_bytes_per_s=float(info.mem_bw_bytes_per_second),
        vmem_bytes=int(info.vmem_capacity_bytes),
        smem_bytes=int(info.smem_capacity_bytes),
        mxu_size=int(info.mxu_column_size),
        num_mxus=int(info.num_mxus),
        lanes=int(info.num_lanes),
        sublanes=int(info.num_sublanes),
        source=f"jax {versions()['jax']} get_tpu_info_for_chip",
    )


# --------------------------------------------------------------------------- scoped-VMEM probe

_LIMIT_RE = re.compile(r"limit\s+([0-9.]+)\s*([KMG])\b")
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
MIB = 1 << 20
_OUTPUT_ROOM = 16 << 10  # the probe's (8, 128) f32 output window pair, with room to spare


def _compile_block(topology: str, window_bytes: int) -> str | None:
    """Compile a kernel with one double-buffered f32 input window of ``window_bytes`` on the
    deviceless topology; None if it compiles, else the compiler's out-of-memory message."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental import topologies

    rows = max(8, window_bytes // (128 * 4) // 8 * 8)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[0:8, :]

    def probe(x):
        return pl.pallas_call(
            kernel,
            grid=(2,),
            in_specs=[pl.BlockSpec((rows, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        )(x)

    device = topologies.get_topology_desc(topology_name=topology, platform="tpu").devices[0]
    arg = jax.ShapeDtypeStruct((2 * rows, 128), jnp.float32, sharding=jax.sharding.SingleDeviceSharding(device))
    try:
        with jax.default_device(device):
            jax.jit(probe).trace(arg).lower().compile()
    except Exception as exc:  # the compiler's verdict is the data here
        message = str(exc)
        if "RESOURCE_EXHAUSTED" not in message and "vmem" not in message.lower():
            raise
        return message
    return None


def limit_from_message(message: str) -> int | None:
    """The scoped-VMEM limit named in a compiler OOM message ("... and limit 16.00M exceeded
    scoped vmem limit ..."), rounded to whole MiB; None if the message names no limit."""
    m = _LIMIT_RE.search(message)
    if m:
        return round(float(m.group(1)) * _UNITS[m.group(2)] / MIB) * MIB
    return None


def probe_scoped_vmem(spec: ChipSpec, compile_block: Callable[[str, int], str | None] = _compile_block) -> tuple[int | None, str]:
    """Measure the default scoped-VMEM limit for one chip: (bytes or None, how it was found).

    First a window pair just under the VMEM capacity: if the limit is lower, the compiler's
    E1001 message names it. Otherwise (the limit is the capacity, or the message has no number)
    bisect on the pair's size at 1 MiB resolution (about 7 compiles of ~60 ms).
    """
    libtpu = versions()["libtpu"]
    if libtpu is None:
        return None, "not measured: libtpu is not installed (pip install 'pallasite[tpu]')"
    message = compile_block(spec.topology, (spec.vmem_bytes - 2 * MIB) // 2)
    limit = limit_from_message(message) if message else None
    if limit is not None:
        return limit, f"libtpu {libtpu} probe (compiler OOM message)"
    low, high = 0, spec.vmem_bytes // MIB + 1  # MiB of the window pair: low fits, high does not
    while high - low > 1:
        mid = (low + high) // 2
        if compile_block(spec.topology, (mid * MIB - _OUTPUT_ROOM) // 2) is None:
            low = mid
        else:
            high = mid
    return low * MIB, f"libtpu {libtpu} probe (bisection, 1 MiB resolution)"


# --------------------------------------------------------------------------- the table + cache


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pallasite")


def cache_path(vers: dict[str, str | None] | None = None) -> str:
    v = vers or versions()
    return os.path.join(cache_dir(), f"chips-jax{v['jax']}-libtpu{v['libtpu'] or 'none'}.json")


def read_cache(path: str | None = None) -> list[ChipSpec] | None:
    """The cached table, or None if there is none (or it is unreadable)."""
    try:
        with open(path or cache_path(), encoding="utf-8") as f:
            data = json.load(f)
        return [from_json(ChipSpec, item) for item in data["chips"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_cache(specs: list[ChipSpec], path: str | None = None) -> str:
    path = path or cache_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"versions": versions(), "chips": to_json(specs)}, f, indent=1)
    os.replace(tmp, path)
    return path


def chip_table(*, probe: bool = True, use_cache: bool = True) -> list[ChipSpec]:
    """Every known chip, with the scoped-VMEM limit measured (and cached) when ``probe``."""
    if use_cache:
        cached = read_cache()
        if cached is not None and (not probe or all(s.scoped_vmem_limit_bytes for s in cached)):
            return cached
    specs = [s for s in (spec_from_jax(t) for t in TARGETS) if s is not None]
    if not probe:
        return specs
    measured = []
    for spec in specs:
        try:
            limit, how = probe_scoped_vmem(spec)
        except Exception as exc:  # a probe failure is reported in the table, not raised
            limit, how = None, f"not measured: probe failed ({type(exc).__name__}: {str(exc)[:200]})"
        measured.append(dataclasses.replace(spec, scoped_vmem_limit_bytes=limit, scoped_vmem_source=how))
    if use_cache and all(s.scoped_vmem_limit_bytes for s in measured):
        write_cache(measured)
    return measured


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


# --------------------------------------------------------------------------- `pallasite chips`


def add_arguments(parser, command: str) -> None:
    parser.add_argument("--no-probe", action="store_true",
                        help="skip the libtpu probe of the scoped-VMEM limit (shown as '?')")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")


def run(args) -> int:
    """Print the chip table: from the cache, else built by a worker (this process stays jax-free)."""
    from pallasite.engine.client import WorkerConfig, chip_table_sync

    specs, error = chip_table_sync(WorkerConfig(), probe=not args.no_probe)
    if error:
        print(f"pallasite chips: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(to_json(specs), indent=1))
    else:
        print(format_chip_table(specs))
    return 0
