"""A store the lowering rejects for its dtype, said at the declaration that gave the ref its dtype
when that declaration is the odd one out (client side, no jax).

``Invalid dtype for `swap`. Ref dtype: bfloat16. Value dtype: float32`` is raised at the store, which
can be hundreds of lines from the ``out_shape`` (or ``scratch_shapes`` entry) the user typed. Two
mistakes give it: the declaration is wrong (an ``out_shape`` changed to bfloat16 in a kernel that
computes in float32: every input is float32, the value stored is float32, only the declaration
differs), or the store is (a ``.astype(o_ref.dtype)`` left out after an accumulator of another
dtype: the declaration matches the inputs). ``store_declaration`` tells them apart by the dtypes
of the call's buffers as the running program saw them (``ReachedCall.buffers``): the value has one
of the inputs' dtypes and the declaration none of them, or the declaration is the one output of
several declared unlike the others (which all have the value's dtype), or the inputs have mixed float
dtypes and the value has the first input's (the data's: bfloat16 activations beside float32 weights)
while the output is declared as another's -> the declaration is the
place and the store related; otherwise the store stays the place and the declaration is related.
Without the worker's record of the buffers, the store stays and the declaration is related.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ...analysis.types import Related, Span


def store_declaration(site: Any, ref: str, ref_dtype: str, value_dtype: str, span: Span, reached: Any,
                      output_place: Callable[[int], Span | None]) -> tuple[Span, tuple[Related, ...], str] | None:
    """(place, related, sentence) for a store of ``value_dtype`` into the kernel parameter ``ref``
    (declared ``ref_dtype``) at ``span``; ``output_place(i)`` is where output ``i``'s dtype is written.
    None when ``ref`` cannot be matched to an output or scratch buffer of ``site``."""
    declared = _declaration(site, ref, output_place)
    if declared is None:
        return None
    where, what = declared
    inputs = buffer_dtypes(site, reached, "in_specs")
    siblings = [d for i, d in enumerate(buffer_dtypes(site, reached, "out_specs", each=True)) if what != f"out_shape[{i}]"]
    store = Related(span, f"the kernel stores {value_dtype} values into {ref} ({ref_dtype}) here")
    if inputs and value_dtype in inputs and ref_dtype not in inputs:
        said = (f"{ref}'s dtype is declared {ref_dtype} here ({what}), but the kernel computes {value_dtype}: its "
                f"inputs are {', '.join(sorted(inputs))}; declare {value_dtype}, or cast the value where it is stored")
        return where, (store,), said
    first = buffer_dtypes(site, reached, "in_specs", each=True)[:1]
    if first and value_dtype == first[0] and ref_dtype != first[0] and _floats(value_dtype, ref_dtype) \
            and what.startswith("out_shape"):
        # inputs of mixed dtypes (bfloat16 activations, float32 weights): the value has the data's dtype,
        # the first input's, and the output is declared as another input's
        said = (f"{ref}'s dtype is declared {ref_dtype} here ({what}), but the kernel computes {value_dtype}, the "
                f"dtype of its first input (the others: {', '.join(sorted(inputs - {value_dtype})) or 'none'}); "
                f"declare {value_dtype}, or cast the value where it is stored")
        return where, (store,), said
    if len(siblings) >= 2 and set(siblings) == {value_dtype} and ref_dtype != value_dtype:
        said = (f"{ref}'s dtype is declared {ref_dtype} here ({what}), unlike the call's other outputs, all "
                f"{value_dtype} like the value stored; declare {value_dtype}, or cast the value where it is stored")
        return where, (store,), said
    said = (f"{ref} is declared {ref_dtype} ({what}): cast the value at the store (`.astype({ref}.dtype)`), or "
            f"declare {value_dtype} there")
    return span, (Related(where, f"{ref}'s dtype ({ref_dtype}) is declared here"),), said


def _floats(*names: str) -> bool:
    return all(n.startswith(("float", "bfloat")) for n in names)


def _declaration(site: Any, ref: str, output_place: Callable[[int], Span | None]) -> tuple[Span, str] | None:
    """Where the buffer the kernel parameter ``ref`` names gets its dtype, and what that place is."""
    params = tuple(getattr(site, "kernel_params", None) or ())
    operands, outputs = getattr(site, "operands", None), getattr(site, "out_shape_count", None)
    scratch = tuple(getattr(site, "scratch_shapes", None) or ())
    if outputs is None and operands is not None:  # an out_shape a helper returns: what the parameters leave
        outputs = len(params) - len(operands) - len(scratch) if len(params) > len(operands) + len(scratch) else None
    if operands is not None:
        first = len(operands)
    elif outputs is not None and len(params) >= outputs + len(scratch):  # operands unpacked (`(*args)`): from the end
        first = len(params) - outputs - len(scratch)
    else:
        return None
    if ref not in params or outputs is None:
        return None
    index = params.index(ref) - first
    if 0 <= index < outputs:
        place = output_place(index)
        return (place, f"out_shape[{index}]") if place is not None else None
    index -= outputs
    if 0 <= index < len(scratch):
        return scratch[index].span, f"scratch_shapes[{index}]"
    return None


def buffer_dtypes(site: Any, reached: Any, role: str, *, each: bool = False) -> Any:
    """The dtypes of ``site``'s blocked ``role`` buffers (``in_specs``/``out_specs``) as the running program
    made the call: a set, or with ``each`` a list in order (empty: unknown)."""
    from .reach import site_reached

    calls: list[Mapping[str, Any]] = [c for c in reached or () if c.get("buffers") and site_reached(site, [c])]
    found = sorted(((int(b.get("index", 0)), str(b["dtype"])) for c in calls[:1] for b in c["buffers"]
                    if b.get("role") == role))
    return [d for _, d in found] if each else {d for _, d in found}
