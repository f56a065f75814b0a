"""Where a missing store or a missing init belongs in a kernel's source (worker side; ``ast`` only).

Tier 3 found an output block never written, or NaN read from an accumulator nothing initialised;
``runner/tier3/interpret_places.py`` reads the kernel (its functions, the role of each parameter, which
lines ran) and this module says where the statement that is missing belongs (its module doc lists
the rules): ``unwritten_places`` for an output, ``uninitialized_places`` for an accumulator. Each
place is ``(line, column, note)`` with 1-based lines, the first the finding's position.
"""

from __future__ import annotations

import ast

from .interpret_places import KernelRefs, Place, _callee, _guard, _handed_on, _is_first_step, _nodes, _parents, _reads, _stored, _stores, _when


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
