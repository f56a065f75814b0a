"""Where in a kernel's source a tier-3 finding belongs (worker side; ``ast`` and ``inspect`` only).

Tier 3 knows *what* went wrong from the interpreter's run (an output block never written, NaN
read from memory never initialised, a read past a buffer); this module finds the statement behind
it in the kernel's own code, read with ``ast`` from the checked text:

The first two are ``runner/tier3/missing_places.py``'s, on the reading of the kernel this module gives:

- ``unwritten_places``: the kernel's stores to that output that ran (``runner/tier3/traced_lines.py``
  says which lines the traced kernel came from; a variant never run and a branch never taken do
  not count); when they all sit under one ``pl.when(...)``, that guard (its condition decides that
  some blocks are never written); before that, a ``pass`` standing among the statements of a
  function of the kernel (a store removed or never written: ``to_store = acc[...]`` then ``pass`` in
  a helper such as Megablox's ``_store_accum``); when no store ran, a value computed from the
  kernel's refs and never used (the store after it deleted), else the first statement of the
  last-step ``pl.when`` block, else the kernel parameter naming the output;
- ``uninitialized_places``: the accumulators (scratch or output refs the kernel reads) that no
  statement initialises: a read of one inside the first-step block itself (``+=`` where ``=`` was
  meant), else in the ``pl.when(... == 0)`` block that initialises the others, its ``pass`` or the
  place the order of the kernel's first reads gives (after the init of the last accumulator read
  before it, or first), else the kernel's first-step block that initialises none, else the first
  read of the accumulator; the scratch's declaration is related;
- ``read_place``: the user's line the interpreter's own stack trace names for an out-of-bounds read
  (jax prints it as ``JaxStackTraceBeforeTransformation``), moved to the statement that computed its
  index when that is another one (``runner/index_origin.py``), else the reads of the buffer whose
  shape the message gives.

Kernel parameters are matched to the call's operands by position: scalar-prefetch operands, the
other operands, the outputs of ``out_shape``, then the scratch buffers (one parameter per top-level
entry). A kernel that forwards ``*args`` to a function of the same file (jax's flash attention) is
followed into that function. Each place is ``(line, column, note)`` with 1-based lines; the first is
the finding's position and the others are related places.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..index_origin import index_origin

Place = tuple[int, int | None, str]


@dataclass
class KernelRefs:
    """A recorded call's kernel as source: its functions (the kernel and what it forwards to) and
    the role of each parameter naming a ref."""

    functions: list[ast.FunctionDef]
    roles: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> ("prefetch"|"in"|"out"|"scratch", index)
    params: dict[str, ast.arg] = field(default_factory=dict)
    traced: frozenset[int] | None = None  # lines the kernels were traced from (runner/tier3/traced_lines.py)

    def refs(self, role: str) -> dict[int, str]:
        return {index: name for name, (r, index) in self.roles.items() if r == role}

    def ran(self, node: ast.AST) -> bool:
        """Whether ``node`` left an equation in the traced kernel (True when nothing is known)."""
        if self.traced is None:
            return True
        return any(node.lineno <= line <= (node.end_lineno or node.lineno) for line in self.traced)


def kernel_refs(call: Any, tree: ast.Module | None, path: str,
                traced: frozenset[int] | None = None) -> KernelRefs | None:
    """The kernel of ``call`` (a RecordedCall) read from ``tree`` (the checked file); None when the
    kernel is not a function of that file. ``traced``: the lines the kernel was traced from; a
    variant it forwards to that left none (the single-step body of a flash attention run with
    several kv blocks) is left out."""
    found = _kernel_def(call, tree, path)
    if found is None:
        return None
    fn, bound = found
    layout = _layout(call)
    refs = KernelRefs([fn], traced=traced or None)
    positional = [a for a in fn.args.posonlyargs + fn.args.args][bound:]
    for name_arg, role in zip(positional, layout):
        refs.roles[name_arg.arg] = role
        refs.params[name_arg.arg] = name_arg
    if fn.args.vararg is not None and len(layout) > len(positional):
        by_name = {d.name: d for d in ast.walk(tree) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
        rest = layout[len(positional):]
        for target, offset in _forwards(fn, fn.args.vararg.arg, by_name):
            params = (target.args.posonlyargs + target.args.args)[offset:]
            if not refs.ran(target):
                continue
            for name_arg, role in zip(params, rest):
                refs.roles.setdefault(name_arg.arg, role)
                refs.params.setdefault(name_arg.arg, name_arg)
            refs.functions.append(target)
    return refs


def _kernel_def(call: Any, tree: ast.Module | None, path: str) -> tuple[ast.FunctionDef, int] | None:
    """The ``def`` of ``call``'s kernel in ``tree`` (the checked file) and how many positional
    arguments a ``functools.partial`` binds; None when the kernel is not a function of that file."""
    if call is None or tree is None:
        return None
    kernel, bound = _unwrap(call.kernel)
    code = getattr(kernel, "__code__", None)
    if code is None or not _same_file(code.co_filename, path):
        return None
    fn = next((d for d in ast.walk(tree) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))
               and d.name == code.co_name and _def_line(d) == code.co_firstlineno), None)
    return (fn, bound) if fn is not None else None


def _unwrap(fn: Any) -> tuple[Any, int]:
    bound = 0
    while isinstance(fn, functools.partial):
        bound += len(fn.args)
        fn = fn.func
    return inspect.unwrap(fn) if callable(fn) else fn, bound


def _def_line(fn: ast.AST) -> int:
    decorators = getattr(fn, "decorator_list", None) or []
    return min([fn.lineno] + [d.lineno for d in decorators])


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _count(value: Any) -> int:
    if value is None:
        return 0
    return len(value) if isinstance(value, (list, tuple)) else 1


def _layout(call: Any) -> list[tuple[str, int]]:
    """The role of each top-level kernel argument, in the order pallas_call passes them."""
    grid_spec = call.kwargs.get("grid_spec")
    prefetch = int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0) if grid_spec is not None else 0
    scratch = getattr(grid_spec, "scratch_shapes", None) if grid_spec is not None else call.kwargs.get("scratch_shapes")
    operands = len(call.operands or ())
    out = [("prefetch", i) for i in range(prefetch)]
    out += [("in", i) for i in range(max(operands - prefetch, 0))]
    out += [("out", i) for i in range(_count(call.out_shape) if isinstance(call.out_shape, (list, tuple)) else 1)]
    out += [("scratch", i) for i in range(_count(scratch))]
    return out


def _forwards(fn: ast.FunctionDef, vararg: str, by_name: dict[str, ast.FunctionDef]):
    """(function, index of its first parameter fed by ``*vararg``) for calls ``g(..., *vararg)``; ``g``
    may be a local name assigned functions of the file (``kernel = a`` / ``kernel = b`` on the two
    branches of an ``if``, as JAXBench's flash attention picks its single-step variant): each of them."""
    aliases: dict[str, list[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Name) and node.value.id in by_name:
            aliases.setdefault(node.targets[0].id, []).append(node.value.id)
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        names = [node.func.id] if node.func.id in by_name else aliases.get(node.func.id, [])
        for pos, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) and arg.value.id == vararg:
                for name in names:
                    yield by_name[name], pos
                break


# --------------------------------------------------------------------------- statements


def _nodes(refs: KernelRefs):
    seen: set[int] = set()
    for fn in refs.functions:
        for node in ast.walk(fn):
            if id(node) not in seen:
                seen.add(id(node))
                yield node


def _parents(refs: KernelRefs) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for fn in refs.functions:
        for parent in ast.walk(fn):
            for child in ast.iter_child_nodes(parent):
                parents[id(child)] = parent
    return parents


def _stored(stmt: ast.AST) -> str | None:
    """The ref name a statement writes: ``r[...] = v``, ``r[...] += v``, ``pl.store(r, ...)``."""
    target = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        target = stmt.target
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _callee(stmt.value) in ("store", "swap") \
            and stmt.value.args and isinstance(stmt.value.args[0], ast.Name):
        return stmt.value.args[0].id
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return target.value.id
    return None


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _when(fn: ast.AST) -> ast.Call | None:
    """The ``pl.when(cond)`` decorating ``fn``, if any."""
    for dec in getattr(fn, "decorator_list", ()) or ():
        if isinstance(dec, ast.Call) and _callee(dec) == "when" and dec.args:
            return dec
    return None


def _guard(node: ast.AST, parents: dict[int, ast.AST]) -> ast.Call | None:
    cur = parents.get(id(node))
    while cur is not None:
        dec = _when(cur)
        if dec is not None:
            return dec
        cur = parents.get(id(cur))
    return None


def _is_first_step(cond: ast.expr) -> bool:
    """``x == 0`` (or ``0 == x``): the condition of an accumulator's init block."""
    return (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq)
            and any(isinstance(x, ast.Constant) and x.value == 0 for x in (cond.left, cond.comparators[0])))


def _reads(refs: KernelRefs, name: str) -> list[ast.AST]:
    """Reads of ref ``name``: loads ``name[...]`` and read-modify-writes ``name[...] += v``."""
    out = []
    for node in _nodes(refs):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name \
                and isinstance(node.ctx, ast.Load):
            out.append(node)
        elif isinstance(node, ast.AugAssign) and _stored(node) == name:
            out.append(node)
        elif isinstance(node, ast.Call) and _callee(node) == "load" and node.args and \
                isinstance(node.args[0], ast.Name) and node.args[0].id == name:
            out.append(node)
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _stores(refs: KernelRefs, name: str) -> list[ast.stmt]:
    return sorted((n for n in _nodes(refs) if isinstance(n, ast.stmt) and _stored(n) == name),
                  key=lambda n: (n.lineno, n.col_offset))


# --------------------------------------------------------------------------- the places


def _handed_on(refs: KernelRefs, name: str) -> list[ast.Call]:
    """Calls that get ref ``name`` (or a ``name.at[...]`` view) as an argument, other than loads and
    stores: async copies and helper functions, which may write it."""
    out = []
    for node in _nodes(refs):
        if not isinstance(node, ast.Call) or _callee(node) in ("load", "store", "swap", "ds", "dslice", "when",
                                                                "multiple_of", *_NOT_READING):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            base = arg.value if isinstance(arg, ast.Subscript) and _is_at(arg.value) else arg  # name.at[...]
            base = base.value if _is_at(base) else base  # name[...] is a load: a read, not the ref handed on
            if isinstance(base, ast.Name) and base.id == name:
                out.append(node)
                break
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _is_at(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "at"


_NOT_READING = ("zeros_like", "ones_like", "full_like", "empty_like")  # they take a ref's shape and dtype only


COPIES = ("make_async_copy", "async_copy", "make_async_remote_copy")  # the calls that make a DMA


def reached_copy_lines(call: Any, tree: ast.Module | None, path: str) -> list[int]:
    """Lines of the async copies the kernel makes through the functions and classes of the checked
    file that it calls, by name and on from there (jax's paged attention builds its copies in a
    ``MultiPageAsyncCopyDescriptor`` method the kernel reaches through a helper), in line order."""
    found = _kernel_def(call, tree, path)
    if found is None:
        return []
    named: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            named.setdefault(node.name, []).append(node)
    todo: list[ast.AST] = [found[0]]
    seen: set[int] = set()
    lines: set[int] = set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = _callee(sub)
                if name in COPIES:
                    lines.add(sub.lineno)
                todo.extend(named.get(name or "", ()))
    return sorted(lines)


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')


def read_place(noise: str, path: str, refs: KernelRefs | None, shape: tuple[int, ...] | None,
               tree: ast.Module | None = None) -> list[Place]:
    """The user's line of an out-of-bounds read: from the stack jax printed for the failing
    operation (the innermost frame of the checked file before the out-of-bounds message), moved to
    where its index was computed when that is another statement (``runner/index_origin.py``: jax's
    paged attention's page-table read in a descriptor method, its offset computed in a helper), else
    the reads with ``pl.ds`` of the kernel's refs (one candidate only)."""
    head = noise.split("Out-of-bounds", 1)[0] if "Out-of-bounds" in noise else ""
    frames = [(int(m.group("line")), m.group("fn")) for m in _FRAME.finditer(head) if _same_file(m.group("file"), path)]
    if "JaxStackTraceBeforeTransformation" in noise and frames:
        line, fn = frames[-1]
        read = (line, None, f"this read (in {fn}) goes past the buffer" + (f" of shape {shape}" if shape else ""))
        origin = index_origin(frames, tree)
        if origin is None:
            return [read]
        return [(origin.line, origin.column, f"the index that reads past the buffer at line {line} is computed here "
                 f"({origin.what})"), (read[0], read[1], f"the read (in {fn}) that goes past the buffer")]
    if refs is None:
        return []
    windows = [n for n in _nodes(refs) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)
               and any(isinstance(c, ast.Call) and _callee(c) in ("ds", "dslice") for c in ast.walk(n.slice))]
    if len({n.lineno for n in windows}) == 1:
        return [(windows[0].lineno, windows[0].col_offset, "this read's window goes past the buffer")]
    return []
