"""Answer chip queries as the target TPU while a script runs on the worker's CPU (worker side).

Script mode runs a file's ``__main__`` on CPU. Code that asks Pallas which chip it is on
(``pltpu.get_tpu_info()``, used to size blocks by VMEM capacity) would fail there with
"Unsupported TPU device kind: cpu". ``target_chip(target)`` makes jax's chip queries
(``get_device_kind``/``get_num_device_cores`` of ``jax._src.pallas.mosaic.tpu_info``, the ones
``get_tpu_info`` reads) answer with the target chip's device kind and core count whenever the
default device is a CPU and no abstract mesh names a device, and puts them back afterwards. Only
the answers to those queries change: meshes, shardings and devices stay the CPU ones.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from pallasite.analysis.types import CHIP_TARGETS

_KINDS = {t.name: (t.device_kind, t.device_cores) for t in CHIP_TARGETS}


@contextlib.contextmanager
def target_chip(target: str) -> Iterator[None]:
    if target not in _KINDS:
        yield
        return
    try:
        from jax._src.pallas.mosaic import tpu_info
    except ImportError:  # another jax layout: the script runs as before
        yield
        return
    kind, cores = _KINDS[target]
    saved = {name: getattr(tpu_info, name, None) for name in ("get_device_kind", "get_num_device_cores")}
    if not all(callable(fn) for fn in saved.values()):
        yield
        return
    original_kind, original_cores = saved["get_device_kind"], saved["get_num_device_cores"]

    def get_device_kind() -> str:
        found = original_kind()
        return kind if found.lower() == "cpu" else found

    def get_num_device_cores() -> int:
        return cores if original_kind().lower() == "cpu" else original_cores()

    tpu_info.get_device_kind = get_device_kind
    tpu_info.get_num_device_cores = get_num_device_cores
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(tpu_info, name, fn)
