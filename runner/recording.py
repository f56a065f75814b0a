"""Running the user's code with every pallas_call recorded and compiled later, not run (worker side).

Importing a file runs its top-level code, and a file written for a TPU (jax's guides, a notebook
pasted into a script) calls its kernels there without ``interpret``: on the worker's CPU jax would
stop at the first one ("Only interpret mode is supported on CPU backend"). ``recording(path)``
runs such code as on the target TPU instead: every ``pallas_call`` is recorded with the shapes it
was applied to (``runner/intercept.py``), and one that asks for no interpreter is not run — its
outputs are stand-ins (zeros of its ``out_shape``) so the code goes on; the compiler tiers then
check each distinct recorded call (``runner/tasks/tasks_recorded.py``). A call the file runs in interpret
mode itself runs as it asks. With ``stand_ins=False`` (script mode with tier 3 asked for) calls
that ask for no interpreter run in CPU interpret mode instead, as the script's own tier-3 run.
``runner/target_chip.py`` (the caller's) makes the chip and backend queries answer as the target.

jax's trace caches are cleared before (a function traced by an earlier request would not call
``pallas_call`` again) and after a recording that stood in for a call (a jitted function traced
with stand-ins must not be reused when the tiers trace it for real).

A statement whose failure the stand-ins may explain — an ``assert`` (or ``np.testing``) on the
value of a kernel that was not run — is not the file's fault: ``stand_in_failure`` tells it apart.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

import jax

from . import errors as errors_mod
from .intercept import RecordedCall, intercept_pallas_calls


MAX_CALLS = 32  # distinct calls checked at most (a sweep over many shapes checks its first ones)


@dataclass
class Recording:
    """What one run of the user's code did: its pallas_calls, in order, and the top-level
    statements that raised (1-based line, exception) when the run went on past them."""

    calls: list[RecordedCall] = field(default_factory=list)
    failures: list[tuple[int, BaseException]] = field(default_factory=list)

    @property
    def applied(self) -> list[RecordedCall]:
        """The calls whose function was applied to operands (those have shapes to check)."""
        return [c for c in self.calls if c.operands is not None]


def stood_in(calls: list[RecordedCall]) -> bool:
    """Whether some call's outputs were stand-ins (it was applied, and not run)."""
    return any(c.stand_in and c.applied for c in calls)


def not_interpreted(kwargs: dict[str, Any]) -> bool:
    """A TPU call on a CPU worker: it asks for no interpreter (nor runs under
    ``force_tpu_interpret_mode``), and there is no TPU here to run it on."""
    from jax._src import config

    forced = getattr(config, "pallas_tpu_interpret_mode_context_manager", None)
    return (jax.default_backend() == "cpu" and not kwargs.get("interpret")
            and not (forced is not None and forced.value))


def interpret_here(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Run a call that asks for no interpreter in CPU interpret mode (there is no TPU here)."""
    if not kwargs.get("interpret") and jax.default_backend() == "cpu":
        kwargs["interpret"] = True
    return kwargs


@contextlib.contextmanager
def recording(path: str, *, stand_ins: bool = True) -> Iterator[Recording]:
    """Record every pallas_call made in the block (its location: the innermost frame in ``path``)."""
    run = Recording()
    jax.clear_caches()
    try:
        with intercept_pallas_calls(user_files=(path,), stand_in=not_interpreted if stand_ins else None,
                                    rewrite=None if stand_ins else interpret_here) as calls:
            run.calls = calls
            yield run
    finally:
        if stood_in(run.calls):
            jax.clear_caches()


def stand_in_failure(error: BaseException, calls: list[RecordedCall]) -> bool:
    """Whether ``error`` may come from the stand-ins: an assertion about values, raised after a
    kernel's outputs were stood in for (zeros cannot pass a check of the kernel's results)."""
    return isinstance(error, AssertionError) and stood_in(calls)


def dedupe(calls: list[RecordedCall]) -> list[RecordedCall]:
    """The distinct calls (same kernel, shapes and parameters counted once), in call order."""
    seen: dict[tuple[Any, ...], RecordedCall] = {}
    for call in calls:
        seen.setdefault(call.key(), call)
    return list(seen.values())


def call_name(call: RecordedCall) -> str:
    """The function holding the call (the kernel's name for a call at module level)."""
    return call.function if call.function and call.function != "<module>" else call.kernel_name


def call_record(exc: BaseException, path: str, tier: int, call: RecordedCall) -> dict[str, Any]:
    """The errors.py record for a tier run on a recorded call, plus the pallas_call's line (our
    wrapper, not the user's code, called it)."""
    rec = errors_mod.record(exc, path, stage=f"tier {tier}")
    rec["tier"] = tier
    if call.line is not None and call.file and os.path.realpath(call.file) == os.path.realpath(path):
        rec["frames"].insert(0, {"file": path, "line": call.line, "function": call.function or "<module>"})
    rec["call"] = call.describe()
    return rec


def reach_record(call: RecordedCall, path: str) -> dict[str, Any]:
    """What the call reached, as ``runner/reach.py`` says it for a traced entry."""
    from .reach import block_buffers, elsewhere, scalar_prefetch, traced_grid, vmem_bytes

    same = call.kernel_file is not None and os.path.realpath(call.kernel_file) == os.path.realpath(path)
    buffers = block_buffers(call)
    return {"lines": list(call.stack_lines), "kernel_line": call.kernel_line if same else None,
            "kernel": call.kernel_name, **elsewhere(call, path), "buffers": buffers,
            "scalar_prefetch": scalar_prefetch(call), "vmem_bytes": vmem_bytes(buffers), **traced_grid(call)}


def outside_its_axes(entry: dict[str, Any], call: RecordedCall) -> str | None:
    """A call made inside ``shard_map`` (or a named ``vmap``) whose kernel uses those axes (``axis_index``,
    a collective) cannot be compiled again outside them: its "unbound axis name" failure is not the
    kernel's, so the tier reads "skipped" with why (returned: the later tiers skip for it too), and no
    finding is made."""
    unbound = [r for r in entry["errors"] if "unbound axis name" in f"{r.get('message')} {r.get('sentence')}"]
    if not call.axes or not unbound:
        return None
    axes = ", ".join(f"{name!r} ({size})" for name, size in call.axes.items())
    why = (f"skipped: the kernel uses the named axes it was called under ({axes}, shard_map); compiling it "
           "outside them is not supported yet")
    for rec in unbound:
        entry["errors"].remove(rec)
    for tier, state in entry["tiers"].items():
        if state == "error" or state.startswith("skipped: tier"):
            entry["tiers"][tier] = why
    return why


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def describe_lines(calls: list[RecordedCall]) -> str:
    lines = sorted({c.line for c in calls if c.line is not None})
    return ("line " if len(lines) == 1 else "lines ") + ", ".join(map(str, lines[:6])) + (", ..." if len(lines) > 6 else "")
