"""The checker's zero-configuration path: shapes read from the file when it states no task.

``inference_for`` runs ``analysis/inferred_inputs.py`` defensively (never raises); the tasks go to
the worker as the check op's ``inferred`` param (``inferred_calls``); ``inferred_note`` is the note that says, for each
entry checked this way, which line its shapes came from and what they are; ``fallback_reasons``
is what PLS900 adds when nothing could be inferred.
"""

from __future__ import annotations

import warnings

from ..analysis.inferred_inputs import Inference, InferredTask, infer_tasks
from ..analysis.source import Source
from ..wire.messages import InferredCall, InferredInput


def inference_for(text: str, path: str | None) -> Inference:
    """The inferred tasks of a file (an empty inference if reading it failed)."""
    try:
        return infer_tasks(Source(text))
    except Exception as err:  # noqa: BLE001 - a bug here must not stop the check: fall back
        warnings.warn(f"pallasite shape inference failed ({type(err).__name__}: {err})", RuntimeWarning, stacklevel=2)
        return Inference((), (f"shapes not inferred: the reader failed ({type(err).__name__}: {err})",))


def inferred_calls(inference: Inference) -> tuple[InferredCall, ...]:
    """The inferred tasks as the check op's ``inferred`` param (wire/messages.py)."""
    def arg(a) -> InferredInput:
        return InferredInput(shape=a.shape, dtype=a.dtype) if a.is_array else InferredInput(value=a.value)

    return tuple(InferredCall(entry=t.entry, line=t.line, args=tuple(arg(a) for a in t.args),
                              kwargs={k: arg(a) for k, a in t.kwargs}) for t in inference.tasks)


def inferred_note(task: InferredTask) -> str:
    return (f"{task.entry}: checked with shapes from line {task.line}: {task.describe()} "
            "(no example_inputs() in the file; add one to check other shapes)")


def fallback_reasons(inference: Inference) -> str:
    """The sentence PLS900 adds when shapes could not be inferred ('' when there is no reason)."""
    if not inference.notes:
        return ""
    return " Shapes could not be read from the file: " + "; ".join(n.split(": ", 1)[-1] if n.startswith(
        "shapes not inferred: ") else n.removeprefix("shapes not inferred for ") for n in inference.notes[:3]) + "."
