"""Interpret mode is not a fix: a confined request notes every pallas_call that asks for it.

``interpret=True`` (or ``pltpu.InterpretParams(...)``) makes a ``pallas_call`` run as plain JAX: it
then "lowers" and "compiles" for the TPU while nothing of the kernel was lowered, and an optimize
candidate that asks for it is estimated as if it were a kernel. A model's candidate must not pass
that way, whatever form the request takes (``interpret=True`` written in, a default changed to
``True``, ``**{"interpret": True}``, ``functools.partial(pl.pallas_call, interpret=True)``): so the
decision is made from what the worker traced, not from the text.

``watching(user_files)`` wraps jax's internal ``_pallas_call`` (every ``pl.pallas_call`` ends
there, with the argument as the caller gave it; pallasite's own interception patches the public
name, so the two never meet) and ``mpmd.mpmd_map`` (``pl.kernel``) for the duration of one
request, and records each call whose ``interpret`` is set. The interpret mode pallasite itself
forces for tier 3 and the test runs (``pltpu.force_tpu_interpret_mode``) is merged after this
point, so it is never mistaken for the candidate's. ``judge(result, seen)`` then turns the result
of the request into a refusal: a ``check`` gets an error record (code PLS114, at the call's line)
and its compiler tiers marked failed; ``time``/``profile`` are rejected (trick ``interpret_mode``);
``estimate`` configurations become trace errors; ``verify`` an error.

Worker side: imports jax (lazily) and runner modules only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator
from typing import Any

from ...wire import messages

CODE = "PLS114"
TRICK = "interpret_mode"
ORIGIN = "pallasite runner"  # who spoke: pallasite, from what the worker traced (not the compiler)


@dataclasses.dataclass(frozen=True)
class InterpretCall:
    kernel: str
    value: str  # repr of the interpret argument
    file: str | None
    line: int | None  # 1-based, in a user file

    def sentence(self) -> str:
        return (f"the pallas_call of {self.kernel} asks for interpret mode (interpret={self.value}): it would run as "
                "plain JAX on any chip and nothing of it is lowered or compiled for the TPU; a candidate must "
                "not set interpret")


def _is_set(value: Any) -> bool:
    try:
        return value is not None and value is not False and bool(value)
    except Exception:  # noqa: BLE001 - an object without truth: it was given, so it asks for something
        return True


def _forced() -> Any:
    """The interpret mode pallasite forced for this run (tier 3, the test runs), if any."""
    try:
        from jax._src import config

        return config.pallas_tpu_interpret_mode_context_manager.value
    except Exception:  # noqa: BLE001
        return None


def _site(user_files: tuple[str, ...]) -> tuple[str | None, int | None]:
    targets = {os.path.realpath(f) for f in user_files}
    frame = sys._getframe(2)
    while frame is not None:
        if os.path.realpath(frame.f_code.co_filename) in targets:
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None, None


def _name(kernel: Any) -> str:
    while hasattr(kernel, "func"):  # functools.partial
        kernel = kernel.func
    return getattr(kernel, "__name__", None) or type(kernel).__name__


@contextlib.contextmanager
def watching(user_files: tuple[str, ...]) -> Iterator[list[InterpretCall]]:
    """Record every pallas_call (and ``pl.kernel``) made inside the block that asks for interpret mode."""
    seen: list[InterpretCall] = []
    try:
        from jax._src.pallas import mpmd
        from jax._src.pallas import pallas_call as module
    except Exception:  # noqa: BLE001 - no jax here: nothing can run a kernel either
        yield seen
        return

    def note(kernel: Any, interpret: Any) -> None:
        forced = _forced()
        if _is_set(interpret) and not (forced is not None and interpret is forced):
            file, line = _site(user_files)
            seen.append(InterpretCall(_name(kernel), repr(interpret)[:200], file, line))

    real_call, real_map = module._pallas_call, getattr(mpmd, "mpmd_map", None)

    def pallas_call(kernel: Any, *args: Any, interpret: Any = False, **kwargs: Any) -> Any:
        note(kernel, interpret)
        return real_call(kernel, *args, interpret=interpret, **kwargs)

    def mpmd_map(meshes_and_fns: Any, *args: Any, interpret: Any = False, **kwargs: Any) -> Any:
        try:
            kernel = list(meshes_and_fns)[0][1]
        except Exception:  # noqa: BLE001 - jax says what is wrong with it
            kernel = meshes_and_fns
        note(kernel, interpret)
        return real_map(meshes_and_fns, *args, interpret=interpret, **kwargs)

    global _recording
    module._pallas_call = pallas_call
    if real_map is not None:
        mpmd.mpmd_map = mpmd_map
    outer, _recording = _recording, seen
    try:
        yield seen
    finally:
        _recording = outer
        module._pallas_call = real_call
        if real_map is not None:
            mpmd.mpmd_map = real_map


_recording: list[InterpretCall] | None = None  # the list ``watching`` records into now


def recorded() -> list[dict[str, Any]]:
    """What ``watching`` recorded so far in this process, as data (the candidate process of a judged
    request sends it to its judge: runner/judging/judge.py)."""
    return [dataclasses.asdict(c) for c in _recording or ()]


def add_recorded(calls: Any) -> None:
    """Record ``calls`` (``recorded()`` of another process) as if seen here."""
    if _recording is None or not isinstance(calls, list):
        return
    for call in calls:
        if isinstance(call, dict):
            _recording.append(InterpretCall(str(call.get("kernel")), str(call.get("value"))[:200],
                                            call.get("file") if isinstance(call.get("file"), str) else None,
                                            call.get("line") if isinstance(call.get("line"), int) else None))


def user_files(params: Any) -> tuple[str, ...]:
    """The files a request carries (the candidate and its modules): where a call's line is looked for."""
    source = getattr(params, "source", None)
    if not isinstance(source, messages.Sources):
        return ()
    return (source.file.path, *(m.path for m in source.modules))


def judge(result: Any, seen: list[InterpretCall]) -> Any:
    """The op's result refused for the interpret-mode calls ``seen`` (unchanged when there are none)."""
    if not seen:
        return result
    calls = list({(c.kernel, c.file, c.line): c for c in seen}.values())
    said = "; ".join(c.sentence() for c in calls[:3])
    if isinstance(result, messages.CheckResult):
        records = tuple(_record(c) for c in calls)
        entries = tuple(dataclasses.replace(e, tiers=tuple(
            dataclasses.replace(t, state=messages.TierState.ERROR, reason="") if t.tier in (1, 2) else t
            for t in e.tiers)) for e in result.entries)
        return dataclasses.replace(result, errors=result.errors + records, entries=entries)
    if isinstance(result, messages.TimeResult):
        trick = messages.Trick(TRICK, f"rejected: {said}", {"calls": [dataclasses.asdict(c) for c in calls]})
        return dataclasses.replace(result, verdict="rejected", rejections=(trick, *result.rejections),
                                   candidate=None, reference=None, speedup=None)
    if isinstance(result, messages.EstimateResult):
        return dataclasses.replace(result, estimates=tuple(
            dataclasses.replace(e, status="trace_error", seconds=None, error=said) for e in result.estimates))
    return result


def _record(call: InterpretCall) -> messages.ErrorRecord:
    sentence = call.sentence()
    frames = (messages.Frame(file=call.file, line=call.line),) if call.file and call.line else ()
    mentions = (messages.Mention(line=call.line),) if call.line else ()
    traced = f"traced: pallas_call({call.kernel}, ..., interpret={call.value})"
    return messages.ErrorRecord(stage="tier 1", type="InterpretMode", sentence=sentence, message=traced,
                                frames=frames, mentions=mentions, tier=1, code=CODE, origin=ORIGIN)
