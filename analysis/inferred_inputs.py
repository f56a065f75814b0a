"""Zero-configuration shapes: example inputs read from the kernel file itself, never executed.

Most kernel files have no ``example_inputs()``, but many show their shapes: ``x = jnp.ones((M, K),
jnp.float32)`` handed to the entry in ``__main__``, a ``jax.ShapeDtypeStruct`` given to a lowering
helper, a benchmark that runs only ``if jax.default_backend() == "tpu":``. ``infer_tasks`` finds
calls of a module-level function that reaches a ``pallas_call`` (directly, or through ``jax.jit(f)``,
``jax.jit(f).lower``/``.trace``, ``f.lower``, ``jax.eval_shape(f, ...)``), made from outside the
kernel code (module level, ``__main__``, a ``main()``/benchmark function, every branch read), whose
arguments all resolve statically to arrays of known shape and dtype or to plain literals:

- ``jnp.ones/zeros/empty/full/arange/eye/*_like``, ``jnp.asarray/array``, ``jax.device_put``;
- ``jax.random.normal/uniform/randint/bernoulli/truncated_normal/...``;
- ``jax.ShapeDtypeStruct``; ``np.ones/zeros/...``, ``np.random.randn/rand/normal/...`` and
  ``numpy.random.Generator`` methods (64-bit results become 32-bit, as jax does without x64);
- ``.astype(dtype)``, ``.reshape(...)``, ``.T`` on one of those.

A name is followed to the latest binding before its use in the same function (or module), then
the enclosing ones (``analysis/static_values.py`` reads the values); a loop variable, an augmented
assignment or anything else uncertain stops the inference for that call. Each inferred task names the line its shapes came from. When nothing
can be inferred the reasons come back as notes, and the checker falls back to what it did before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from .callgraph import module_owners as _owners, owner_of as _owner, pallas_call_graph
from .resolve import call_arguments
from .source import Source, is_module_level, module_functions
from .static_values import MAX_DEPTH, NOT_LITERAL, Unresolved, binding, canonical_dtype, read_array, read_literal


@dataclass(frozen=True)
class InferredArg:
    """One argument of an inferred call: an array (``shape`` + ``dtype``) or a plain literal."""

    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    value: Any = None  # a literal (int, float, bool, str, None) when ``shape`` is None

    @property
    def is_array(self) -> bool:
        return self.shape is not None

    def describe(self) -> str:
        if self.is_array:
            return f"{self.dtype}[{','.join(str(d) for d in self.shape or ())}]"
        return repr(self.value)

    def to_json(self) -> dict[str, Any]:
        if self.is_array:
            return {"shape": list(self.shape or ()), "dtype": self.dtype}
        return {"value": self.value}


@dataclass(frozen=True)
class InferredTask:
    """An entry to check at the argument shapes of one call in the file (``line`` is 1-based)."""

    entry: str
    line: int
    args: tuple[InferredArg, ...]
    kwargs: tuple[tuple[str, InferredArg], ...] = ()

    def describe(self) -> str:
        parts = [a.describe() for a in self.args] + [f"{k}={a.describe()}" for k, a in self.kwargs]
        return f"{self.entry}({', '.join(parts)})"

    def to_json(self) -> dict[str, Any]:
        """The worker's form (``runner/tasks/tasks_runtime.py``, ``inferred`` in the check op's params)."""
        return {"entry": self.entry, "line": self.line, "args": [a.to_json() for a in self.args],
                "kwargs": {k: a.to_json() for k, a in self.kwargs}}


@dataclass(frozen=True)
class Inference:
    tasks: tuple[InferredTask, ...]
    notes: tuple[str, ...]  # why a call or a function got no task (for --verbose and PLS900)


def infer_tasks(source: Source) -> Inference:
    """The tasks the file's own calls imply, one per entry function, and why others got none."""
    functions = module_functions(source)
    owners = _owners(functions)
    reaching, calls = pallas_call_graph(source, functions, owners)
    if not reaching:
        return Inference((), ())
    found: dict[str, InferredTask] = {}
    failures: dict[str, str] = {}
    weak: dict[str, str] = {}  # failures of calls inside functions that reach pallas_call themselves
    for call in source.calls:
        target = _called_entry(source, call, reaching)
        if target is None:
            continue
        name, args_call, skip = target
        positional, keywords, _, splat = call_arguments(source, args_call)
        if len(positional) <= skip and not keywords and not splat:
            continue  # main(): a call with no inputs says nothing about shapes
        if name in found:
            continue
        # Inside kernel code the arguments are traced values, not example inputs: a call there
        # counts only when its arguments resolve anyway (a main() that reaches the kernel and
        # makes the inputs), and its failures say nothing.
        quiet = _owner(call, owners) in reaching
        if len([d for d in source.functions.get(name, ()) if is_module_level(d)]) > 1:
            if not quiet:
                failures.setdefault(name, f"`{name}` is defined more than once, so the call at line "
                                          f"{call.start_point[0] + 1} may not run the definition the worker sees")
            continue
        try:
            found[name] = _task(source, name, args_call, skip, call)
        except Unresolved as why:
            if not quiet:
                failures.setdefault(name, str(why))
            elif "no single binding" not in str(why):  # not a wrapper passing its own parameters on
                weak.setdefault(name, str(why))
    # an entry that another inferred entry calls is checked through it: one check per kernel path
    covered = {n for n in found for m in found if m != n and n in _closure(m, calls)}
    tasks = tuple(sorted((t for n, t in found.items() if n not in covered), key=lambda t: t.line))
    failures = failures or weak
    notes = tuple(f"shapes not inferred for {name}: {why}" for name, why in failures.items() if name not in found)
    if not tasks and not failures:
        public = sorted(n for n in reaching if not n.startswith("_"))
        if public:
            notes = (f"shapes not inferred: no call of {', '.join(public)} with arrays of static shape "
                     "was found in the file",)
    return Inference(tasks, notes)


# --------------------------------------------------------------------------- which calls


def _closure(name: str, calls: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    stack = [name]
    while stack:
        for callee in calls.get(stack.pop(), ()):
            if callee not in seen:
                seen.add(callee)
                stack.append(callee)
    return seen


def _called_entry(source: Source, call: Node, reaching: set[str]) -> tuple[str, Node, int] | None:
    """(entry name, the call whose arguments are the inputs, how many leading arguments to skip)."""
    fn = call.child_by_field_name("function")
    if fn is None:
        return None
    qual = source.qualname(fn) or ""
    if qual in ("jax.eval_shape",):  # jax.eval_shape(f, *args)
        positional, _, _, _ = call_arguments(source, call)
        name = _function_name(source, positional[0], reaching, call) if positional else None
        return (name, call, 1) if name else None
    if fn.type == "attribute" and source.node_text(fn.child_by_field_name("attribute")) in ("lower", "trace"):
        name = _function_name(source, fn.child_by_field_name("object"), reaching, call)
        return (name, call, 0) if name else None
    name = _function_name(source, fn, reaching, call)
    if name:
        return name, call, 0
    if qual.startswith(("jax", "functools", "numpy")) or (fn.type == "call"):
        return None  # jit/vmap/partial/shard_map/pallas_call wrap a function; they do not call it here
    positional, _, _, _ = call_arguments(source, call)
    for i, arg in enumerate(positional):  # a helper handed the function and its inputs: bench(f, x, y)
        name = _function_name(source, arg, reaching, call)
        if name:
            return name, call, i + 1
    return None


def _function_name(source: Source, node: Node | None, reaching: set[str], near: Node, depth: int = 0) -> str | None:
    """``f``, ``jax.jit(f, ...)`` or a name bound to one of them, when ``f`` reaches pallas_call."""
    if node is None or depth > MAX_DEPTH:
        return None
    if node.type == "identifier":
        name = source.node_text(node)
        if name in reaching:
            return name
        bound = binding(source, name, near)
        return _function_name(source, bound, reaching, near, depth + 1) if bound is not None else None
    if node.type == "call" and (source.qualname(node.child_by_field_name("function")) or "") in ("jax.jit",):
        positional, _, _, _ = call_arguments(source, node)
        return _function_name(source, positional[0], reaching, near, depth + 1) if positional else None
    return None


# --------------------------------------------------------------------------- arguments


def _task(source: Source, name: str, call: Node, skip: int, use: Node) -> InferredTask:
    positional, keywords, _, splat = call_arguments(source, call)
    line = call.start_point[0] + 1
    if splat:
        raise Unresolved(f"the call at line {line} spreads *args/**kwargs")
    args = tuple(_argument(source, node, use, f"argument {i + 1}") for i, node in enumerate(positional[skip:]))
    kwargs = tuple((key, _argument(source, node, use, f"argument {key}=")) for key, node in keywords.items())
    if not any(a.is_array for a in args) and not any(a.is_array for _, a in kwargs):
        raise Unresolved(f"the call at line {line} passes no array")
    return InferredTask(entry=name, line=line, args=args, kwargs=kwargs)


def _argument(source: Source, node: Node, use: Node, label: str) -> InferredArg:
    try:
        literal = read_literal(source, node, use)
        if literal is not NOT_LITERAL:
            return InferredArg(value=literal)
        shape, dtype = read_array(source, node, use, 0)
        return InferredArg(shape=shape, dtype=canonical_dtype(source, dtype))
    except Unresolved as why:
        text = source.node_text(node)
        text = text if len(text) <= 60 else text[:57] + "..."
        raise Unresolved(f"{label} (`{text}`) at line {node.start_point[0] + 1}: {why}") from None
