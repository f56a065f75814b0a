"""Answer the user's questions about the hardware as the target TPU, on the worker's CPU (worker side).

The worker runs the user's file on CPU (its import, its ``__main__``, its entries), but the file was
written for a TPU: it sizes blocks from ``pltpu.get_tpu_info()`` (which fails on CPU with
"Unsupported TPU device kind: cpu") and takes its kernel path only when ``jax.default_backend() ==
"tpu"`` or ``"TPU" in jax.devices()[0].device_kind``. ``target_chip(target)`` makes those answers
the target chip's for the duration, and puts everything back afterwards:

- jax's chip queries (``get_device_kind``/``get_num_device_cores`` of
  ``jax._src.pallas.mosaic.tpu_info``, the ones ``get_tpu_info`` reads) answer with the target
  chip's device kind and core count whenever the default device is a CPU and no abstract mesh names
  a device;
- for the user's code only — any caller outside jax, jaxlib and pallasite's worker side (a kernel
  library the file imports counts as the user's) — ``jax.default_backend()`` is ``"tpu"``, a CPU device's
  ``platform`` is ``"tpu"`` and its ``device_kind`` the target's, and ``jax.devices("tpu")`` /
  ``jax.local_devices(backend="tpu")`` are the CPU devices.

jax's own code keeps seeing the CPU backend: arrays are made, meshes built and programs compiled on
the CPU devices as before (a mesh over ``jax.devices()`` still works); only the answers the user's
code reads change.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable, Iterator, Sequence

from ..analysis.types import CHIP_TARGETS

_KINDS = {t.name: (t.device_kind, t.device_cores) for t in CHIP_TARGETS}


@contextlib.contextmanager
def target_chip(target: str) -> Iterator[None]:
    if target not in _KINDS:
        yield
        return
    kind, cores = _KINDS[target]
    with contextlib.ExitStack() as stack:
        stack.enter_context(_chip_queries(kind, cores))
        stack.enter_context(_backend_answers(kind))
        yield


@contextlib.contextmanager
def _chip_queries(kind: str, cores: int) -> Iterator[None]:
    try:
        from jax._src.pallas.mosaic import tpu_info
    except ImportError:  # another jax layout: the script runs as before
        yield
        return
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

    with _patched([(tpu_info, "get_device_kind", get_device_kind),
                   (tpu_info, "get_num_device_cores", get_num_device_cores)]):
        yield


@contextlib.contextmanager
def _backend_answers(kind: str) -> Iterator[None]:
    import jax
    from jax._src import xla_bridge

    default_backend = xla_bridge.default_backend
    devices, local_devices = jax.devices, jax.local_devices
    device_type = type(jax.devices()[0])
    platform, device_kind = vars(device_type).get("platform"), vars(device_type).get("device_kind")

    def answer_default_backend() -> str:
        return "tpu" if _from_user() else default_backend()

    def answer_devices(backend: Any = None) -> list[Any]:
        return devices(_cpu_for_tpu(backend))

    def answer_local_devices(process_index: Any = None, backend: Any = None, host_id: Any = None) -> list[Any]:
        return local_devices(process_index, _cpu_for_tpu(backend), host_id)

    patches: list[tuple[Any, str, Any]] = [
        (jax, "default_backend", answer_default_backend),
        (xla_bridge, "default_backend", answer_default_backend),
        (jax, "devices", answer_devices),
        (jax, "local_devices", answer_local_devices),
    ]
    if isinstance(platform, property) and isinstance(device_kind, property):
        patches += [(device_type, "platform", _as_tpu(platform, lambda dev: "tpu", platform)),
                    (device_type, "device_kind", _as_tpu(device_kind, lambda dev: kind, platform))]
    with _patched(patches):
        yield


def _cpu_for_tpu(backend: Any) -> Any:
    """``"tpu"`` asked for by the user's code means the devices there are (the CPU ones)."""
    return None if isinstance(backend, str) and backend.lower() == "tpu" and _from_user(3) else backend


def _as_tpu(real: property, answer: Callable[[Any], str], platform: property) -> property:
    """A Device property that gives ``answer(device)`` to the user's code for a CPU device."""

    def get(device: Any) -> Any:
        if platform.fget(device) == "cpu" and _from_user():
            return answer(device)
        return real.fget(device)

    return property(get, doc=real.__doc__)


@contextlib.contextmanager
def _patched(patches: list[tuple[Any, str, Any]]) -> Iterator[None]:
    saved = []
    try:
        for holder, name, value in patches:
            saved.append((holder, name, vars(holder).get(name, _MISSING) if isinstance(holder, type)
                          else getattr(holder, name, _MISSING)))
            setattr(holder, name, value)
        yield
    finally:
        for holder, name, value in reversed(saved):
            if value is _MISSING:
                delattr(holder, name)
            else:
                setattr(holder, name, value)


_MISSING = object()


def _internal_roots() -> tuple[str, ...]:
    import jax
    import jaxlib

    runner = os.path.dirname(os.path.realpath(__file__))  # pallasite's worker side and what it imports
    ours = (runner, os.path.join(os.path.dirname(runner), "analysis"))
    return tuple(folder + os.sep for folder in (
        *(os.path.dirname(os.path.realpath(m.__file__)) for m in (jax, jaxlib)), *ours))


_ROOTS: tuple[str, ...] | None = None
_SEEN: dict[str, bool] = {}


def _from_user(depth: int = 2) -> bool:
    """Whether the frame ``depth`` levels up (the caller of the patched function) is the user's
    code: not jax's, jaxlib's or pallasite's worker side (those keep the CPU answers)."""
    global _ROOTS
    file = sys._getframe(depth).f_code.co_filename
    found = _SEEN.get(file)
    if found is None:
        if _ROOTS is None:
            _ROOTS = _internal_roots()
        found = _SEEN[file] = not file.startswith("<") and not os.path.realpath(file).startswith(_ROOTS)
    return found


@contextlib.contextmanager
def answering_as_user(files: Sequence[str]) -> Iterator[None]:
    """While the block runs, calls from ``files`` (jax's test utilities, asking which device is under
    test for a test of the user's) get the answers the user's code gets."""
    before = {f: _SEEN.get(f) for f in files}
    _SEEN.update({f: True for f in files})
    try:
        yield
    finally:
        for f, value in before.items():
            if value is None:
                _SEEN.pop(f, None)
            else:
                _SEEN[f] = value
