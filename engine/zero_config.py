"""The checker's zero-configuration path: shapes read from the file when it states no task.

``inference_for`` runs ``analysis/inferred_inputs.py`` defensively (never raises); the tasks go to
the worker as the check op's ``inferred`` param (``inferred_calls``); ``inferred_note`` is the note that says, for each
entry checked this way, which line its shapes came from and what they are; ``fallback_reasons``
is what PLS900 adds when nothing could be inferred.

``callers_for`` finds the workspace's callers of a file (``analysis/callers.py``, bounded, never raises),
sent as the check op's ``callers`` (``caller_refs``); ``one_line_hint`` is PLS900's last sentence: how to
give the shapes in one line, and what was searched when no caller was found.
"""

from __future__ import annotations

import warnings

from ..analysis.callers import CallerSearch, find_callers, workspace_root
from ..analysis.inferred_inputs import Inference, InferredTask, infer_tasks
from ..analysis.source import Source
from ..wire.messages import CallerRef, InferredCall, InferredInput

CALLER_TEXT_MAX = 2 * 2**20  # a caller's text sent with the request at most


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


def callers_for(path: str, root: str | None = None) -> CallerSearch | None:
    """The workspace's callers of ``path`` (None when the search itself failed: the check goes on without)."""
    try:
        return find_callers(path, root or workspace_root(path))
    except Exception as err:  # noqa: BLE001 - a bug here must not stop the check
        warnings.warn(f"pallasite caller search failed ({type(err).__name__}: {err})", RuntimeWarning, stacklevel=2)
        return None


def caller_refs(search: CallerSearch | None) -> tuple[CallerRef, ...]:
    """The callers as the check op's ``callers`` param, each with its text (the worker may be elsewhere)."""
    out = []
    for caller in search.callers if search is not None else ():
        try:
            with open(caller.path, encoding="utf-8", errors="replace") as f:
                text = f.read(CALLER_TEXT_MAX + 1)
        except OSError:
            continue
        out.append(CallerRef(path=caller.path, shown=caller.shown, alias=caller.alias, tests=caller.tests,
                             text=text if len(text) <= CALLER_TEXT_MAX else None))
    return tuple(out)


def one_line_hint(search: CallerSearch | None, entries: list[tuple[str, int]]) -> str:
    """PLS900's last sentence: what was searched for callers, and the one line that gives the shapes
    (``entries``: the file's public functions that reach a pallas_call, with their positional parameter count)."""
    if search is None:
        where = ""
    elif search.callers:
        where = f" Its callers in the workspace ({', '.join(c.shown for c in search.callers)}) made no call of it."
    else:
        where = f" No file of the workspace calls it ({search.describe()})."
    name, count = entries[0] if entries else ("your_entry", 1)
    structs = ", ".join(["jax.ShapeDtypeStruct((1024, 128), jnp.float32)"] * max(1, count))
    line = f"def example_inputs(): return ({structs},)"
    more = f"; with several entry functions add PALLASITE_ENTRY = \"{name}\"" if len(entries) > 1 else ""
    return (f"{where} To give the shapes in one line, add `{line}` (one ShapeDtypeStruct per argument of "
            f"{name}, with your shapes{more}), or write a test that calls {name}.")


def public_entries(text: str, functions: list[str]) -> list[tuple[str, int]]:
    """(name, positional parameters) of the public module-level functions among ``functions`` (those
    holding the file's pallas_calls), in the file's order."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    wanted = set(functions)
    return [(node.name, len(node.args.posonlyargs) + len(node.args.args) - len(node.args.defaults))
            for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name in wanted and not node.name.startswith("_")]
