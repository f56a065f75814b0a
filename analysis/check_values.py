"""The value behind a failed check: from the check that raised to the literal the user wrote.

Kernel libraries validate their parameters in Python before anything is lowered
(``if bkv % bkv_compute: raise ValueError(f"{bkv=} must be a multiple of {bkv_compute=}")``),
and jax checks what it is given. Such an error stops at the ``raise`` (or at the user's call into
the library), far from the value that was wrong: a block size in a ``TUNED_PARAMS`` dict, a module
constant, a keyword default. ``culprit`` reads the failing statement, follows each value it uses
back to where it was written (``analysis/origins.py``, guided by the traceback's frames of the
file), and names the one the error is about:

    found = culprit(text, frames, message)
    found.origin.line, found.name        # 0-based line of the literal, the expression at the check

The failing statement is the innermost frame of the file whose line holds a ``raise``/``assert``
(its condition and message are read), else the innermost frame (the arguments of its calls are
read). A value is a candidate when it traces to a literal outside that statement; the best
candidate appears in the error's message, or breaks the (8, 128) tiling (``odd``), or both; a value the message does not name is taken only from the checking statement itself.
When no traced value breaks the tiling (the value travelled through an object's attributes), a
number of the message that does and is written exactly once as a literal in the file is taken.
None when nothing qualifies: the finding then stays where it is.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .origins import Frames, Origin, parse, trace_node


@dataclass(frozen=True)
class Culprit:
    origin: Origin  # where the value was written
    name: str  # the expression that carried it at the check, e.g. "bkv_compute"
    check_line: int  # 0-based line of the failing statement


def culprit(text: str, frames: Frames, message: str, exclude: tuple[tuple[int, int], ...] = ()) -> Culprit | None:
    """The written value the error is about (see the module doc), or None. ``exclude``: 0-based
    line ranges (kernel bodies) whose literals are not values of this kind."""
    tree = parse(text)
    if tree is None or not frames:
        return None
    statement, is_check = _failing_statement(tree, frames)
    if statement is None:
        return None
    numbers = {int(n) for n in re.findall(r"(?<![\w.])-?\d+(?!\w|\.\d)", message)}
    best: tuple[tuple[int, ...], Culprit] | None = None
    for order, node in enumerate(_values(statement, is_check)):
        origin = trace_node(tree, text, node, frames=_frames_to(frames, statement))
        if origin is None or origin.kind == "expression" or not _is_int(origin.value):
            continue
        if statement.lineno - 1 <= origin.line <= statement.end_lineno - 1:
            continue  # written in the failing statement itself: it is the place already
        named = origin.value in numbers
        misaligned = odd(origin.value)
        if not (named or (is_check and misaligned)):
            continue
        if not is_check and not (misaligned or ast.unparse(node) in message):
            continue  # a call into a library: the message must point at this argument
        score = (misaligned, named, -order)
        if best is None or score > best[0]:
            best = (score, Culprit(origin, ast.unparse(node), statement.lineno - 1))
    if best is not None and best[0][0]:
        return best[1]
    # Nothing traced breaks the tiling: a number of the message that does, written once, wins.
    return _written_once(tree, text, statement, message, numbers, exclude) or (best[1] if best else None)


_SHAPE_VALUE = re.compile(r"(?P<ref>\w+)\.shape = \((?P<dims>[\d, ]*)\)")


def shape_culprit(text: str, frames: Frames, values: str, exclude: tuple[tuple[int, int], ...] = ()) -> Culprit | None:
    """A bare ``assert`` inside a kernel about a ref's shape (``assert acc_ref.shape == (bm, 128)``)
    failed: ``values`` is what the worker saw its names hold (``runner/errors.py``,
    ``acc_ref.shape = (16, 124)``). The ref got that shape where it was declared (a BlockSpec, a
    scratch buffer), outside the kernel: a dim of the shapes that breaks the (8, 128) tiling and is
    written exactly once as a literal outside kernels is the value the check is about. None
    otherwise (the finding stays at the assert)."""
    tree = parse(text)
    if tree is None or not frames:
        return None
    statement, is_check = _failing_statement(tree, frames)
    if statement is None or not isinstance(statement, ast.Assert):
        return None
    shapes = {m.group("ref"): [int(d) for d in re.findall(r"\d+", m.group("dims"))] for m in _SHAPE_VALUE.finditer(values)}
    for ref, dims in shapes.items():
        for i, n in enumerate(dims):
            found = _written_once(tree, text, statement, str(n), {n}, exclude)
            if found is not None:
                return Culprit(found.origin, f"{ref}.shape[{i}]", found.check_line)
    return None


def _written_once(tree: ast.Module, text: str, statement: ast.stmt, message: str, numbers: set[int],
                  exclude: tuple[tuple[int, int], ...]) -> Culprit | None:
    """When the value went where the trace cannot follow (an object's attributes, ``**kwargs`` kept
    on ``self``): a number of the message that breaks the (8, 128) tiling and is written as a
    literal exactly once in the file (outside kernels and the check) is the one."""
    lines = text.splitlines()
    for n in sorted(numbers, key=lambda n: message.find(str(n))):
        if not odd(n) or n < 2:
            continue
        found = [c for c in ast.walk(tree) if isinstance(c, ast.Constant) and _is_int(c.value) and c.value == n
                 and not any(a <= c.lineno - 1 <= b for a, b in exclude)
                 and not statement.lineno <= c.lineno <= statement.end_lineno]
        if len(found) != 1:
            continue
        node = found[0]
        m = re.search(rf"(\w+)\s*=\s*{n}\b", message)
        line = node.lineno - 1
        what = lines[line].strip() if 0 <= line < len(lines) else ""
        origin = Origin(line, node.col_offset, node.end_lineno - 1, node.end_col_offset, _context(node), what, n)
        return Culprit(origin, m.group(1) if m else str(n), statement.lineno - 1)
    return None


def _context(node: ast.Constant) -> str:
    parent = getattr(node, "_pallasite_parent", None)
    if isinstance(parent, ast.Dict):
        return "dict entry"
    if isinstance(parent, (ast.List, ast.Tuple)) and isinstance(getattr(parent, "_pallasite_parent", None), ast.Dict):
        return "list entry"
    if isinstance(parent, ast.keyword):
        return "argument"
    if isinstance(parent, ast.arguments):
        return "keyword default"
    if isinstance(parent, (ast.Assign, ast.AnnAssign)) and isinstance(getattr(parent, "_pallasite_parent", None), ast.Module):
        return "constant"
    return "literal"


def odd(value: int) -> bool:
    """A size that breaks the TPU tiling wherever it lands: not a multiple of 8 rows, or above 128
    and not a multiple of 128 lanes (the sizes of a mistake, not of a tuned block)."""
    return value % 8 != 0 or (value > 128 and value % 128 != 0)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _failing_statement(tree: ast.Module, frames: Frames) -> tuple[ast.stmt | None, bool]:
    """(the statement the error stopped at, whether it is a raise/assert check)."""
    statements = {}
    checks = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            statements.setdefault(node.lineno, []).append(node)
        if isinstance(node, (ast.Raise, ast.Assert)):
            checks.append(node)
    for line, _ in reversed(frames):
        # a check written over several lines: the traceback names the line of the failing part
        holding = [c for c in checks if c.lineno <= line <= (c.end_lineno or c.lineno)]
        if holding:
            return min(holding, key=lambda c: (c.end_lineno or c.lineno) - c.lineno), True
    line = frames[-1][0]
    here = [s for s in statements.get(line, ()) if not isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For,
                                                                        ast.While, ast.With, ast.Try))]
    return (here[-1], False) if here else (None, False)


def _frames_to(frames: Frames, statement: ast.stmt) -> Frames:
    """The frames up to the one at ``statement`` (values are traced from there outwards)."""
    for i in range(len(frames) - 1, -1, -1):
        if statement.lineno <= frames[i][0] <= statement.end_lineno:
            return tuple(frames[: i + 1])
    return tuple(frames)


def _values(statement: ast.stmt, is_check: bool) -> list[ast.expr]:
    """The value expressions a check uses (its guarding ``if`` condition and its message), or the
    arguments of the calls of a failing statement; outermost expressions only (``cfg.block_q``, not
    ``cfg``)."""
    roots: list[ast.AST] = []
    if is_check:
        parent = getattr(statement, "_pallasite_parent", None)
        if isinstance(parent, ast.If) and statement in parent.body:
            roots.append(parent.test)
        if isinstance(statement, ast.Raise) and statement.exc is not None:
            roots.append(statement.exc)
        if isinstance(statement, ast.Assert):
            roots.extend(x for x in (statement.test, statement.msg) if x is not None)
    else:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                roots.extend(node.args)
                roots.extend(k.value for k in node.keywords)
    out: list[ast.expr] = []
    seen: set[str] = set()
    for root in roots:
        for node in _outermost_values(root):
            key = ast.unparse(node)
            if key not in seen:
                seen.add(key)
                out.append(node)
    return out


def _outermost_values(root: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            found.append(node)
            return
        if isinstance(node, ast.Call):  # the callee is not a value; its arguments are
            for child in [*node.args, *(k.value for k in node.keywords)]:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(root)
    return found
