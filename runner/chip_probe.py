"""The TPU chip table measured on the worker side: jax's own numbers and a libtpu probe.

Rates and capacities come from jax's own ``get_tpu_info_for_chip`` (so they match the installed
version); the names (tier-1 device kind, tier-2 topology) are ``analysis.types.CHIP_TARGETS``;
the compiler's default scoped-VMEM limit is measured by compiling a probe kernel whose pipelined
block is too big and reading the limit from the compiler's out-of-memory message (bisecting if
the message has no number). The worker's "chips" op answers with ``measure``; the client side
caches the table per jax + libtpu version (knowledge/chips.py), so nothing here writes files.
Imports jax lazily (inside the functions that need it).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from ..analysis.types import CHIP_TARGETS, ChipSpec, ChipTarget, installed_versions



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
        source=f"jax {installed_versions()['jax']} get_tpu_info_for_chip",
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
    libtpu = installed_versions()["libtpu"]
    if libtpu is None:
        return None, "not measured: libtpu is not installed (jax's tpu extra at the installed jax version)"
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


# --------------------------------------------------------------------------- the table


def measure(*, probe: bool = True) -> list[ChipSpec]:
    """Every chip this jax knows, with the scoped-VMEM limit measured when ``probe`` (a probe that
    fails is reported in the spec's ``scoped_vmem_source``, not raised)."""
    specs = [s for s in (spec_from_jax(t) for t in CHIP_TARGETS) if s is not None]
    if not probe:
        return specs
    measured = []
    for spec in specs:
        try:
            limit, how = probe_scoped_vmem(spec)
        except Exception as exc:  # a probe failure is reported in the table, not raised
            limit, how = None, f"not measured: probe failed ({type(exc).__name__}: {str(exc)[:200]})"
        measured.append(dataclasses.replace(spec, scoped_vmem_limit_bytes=limit, scoped_vmem_source=how))
    return measured
