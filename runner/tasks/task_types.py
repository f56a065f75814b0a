"""What a task is, on the worker side: ``RuntimeTask`` (the entry, its inputs and what goes with it)
and ``TaskError`` (an invalid task definition, with the line that says where). Every task reader
(``tasks_runtime``, ``maxkernel``, ``tasks_kernelbench``, ``tasks_inferred``, ``tasks_recorded``)
builds on this module, so the readers and the dispatcher that picks among them import no circle."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import jax


class TaskError(Exception):
    """The task definition is invalid; ``line`` (1-based, in the user's file) says where."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


@dataclass
class RuntimeTask:
    """One entry ready to trace: the function, its abstract arguments, and what goes with it."""

    name: str
    entry: Callable[..., Any]
    inputs: Callable[..., Any] | None  # makes the positional arguments
    format: str = "native"
    reference: Callable[..., Any] | None = None
    tolerance: dict[str, float] | None = None
    tolerance_source: str | None = None  # where ``tolerance`` was stated, said in verdicts ("TOLERANCE in baseline.py")
    tunables: dict[str, list[int]] = field(default_factory=dict)
    line: int | None = None  # the entry's def line (1-based) when defined in the checked file
    config: dict[str, Any] | None = None  # JAXBench CONFIG
    call: Any = None  # the recorded pallas_call this task applies again (runner/tasks/tasks_recorded.py)
    called_from: tuple[str, int] | None = None  # (file, 1-based line) of the workspace's call it came from

    def abstract_args(self) -> tuple[Any, ...]:
        """The entry's positional arguments as a tuple of ShapeDtypeStruct pytrees."""
        if self.inputs is None:
            return ()
        known = getattr(self.inputs, "shapes", None)  # runner/concrete_inputs.ShapesOnly: computed once already
        if known is not None:
            return tuple(known) if isinstance(known, (list, tuple)) else (known,)
        try:
            try:
                shapes = jax.eval_shape(self.inputs)
            except Exception as exc:  # noqa: BLE001 - one that needs concrete values runs once (concrete_inputs.py)
                shapes = _concretely(self.inputs, exc)
        except Exception as exc:  # noqa: BLE001 - the user's inputs function failed
            raise TaskError(
                f"{_name(self.inputs)}() failed while computing the input shapes: {type(exc).__name__}: {exc}",
                _def_line(self.inputs),
            ) from exc
        if isinstance(shapes, list):
            shapes = tuple(shapes)
        if not isinstance(shapes, tuple):
            shapes = (shapes,)
        return shapes


def _concretely(inputs: Callable[..., Any], traced_error: Exception) -> Any:
    """The shapes of what ``inputs()`` returns when called, for an inputs function that cannot be traced
    abstractly (numpy on a jax array, a Python ``if`` on one: tpu-inference's ``Sparsifier`` builds its metadata
    with numpy); run once on the CPU device (``runner/concrete_inputs.py``). Any other error, or a call that
    fails too, is the tracing error."""
    from ..concrete_inputs import concrete_shapes, needs_concrete_values

    if not needs_concrete_values(traced_error):
        raise traced_error
    try:
        return concrete_shapes(inputs)
    except Exception:  # noqa: BLE001 - the abstract trace's error says more about the function
        raise traced_error from None


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", "inputs")


def _def_line(fn: Any) -> int | None:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return code.co_firstlineno if code is not None else None
