"""Where the store of an output the kernel never writes belongs (for PLS017, ``writes.py``).

The output's parameter in the ``def`` names the ref but not the place to add the store. When the
kernel shows where its results are written, that place is said instead, the parameter related:

- a ``pass`` left alone in a ``pl.when`` block or in the kernel's body, or beside other statements
  in any function of the kernel (a helper such as Megablox's ``_store_accum`` that computes the value
  and stores nothing): a store removed, or a stub never filled; the last such ``pass``;
- else a value computed from the kernel's refs and never used (``out_bits = o1 ^ o2`` with the store
  after it deleted, as in a mutant of jax's threefry kernel; issue 50): the last such assignment;
- else the block that runs on the last grid step (``@pl.when(k == nk - 1)``,
  ``@pl.when(k == pl.num_programs(2) - 1)``), where a reduction stores its result: its last statement.

None when neither is there: the finding stays at the parameter.
"""

from __future__ import annotations

import ast


def missing_store_place(fn: ast.FunctionDef) -> ast.stmt | None:
    stubs = [stmt for body in _bodies(fn) for stmt in body if isinstance(stmt, ast.Pass)]
    stubs += [stmt for node in ast.walk(fn) if isinstance(node, ast.FunctionDef)
              for stmt in node.body if isinstance(stmt, ast.Pass) and len(node.body) > 1]
    if stubs:
        return max(stubs, key=lambda s: (s.lineno, s.col_offset))
    dead = _dead_values(fn)
    if dead:
        return dead[-1]
    last = [node for node in ast.walk(fn) if isinstance(node, ast.FunctionDef) and node is not fn
            and any(_last_step_when(d) for d in node.decorator_list)]
    if last:
        block = max(last, key=lambda n: n.lineno)
        return block.body[-1] if block.body else None
    return None


def _dead_values(fn: ast.FunctionDef) -> list[ast.Assign]:
    """``v = <expression>`` statements of the kernel's functions whose value comes from its refs (its
    parameters, read there, or names so assigned) and whose name is never read again, in line order."""
    refs = {a.arg for a in fn.args.posonlyargs + fn.args.args}
    derived: set[str] = set()
    for stmt in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Assign)), key=lambda n: (n.lineno, n.col_offset)):
        names = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
        if names & derived or any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in refs
                                  for n in ast.walk(stmt.value)):
            derived |= {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    out = []
    for body_fn in (n for n in ast.walk(fn) if isinstance(n, ast.FunctionDef)):
        loaded = {n.id for n in ast.walk(body_fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        out += [s for s in body_fn.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and s.targets[0].id in derived - loaded]
    return sorted(out, key=lambda s: (s.lineno, s.col_offset))


def _bodies(fn: ast.FunctionDef):
    """The kernel's own body and the bodies of its ``pl.when`` blocks (nested functions)."""
    yield fn.body
    for node in ast.walk(fn):
        if isinstance(node, ast.FunctionDef) and node is not fn and any(_is_when(d) for d in node.decorator_list):
            yield node.body


def _is_when(decorator: ast.expr) -> bool:
    return isinstance(decorator, ast.Call) and _tail(decorator.func) == "when"


def _last_step_when(decorator: ast.expr) -> bool:
    if not _is_when(decorator) or not decorator.args:
        return False
    cond = decorator.args[0]
    if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq)):
        return False
    text = ast.unparse(cond)
    return "num_programs" in text or any(isinstance(side, ast.BinOp) and isinstance(side.op, ast.Sub)
                                         and isinstance(side.right, ast.Constant) and side.right.value == 1
                                         for side in (cond.left, *cond.comparators))


def _tail(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
