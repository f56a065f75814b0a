"""What one judging phase's worker reply means, and the frozen tests spliced into a candidate.

Used by the one ``Judge`` (engine/judge.py) and nothing else that judges:

- ``frozen_parts(original)``, ``freeze(candidate, frozen)``, ``unfreeze(text)``: the original file's test
  definitions (inputs, reference, tolerances), appended over a candidate's own so it cannot change them;
- ``test_result(reply)``: the test phase's ``TestResult`` from a ``time`` reply (ok / wrong with the
  evidence / not verified with why), ``tested_where`` the words for where it ran;
- ``UNFINISHED``: the findings that mean a check did not finish (not compiled for the chip, never an error);
- ``lower_bound(estimate)`` and ``profile_text(estimate)``: what the cost model left out, and its breakdown.

Client side: no JAX.
"""

from __future__ import annotations

import ast
from typing import Any

from ..analysis.verdict import JudgedBy, TestResult

from .guards import TEST_NAMES

FROZEN_MARK = "# --- frozen tests (pallasite optimize: from the original file) ---"
# Findings that mean the check did not finish (a crash, a time or memory limit): the compile phase fails.
UNFINISHED = ("PLS205", "PLS902", "PLS903", "PLS904")


def frozen_parts(original: str, names: tuple[str, ...] = TEST_NAMES) -> dict[str, str]:
    """The original file's test definitions (top-level ``def``/assignment of ``names``), by name."""
    tree = ast.parse(original)
    lines = original.splitlines(keepends=True)
    out = {}
    for node in tree.body:
        defined = [node.name] if isinstance(node, (ast.FunctionDef,)) else \
            [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        for name in defined:
            if name in names:
                start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno]) - 1
                out[name] = "".join(lines[start:node.end_lineno])
    return out


def freeze(candidate: str, frozen: dict[str, str]) -> str:
    """The candidate with the original's test definitions: its own versions are dropped and the
    originals appended (the last definition wins in Python)."""
    if not frozen:
        return candidate
    return candidate.rstrip("\n") + f"\n\n\n{FROZEN_MARK}\n" + \
        "\n\n".join(text.rstrip("\n") for text in frozen.values()) + "\n"


def unfreeze(text: str) -> str:
    """The candidate's own part of a frozen text (what ``freeze`` appended dropped)."""
    head, mark, _ = text.partition(f"\n\n\n{FROZEN_MARK}\n")
    return head + "\n" if mark else text


def _sig(inputs: Any) -> str:
    return ", ".join(f"{dtype}{list(shape)}" for shape, dtype in inputs or ())


def test_result(reply: Any, where: str = "") -> TestResult:
    """The test phase's typed result from a ``time`` reply: "ok" (where and at which shapes), "wrong"
    (the integrity checks rejected it: the evidence), or "not verified" (the run could not run or
    finish: a crash, a limit, too big for interpret mode; never "wrong")."""
    if not reply.ok:
        return TestResult.not_verified(f"the test run failed ({reply.status}): {str(reply.why)[:300]}")
    result = reply.result
    if result.verdict == "error":
        error = str(result.error or result.verdict)  # the judge's own "not verified/checked: why" is said whole
        return TestResult.not_verified(error[:800] if error.startswith(("not verified", "not checked")) else
                                       f"the test could not finish: {error[:300]}")
    if result.verdict != "ok":
        tricks = "; ".join(f"{t.trick}: {t.message}" for t in result.rejections) or (result.error or result.verdict)
        return TestResult.wrong(str(tricks)[:2000], verified_at=(result.checks or {}).get("verified_at"))
    checks = result.checks or {}
    full = checks.get("full_inputs")
    at = checks.get("verified_at") or (f"{_sig(checks.get('inputs'))} of {_sig(full)}" if full else None)
    if (checks.get("task_size") or {}).get("checked"):
        at = None  # also run at the task's own size (runner/judging/correct.at_task_size)
    elif at and checks.get("size_dependent"):
        at = f"{at} only: {checks['size_dependent']}"
    return TestResult.ok(where or tested_where(result.provenance, checks), verified_at=at)


test_result.__test__ = False  # not a pytest test


def tested_where(provenance: str | None, checks: dict) -> str:
    """Where and at which shapes the tests ran, for the phase summary (reduced shapes say so)."""
    where = "interpret mode on CPU" if provenance == "interpret" else (provenance or "?")
    text = f"{where} at {_sig(checks.get('inputs'))}"
    if checks.get("full_inputs"):
        text += f", reduced from {_sig(checks['full_inputs'])}"
    extra = checks.get("extra_shape") or {}
    if extra.get("checked"):
        text += f"; second shape {_sig(extra.get('inputs'))}"
    elif extra.get("why"):
        text += f"; no second shape ({extra['why']})"
    return text


def judged_by(reply: Any) -> JudgedBy:
    """Who compared and timed the candidate, as the worker's ``time`` reply says (runner/judging/judge.py):
    the judge, or unknown (a failed run, a reply that does not say)."""
    result = getattr(reply, "result", None) if getattr(reply, "ok", False) else None
    return JudgedBy.of(getattr(result, "judged_by", None))


def lower_bound(est: Any) -> bool:
    """Whether the cost model counted part of the kernel's memory traffic or work as a lower bound (then
    its time is a lower bound and a speedup from it an upper bound). The kernel's own DMAs (pl.ANY operands)
    are counted, by the bytes they move (issue 56: before, their notes alone made every such kernel a lower
    bound); only a count the model itself calls a lower bound makes one."""
    low = ("lower bound", "bounded both ways")
    return any(call.dma_count in low or call.flops_count in low for call in est.calls)


def profile_text(est: Any) -> str:
    """The cost model's breakdown of one estimate, as the planner and the user read it."""
    def us(s: float | None) -> str:
        return f"{s * 1e6:.2f} us" if s is not None else "?"

    lines = [f"{est.label}: {us(est.seconds)}, {est.bound}-bound (compute {us(est.compute_s)}, memory "
             f"{us(est.memory_s)}, per-step overhead {us(est.overhead_s)})"]
    for call in est.calls[:4]:
        lines.append(f"  {call.kernel}: grid {tuple(call.grid)} ({call.steps} steps), VMEM {call.vmem_bytes / 1024:.0f} KiB"
                     f", HBM traffic {call.hbm_bytes / 2**20:.2f} MiB, {call.flops:.3g} flops ({call.mxu_flops:.3g} on the "
                     f"MXU, efficiency {call.mxu_efficiency:.2f})" + (f"; {'; '.join(call.notes[:2])}" if call.notes else ""))
    return "\n".join(lines)


def json_short(data: dict) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in data.items()
                     if v is not None and not isinstance(v, (dict, list)))[:400]
