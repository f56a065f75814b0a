"""Device time from the profiler, per-kernel figures and the roofline (worker side).

- ``capture(trace_dir)`` is a context manager around ``jax.profiler.trace``; one trace per process
  at a time (a second concurrent one raises ``TraceBusy``), and it yields a holder whose ``path``
  is the ``.xplane.pb`` file written.
- ``device_planes(profile)``: the accelerator planes of a ``jax.profiler.ProfileData``
  (``/device:TPU:N``, ``/device:GPU:N``); host planes (``/host:CPU``) never count as device time.
- ``module_times(profile, prefix)``: the device time of each run of the jitted program whose XLA
  module name starts with ``prefix`` (the "XLA Modules" line), in order.
- ``kernel_times(profile, prefixes)``: per op/kernel name on the "XLA Ops" line, inside those
  modules' windows, the union of the event intervals (overlapping events are not counted twice).
- ``roofline(flops, bytes, seconds, peak_flops, peak_bytes_per_s)``: achieved FLOP/s and bytes/s,
  the arithmetic intensity, the bound (memory or compute) and the fraction of the roofline.

The parsing functions take any object with ``planes -> lines -> events`` of
``name``/``start_ns``/``duration_ns`` (ProfileData's shape), so they are tested on recorded and
synthetic xplanes (``ProfileData.from_text_proto``) as well as on live traces.
"""

from __future__ import annotations

import contextlib
import glob
import os
import threading
from dataclasses import dataclass
from typing import Any, Iterator

DEVICE_PREFIXES = ("/device:TPU:", "/device:GPU:")
_trace_lock = threading.Lock()


class TraceBusy(RuntimeError):
    """Another profiler trace is running in this process (jax allows one at a time)."""


@dataclass
class Trace:
    directory: str
    path: str | None = None  # the .xplane.pb file, once the trace has stopped


@contextlib.contextmanager
def capture(trace_dir: str) -> Iterator[Trace]:
    import jax

    if not _trace_lock.acquire(blocking=False):
        raise TraceBusy("another profiler trace is running in this worker; jax allows one trace per process")
    holder = Trace(trace_dir)
    before = set(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True))
    try:
        os.makedirs(trace_dir, exist_ok=True)
        with jax.profiler.trace(trace_dir):
            yield holder
        written = sorted(set(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)) - before,
                         key=os.path.getmtime)
        holder.path = written[-1] if written else None
    finally:
        _trace_lock.release()


def load(path: str) -> Any:
    from jax.profiler import ProfileData

    return ProfileData.from_file(path)


def device_planes(profile: Any) -> list[Any]:
    return [p for p in profile.planes if str(p.name).startswith(DEVICE_PREFIXES)]


def _line(plane: Any, name: str) -> Any | None:
    for line in plane.lines:
        if line.name == name:
            return line
    return None


def module_windows(profile: Any, prefix: str) -> list[tuple[float, float]]:
    """(start_ns, end_ns) of every device run of the XLA module(s) named ``prefix...``, by start."""
    windows = []
    for plane in device_planes(profile):
        line = _line(plane, "XLA Modules")
        if line is None:
            continue
        for event in line.events:
            if str(event.name).startswith(prefix):
                windows.append((float(event.start_ns), float(event.start_ns) + float(event.duration_ns)))
    return sorted(windows)


def module_times(profile: Any, prefix: str) -> list[float]:
    """Device time (ns) of each run of the module, in start order."""
    return [end - start for start, end in module_windows(profile, prefix)]


def union_ns(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by the intervals (overlaps counted once)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def kernel_times(profile: Any, prefix: str) -> dict[str, dict[str, float]]:
    """Per op name inside the module's windows: {"total_ns", "count"} (union of intervals)."""
    windows = module_windows(profile, prefix)
    per_name: dict[str, list[tuple[float, float]]] = {}
    for plane in device_planes(profile):
        line = _line(plane, "XLA Ops")
        if line is None:
            continue
        for event in line.events:
            start = float(event.start_ns)
            stop = start + float(event.duration_ns)
            if windows and not any(ws <= start and stop <= we for ws, we in windows):
                continue
            per_name.setdefault(str(event.name), []).append((start, stop))
    return {name: {"total_ns": union_ns(iv), "count": len(iv)} for name, iv in per_name.items()}


def roofline(flops: float | None, nbytes: float | None, seconds: float | None,
             peak_flops: float | None, peak_bytes_per_s: float | None) -> dict[str, Any]:
    """Achieved rates and where they sit under the chip's roofline (None where unknown)."""
    out: dict[str, Any] = {"flops": flops, "bytes": nbytes, "seconds": seconds,
                           "achieved_flops_per_s": None, "achieved_bytes_per_s": None,
                           "intensity_flops_per_byte": None, "ridge_flops_per_byte": None, "bound": None,
                           "fraction_of_roofline": None, "peak_flops_per_s": peak_flops,
                           "peak_bytes_per_s": peak_bytes_per_s}
    if flops is not None and nbytes:
        out["intensity_flops_per_byte"] = flops / nbytes
    if peak_flops and peak_bytes_per_s:
        out["ridge_flops_per_byte"] = peak_flops / peak_bytes_per_s
        if out["intensity_flops_per_byte"] is not None:
            out["bound"] = "compute" if out["intensity_flops_per_byte"] >= out["ridge_flops_per_byte"] else "memory"
    if seconds and seconds > 0:
        if flops is not None:
            out["achieved_flops_per_s"] = flops / seconds
        if nbytes is not None:
            out["achieved_bytes_per_s"] = nbytes / seconds
        if out["bound"] == "compute" and out["achieved_flops_per_s"] is not None:
            out["fraction_of_roofline"] = out["achieved_flops_per_s"] / peak_flops
        elif out["bound"] == "memory" and out["achieved_bytes_per_s"] is not None:
            out["fraction_of_roofline"] = out["achieved_bytes_per_s"] / peak_bytes_per_s
    return out
