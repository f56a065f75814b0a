"""Where the store of an output the kernel never writes belongs (for PLS017, ``writes.py``).

The output's parameter in the ``def`` names the ref but not the place to add the store. When the
kernel shows where its results are written, that place is said instead, the parameter related:

- a ``pass`` left alone in a ``pl.when`` block or in the kernel's body, or beside other statements
  in any function of the kernel (a helper such as Megablox's ``_store_accum`` that computes the value
  and stores nothing): a store removed, or a stub never filled; the last such ``pass``;
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
    last = [node for node in ast.walk(fn) if isinstance(node, ast.FunctionDef) and node is not fn
            and any(_last_step_when(d) for d in node.decorator_list)]
    if last:
        block = max(last, key=lambda n: n.lineno)
        return block.body[-1] if block.body else None
    return None


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
