"""Where in a kernel's source a tier-3 finding belongs (worker side; ``ast`` and ``inspect`` only).

Tier 3 knows *what* went wrong from the interpreter's run (an output block never written, NaN
read from memory never initialised, a read past a buffer); this module finds the statement behind
it in the kernel's own code, read with ``ast`` from the checked text:

- ``unwritten_places``: the kernel's stores to that output; when they all sit under one
  ``pl.when(...)``, that guard (its condition decides that some blocks are never written); when the
  kernel never stores to it at all, the kernel parameter naming the output; before either, a
  ``pass`` standing among the statements of a function of the kernel (a store removed or never
  written: ``to_store = acc[...]`` then ``pass`` in a helper such as Megablox's ``_store_accum``);
- ``uninitialized_places``: the accumulators (scratch or output refs the kernel reads) that no
  statement initialises: the ``pl.when(... == 0)`` block that initialises the others (the init is
  missing there), else the kernel's first-step ``pl.when(... == 0)`` block that initialises none,
  else the first read of the accumulator; the scratch's declaration is related;
- ``read_place``: the user's line the interpreter's own stack trace names for an out-of-bounds read
  (jax prints it as ``JaxStackTraceBeforeTransformation``), else the reads of the buffer whose shape
  the message gives.

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

from .index_origin import index_origin

Place = tuple[int, int | None, str]


@dataclass
class KernelRefs:
    """A recorded call's kernel as source: its functions (the kernel and what it forwards to) and
    the role of each parameter naming a ref."""

    functions: list[ast.FunctionDef]
    roles: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> ("prefetch"|"in"|"out"|"scratch", index)
    params: dict[str, ast.arg] = field(default_factory=dict)
    traced: frozenset[int] | None = None  # lines the kernels were traced from (runner/traced_lines.py)

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


def unwritten_places(refs: KernelRefs | None, out_index: int) -> list[Place]:
    """Where output ``out_index`` of the call should have been written (see the module doc)."""
    if refs is None:
        return []
    name = refs.refs("out").get(out_index)
    if name is None:
        return []
    parents = _parents(refs)
    stores = [s for s in _stores(refs, name) if not isinstance(s, ast.AugAssign)] or _stores(refs, name)
    stores = [s for s in stores or _handed_on(refs, name) if refs.ran(s)]  # written by an async copy or a helper
    stub = _stub(refs)
    if stub is not None:  # a store removed (or never written) where the kernel computes what it would store
        return [(stub.lineno, stub.col_offset, f"a `pass` stands where {name} would be stored")] + [
            (s.lineno, s.col_offset, f"the store to {name}") for s in stores[:2]]
    if not stores:
        return _missing_store(refs, name, out_index)
    guards = {id(g): g for g in (_guard(s, parents) for s in stores)}
    if len(guards) == 1 and None not in guards.values():
        guard = next(iter(guards.values()))
        cond = ast.unparse(guard.args[0])
        return [(guard.lineno, guard.col_offset, f"{name} is written only when {cond}")] + [
            (s.lineno, s.col_offset, f"the store to {name}") for s in stores[:2]]
    return [(s.lineno, s.col_offset, f"the store to {name}") for s in stores[:3]]


def _missing_store(refs: KernelRefs, name: str, out_index: int) -> list[Place]:
    """Where the store of an output that no code the kernel ran writes belongs: after a value the
    kernel computes from a ref and never uses (``to_store = acc[...]`` with the store after it
    deleted, as in a grouped matmul's ``_store_accum``), else first in the last-step ``pl.when`` block
    (jax's flash attention's ``store_output`` with its first statement deleted), else the kernel
    parameter naming the output."""
    param = refs.params.get(name)
    named = [(param.lineno, param.col_offset, f"{name} is output {out_index}")] if param is not None else []
    dead = _dead_values(refs)
    if dead:
        value = dead[-1]
        what = value.targets[0].id
        return [(value.lineno, value.col_offset, f"{what} is computed here from the kernel's buffers and never used: "
                 f"the store to {name} is missing after it")] + named
    block = _last_step_block(refs)
    if block is not None:
        cond = ast.unparse(_when(block).args[0])
        first = block.body[0]
        return [(first.lineno, first.col_offset, f"the block run on the last step ({cond}) does not store {name}: its "
                 "store belongs here")] + named
    return [(p[0], p[1], f"the kernel never writes {name} (output {out_index})") for p in named[:1]]


def _dead_values(refs: KernelRefs) -> list[ast.Assign]:
    """``v = <expression>`` statements, in the functions the kernel ran, whose value comes from the
    kernel's refs (read there, or computed from names that were) and whose name is never read again
    in that function, in line order."""
    derived = _derived_names(refs)
    out = []
    for fn in (n for n in _nodes(refs) if isinstance(n, ast.FunctionDef)):
        loaded = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for stmt in fn.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and stmt.targets[0].id not in loaded and stmt.targets[0].id in derived:
                out.append(stmt)
    return sorted(out, key=lambda s: (s.lineno, s.col_offset))


def _derived_names(refs: KernelRefs) -> set[str]:
    """Names assigned, in line order, from a read of one of the kernel's refs or from names so assigned."""
    derived: set[str] = set()
    assigns = sorted((n for n in _nodes(refs) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None),
                     key=lambda n: (n.lineno, n.col_offset))
    for stmt in assigns:
        names = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
        if names & derived or _reads_a_ref(stmt.value, refs):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            derived |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return derived


def _reads_a_ref(value: ast.expr, refs: KernelRefs) -> bool:
    return any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in refs.roles
               and isinstance(n.ctx, ast.Load) for n in ast.walk(value))


def _last_step_block(refs: KernelRefs) -> ast.FunctionDef | None:
    """The first ``pl.when(x == n - 1)`` block (by line) of the functions the kernel ran."""
    blocks = [n for n in _nodes(refs) if isinstance(n, ast.FunctionDef) and n.body and (g := _when(n)) is not None
              and _is_last_step(g.args[0])]
    return min(blocks, key=lambda b: b.lineno) if blocks else None


def _is_last_step(cond: ast.expr) -> bool:
    """``x == n - 1`` (either side): the condition of a block run on a reduction's last step."""
    if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq)):
        return False
    return any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Sub) and isinstance(x.right, ast.Constant)
               and x.right.value == 1 for x in (cond.left, cond.comparators[0]))


def _stub(refs: KernelRefs) -> ast.Pass | None:
    """The last ``pass`` beside other statements in the body of one of the kernel's functions (the
    kernel, its ``pl.when`` blocks and helpers), or alone in a ``pl.when`` block: a statement removed,
    or a stub never filled (a ``pass`` first in a last-step block, as in jax's flash attention's
    ``store_output``, was passed over)."""
    stubs = [stmt for fn in _nodes(refs) if isinstance(fn, ast.FunctionDef)
             for stmt in fn.body if isinstance(stmt, ast.Pass) and (len(fn.body) > 1 or _when_block(fn))]
    return max(stubs, key=lambda s: (s.lineno, s.col_offset)) if stubs else None


def _when_block(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Call) and _callee(d) == "when" for d in fn.decorator_list)


def uninitialized_places(refs: KernelRefs | None, scratch_line: int | None) -> list[Place]:
    """Where an accumulator read before it is written should have been initialised (module doc):
    its read inside the first-step block itself (``acc[...] += 0`` where ``=`` was meant), else the
    ``pass`` or the end of the first-step block that initialises the other buffers, else that
    block's guard, else the accumulator's first read."""
    if refs is None:
        return []
    parents = _parents(refs)
    init_blocks: list[ast.Call] = []
    suspects: list[tuple[str, ast.AST]] = []
    for role in ("scratch", "out"):
        for index, name in sorted(refs.refs(role).items()):
            reads = _reads(refs, name)
            if not reads or _handed_on(refs, name):
                continue  # never read, or written where this reading cannot follow (a DMA, a helper)
            inits = [s for s in _stores(refs, name) if not isinstance(s, ast.AugAssign)
                     and not _reads_itself(s, name) and _reads_before(s, reads, parents)]
            if inits:
                for s in inits:
                    guard = _guard(s, parents)
                    if guard is not None and _is_first_step(guard.args[0]):
                        init_blocks.append(guard)
                continue
            suspects.append((name, reads[0]))
    if not suspects:
        return []
    name, first_read = suspects[0]
    named = ", ".join(n for n, _ in suspects)
    scratch = [(scratch_line, None, "the scratch buffers are declared here")] if scratch_line else []
    read = (first_read.lineno, first_read.col_offset, f"{name} is read here before anything wrote it")
    guard = _guard(first_read, parents)
    if guard is not None and _is_first_step(guard.args[0]):  # the init block reads it: `+=` where `=` was meant
        how = "`+=` adds to" if isinstance(first_read, ast.AugAssign) else "this reads"
        return [(first_read.lineno, first_read.col_offset,
                 f"on the first step ({ast.unparse(guard.args[0])}) {how} {name} before anything wrote it: "
                 f"initialise it with `=` here")] + scratch
    for guard in init_blocks:
        cond = ast.unparse(guard.args[0])
        slot = _missing_slot(parents.get(id(guard)), refs, name, parents)
        said = f"the block run when {cond} initialises other buffers but not {named}"
        if slot is None:
            return [(guard.lineno, guard.col_offset, said)] + [read] + scratch
        return [(slot[0], slot[1], f"{said}: initialise it {slot[2]}")] + [
            (guard.lineno, guard.col_offset, f"the block run when {cond}"), read] + scratch
    first_steps = [g for n in _nodes(refs) if (g := _when(n)) is not None and _is_first_step(g.args[0])]
    if first_steps:  # a first-step block that initialises no accumulator: the init is missing there
        guard = min(first_steps, key=lambda g: (g.lineno, g.col_offset))
        cond = ast.unparse(guard.args[0])
        said = f"the block run when {cond} does not initialise {named}"
        stub = _block_pass(parents.get(id(guard)))
        if stub is not None:
            return [(stub.lineno, stub.col_offset, f"{said}: a `pass` stands where its init belongs")] + [
                (guard.lineno, guard.col_offset, f"the block run when {cond}"), read] + scratch
        return [(guard.lineno, guard.col_offset, said)] + [read] + scratch
    return [read] + scratch


def _block_pass(block: ast.AST | None) -> ast.Pass | None:
    body = getattr(block, "body", None) or []
    return next((s for s in body if isinstance(s, ast.Pass)), None)


def _missing_slot(block: ast.AST | None, refs: KernelRefs, name: str,
                  parents: dict[int, ast.AST]) -> tuple[int, int, str] | None:
    """(line, column, where) the init of ``name`` belongs in a first-step ``block``: its ``pass`` (a
    statement removed), else in the order the kernel first reads its accumulators (jax's flash and
    paged attention initialise them in that order): right after the init of the last one read before
    ``name``, or first in the block when ``name`` is read first. None when the block is not a ``def``."""
    if not isinstance(block, ast.FunctionDef) or not block.body:
        return None
    stub = _block_pass(block)
    if stub is not None:
        return stub.lineno, stub.col_offset, "here, where a `pass` stands"
    first_use = _first_uses(refs, parents)
    mine = first_use.get(name)
    before = [s for s in block.body if mine is not None and first_use.get(_stored(s) or "", mine) < mine]
    if before or mine is None:
        last = before[-1] if before else block.body[-1]
        return (last.end_lineno or last.lineno), last.col_offset, "after this statement"
    first = block.body[0]
    return block.lineno + 1, first.col_offset, "first in this block"


def _first_uses(refs: KernelRefs, parents: dict[int, ast.AST]) -> dict[str, int]:
    """The line of each scratch or output ref's first read outside the first-step blocks."""
    out: dict[str, int] = {}
    for role in ("scratch", "out"):
        for ref in refs.refs(role).values():
            lines = [r.lineno for r in _reads(refs, ref)
                     if not ((g := _guard(r, parents)) is not None and _is_first_step(g.args[0]))]
            if lines:
                out[ref] = min(lines)
    return out


_NOT_READING = ("zeros_like", "ones_like", "full_like", "empty_like")  # they take a ref's shape and dtype only


def _reads_itself(store: ast.stmt, name: str) -> bool:
    """``acc[...] = acc[...] * s + p``: a store whose value reads the ref it writes (an update);
    ``acc[...] = jnp.zeros_like(acc)`` only takes its shape."""
    value = getattr(store, "value", None)
    return value is not None and any(n.value.id == name for n in ast.walk(value)
                                     if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name))


def _reads_before(store: ast.stmt, reads: list[ast.AST], parents: dict[int, ast.AST]) -> bool:
    """Whether ``store`` can initialise the ref: it is under a first-step ``pl.when``, or it is not
    guarded and comes before the first read in the code."""
    guard = _guard(store, parents)
    if guard is not None:
        return _is_first_step(guard.args[0])
    return (store.lineno, store.col_offset) <= (reads[0].lineno, reads[0].col_offset)


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
