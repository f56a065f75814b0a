"""`pallasite time` / `pallasite profile` output: text for people, versioned JSON for tools, and
the one-line summaries hovers and lenses show. Every number says where it came from.

JSON (version 1)::

    {"version": 1, "op": "time" | "profile", "path": str, "status": "ok" | "rejected" | "error",
     "backend": {"where": "local" | "ssh:HOST" | "ray:ADDRESS (node H)", "worker": str | null,
                 "versions": {...} | null, "devices": [str], "warnings": [str]},
     "result": <the worker's time/profile result (docs/worker-protocol.md)> | null,
     "error": null | str}

New keys may be added within version 1; renaming or removing one bumps the version.
"""

from __future__ import annotations

import json
from typing import Any

JSON_VERSION = 1


def status_of(run: Any) -> str:
    result = run.result
    if result is None or result.get("verdict") == "error":
        return "error"
    if result.get("verdict") == "rejected":
        return "rejected"
    candidate = result.get("candidate")  # a device time below the physical floor (engine/device_floor.py)
    return "implausible" if isinstance(candidate, dict) and candidate.get("status") == "implausible" else "ok"


def error_text(run: Any) -> str | None:
    if run.result is None:
        return run.reply.message or run.reply.status
    return run.result.get("error")


def to_json_text(run: Any, path: str) -> str:
    hello = run.handshake
    doc = {
        "version": JSON_VERSION, "op": run.op, "path": path, "status": status_of(run),
        "backend": {"where": run.where, "worker": run.describe_worker() if hello is not None else None,
                    "versions": ({k: getattr(hello, k, None) for k in ("pallasite", "python", "jax", "jaxlib", "libtpu")}
                                 if hello is not None else None),
                    "devices": list(getattr(hello, "devices", ()) or ()), "warnings": list(run.warnings)},
        "result": run.result, "error": error_text(run),
    }
    return json.dumps(doc, indent=2, default=str)


def duration(ns: float | None) -> str:
    if ns is None:
        return "?"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def rate(value: float | None, unit: str) -> str:
    if value is None:
        return "?"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def label(measurement: dict[str, Any]) -> str:
    """Where a time came from, in words that never pass CPU interpret time off as TPU time."""
    if measurement.get("provenance") == "device":
        return f"device time on {measurement.get('device_kind')}"
    if measurement.get("provenance") == "interpret":
        return "CPU interpret mode: not TPU time"
    if measurement.get("provenance") == "host":
        return "XLA on the host CPU: not TPU time"
    return f"estimate for {measurement.get('device_kind')}"


def speedup_text(result: dict[str, Any], *, short: bool = False) -> str:
    """", 1.23x vs the XLA reference (device (TPU v6 lite))" when both sides are device timings of the
    same kind (analysis/verdict.speedup); else the refusal (interpret mode, host clock: never a speedup)."""
    from ...analysis.verdict import timing_of, try_speedup

    cand, ref = result.get("candidate") or {}, result.get("reference") or {}
    s, why = try_speedup(timing_of(ref), timing_of(cand), baseline_name="the XLA reference")
    if s is None:
        return "" if short else f", {why}"
    if short:
        return f", {s.value:.2f}x vs the XLA reference"
    baseline = (result.get("speedup") or {}).get("baseline") or "the XLA reference"
    return f", speedup {s.value:.3g}x against {baseline}"


def summary_line(result: dict[str, Any]) -> str:
    """One line for a lens or hover: the verdict, the median with its provenance, the speedup."""
    if result.get("verdict") == "error":
        return f"not timed: {result.get('error')}"
    if result.get("verdict") == "rejected":
        tricks = ", ".join(r["trick"] for r in result.get("rejections", []))
        return f"rejected ({tricks})"
    cand = result.get("candidate") or {}
    line = f"{duration(cand.get('median_ns'))} ({label(cand)})"
    line += speedup_text(result, short=True)
    if result.get("flags"):
        line += " [" + ", ".join(f["trick"] for f in result["flags"]) + "]"
    return line


def to_text(run: Any, path: str) -> str:
    lines = [f"{path}: {run.op} on {run.where}"]
    if run.handshake is not None:
        lines.append(f"  {run.describe_worker()}")
    for warning in run.warnings:
        lines.append(f"  warning: {warning}")
    result = run.result
    if result is None or result.get("verdict") == "error":
        lines.append(f"  error: {error_text(run)}")
        return "\n".join(lines)
    lines.append(f"  entry {result.get('entry')} ({result.get('format')})"
                 + (f", config {result['config']}" if result.get("config") else ""))
    checks = result.get("checks") or {}
    if checks:
        kernels = (checks.get("module") or {}).get("kernels")  # read by the judge from the exported program
        lines.append(f"  checks: {kernels if kernels is not None else 'no'} Mosaic kernel(s) in the exported program; "
                     f"fresh random inputs (seed {checks.get('seed')}) {_shapes(checks.get('inputs'))}")
        extra = checks.get("extra_shape")
        if extra:
            lines.append("  second shape: " + (f"{extra.get('how')} {_shapes(extra.get('inputs'))}" if extra.get("checked")
                                               else f"not checked ({extra.get('why')})"))
    for rejection in result.get("rejections", []):
        lines.append(f"  REJECTED [{rejection['trick']}]: {rejection['message']}")
    if result.get("verdict") == "rejected":
        lines.append("  not timed: a rejected candidate has no time")
    if (result.get("candidate") or {}).get("status") == "implausible":
        lines.append(f"  IMPLAUSIBLE: {str(result['candidate'].get('error') or '').removeprefix('implausible: ')}; no speedup")
    if run.op == "time" and result.get("candidate") and result["candidate"].get("median_ns"):
        cand, ref = result["candidate"], result["reference"]
        spread = result.get("spread") or {}
        for role, m in (("candidate", cand), ("reference", ref)):
            s = spread.get(role) or {}
            lines.append(f"  {role:<9} median {duration(m.get('median_ns'))}  (p10 {duration(s.get('p10_ns'))}, "
                         f"p90 {duration(s.get('p90_ns'))}, {len(m.get('samples_ns') or [])} runs)  {label(m)}")
        lines.append(f"  method: {cand.get('method')}")
        lines.append(f"  {speedup_text(result).lstrip(', ') or 'no speedup'}")
    profile = result.get("profile")
    if profile:
        lines.extend(_profile_lines(profile))
    for flag in result.get("flags", []):
        lines.append(f"  FLAG [{flag['trick']}]: {flag['message']}")
    for note in result.get("notes", []):
        lines.append(f"  note: {note}")
    if result.get("trace"):
        where = "" if run.where == "local" else f" (on the worker's host, {run.where})"
        lines.append(f"  trace: {result['trace']}{where} (open it in XProf / TensorBoard)")
    return "\n".join(lines)


def _profile_lines(profile: dict[str, Any]) -> list[str]:
    out = [f"  time: {duration(profile.get('device_ns') or profile.get('wall_ns'))} per run ({profile.get('time_source')})"]
    if profile.get("profiler_overhead") is not None:
        out.append(f"  profiler overhead: {profile['profiler_overhead'] * 100:.0f}% (traced vs untraced wall clock)")
    for kernel in profile.get("kernels", [])[:10]:
        out.append(f"    {kernel['name']}: {duration(kernel['device_ns_per_run'])} per run ({kernel['events']} events)")
    roof = profile.get("roofline") or {}
    if roof:
        out.append(f"  work: {rate(roof.get('flops'), 'FLOP')} ({profile['work']['flops']}), "
                   f"{rate(roof.get('bytes'), 'B')} ({profile['work']['bytes']})")
        if roof.get("achieved_flops_per_s") is not None:
            out.append(f"  achieved: {rate(roof['achieved_flops_per_s'], 'FLOP/s')}, {rate(roof['achieved_bytes_per_s'], 'B/s')}"
                       + (f" = {roof['fraction_of_roofline'] * 100:.0f}% of the {profile.get('chip')} roofline"
                          if roof.get("fraction_of_roofline") is not None else ""))
        if roof.get("bound"):
            out.append(f"  bound: {roof['bound']} (intensity {roof['intensity_flops_per_byte']:.3g} FLOP/B, "
                       f"{profile.get('chip')} ridge {roof['ridge_flops_per_byte']:.3g} FLOP/B)")
    return out


def _shapes(signature: Any) -> str:
    if not signature:
        return ""
    return "[" + ", ".join(f"{dtype}{list(shape)}" for shape, dtype in signature) + "]"


def estimate_text(path: str, paired: Any) -> str:
    """`pallasite time --backend estimate` (and the MCP server's ``estimate``): a kernel and its reference
    priced by the cost model for the chip (engine/estimates.PairedEstimate), nothing run on a device."""
    def us(seconds):
        return "-" if seconds is None else f"{seconds * 1e6:.1f} us"

    lines = [f"{path}: {paired.label}: nothing ran on a device; the cost model's figures for the chip",
             f"  kernel     {us(paired.kernel_s)}" + (f" ({paired.kernel_bound}-bound)" if paired.kernel_bound else ""),
             f"  reference  {us(paired.reference_s)}" + (f" ({paired.reference_bound}-bound)"
                                                         if paired.reference_bound else "")]
    if paired.speedup is not None:
        lines.append(f"  speedup    {paired.speedup:.2f}x vs the reference ({paired.label})")
    if paired.caveat:
        lines.append(f"  note: {paired.caveat}")
    return "\n".join(lines)
