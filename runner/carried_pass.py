"""Where the values of a failed entry were written, read from a second run of the file (worker side).

Tiers 1-3 run the user's file exactly as written: ``type(BLOCK) is int``, ``isinstance`` dispatch,
``repr`` and the identity of small ints are what they are without pallasite. Only when an entry
failed is the file loaded once more (``carried_copy``), this time with its int literals carrying
where they were written (``runner/origin_values.py``), and the entry traced again abstractly
(``jax.eval_shape``, pallas_calls intercepted, nothing lowered or run). That locating run is
believed only where it did what the checked run did (``locate_entry``):

- each pallas_call it makes that matches the checked run's call at the same position (the same
  lines of the file on the stack, the same kernel, the same blocks and scratch buffers) gives the
  places of its grid, block, scratch and out_shape dims (``ReachedCall.origins``); a call that
  differs (the program took another branch with carried numbers) gives none;
- a check of the file's own that raised (``if bkv % bkv_compute: raise ValueError(...)``) and
  raises the same way in the locating run gives the values its condition and message read, each
  with the places of the literals that made it (``ErrorRecord.checked``): the client puts the
  finding on the literal the check rejected, not on the ``raise``.

A passing check pays nothing; a failed one pays a second load of the file and a second abstract
trace of the failed entry. Worker side: imports jax (through ``runner/reach.py``).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import os
import sys
import textwrap
from typing import Any, Iterator

from . import errors as errors_mod
from .intercept import is_kernel_error
from .origin_values import places_of

MAX_CHECKED = 8  # values read off one failed check at most


@contextlib.contextmanager
def carried_copy(path: str, text: str | None, modules: Any, package: str | None,
                 loaded_before: set[str], by_statement: bool = True) -> Iterator[Any]:
    """The checked file loaded once more, its literals (and those of the local modules sent with it)
    carrying their places. The plain run's own modules (the file's local imports) are set aside for
    the duration, so the copy imports carrying ones, then put back. ``by_statement``: load it
    statement by statement, going on past one that raises (as the checked run did); else at once
    (a file whose every statement ran in the checked run: one compile)."""
    from .loader import _installed_roots, _is_under, user_module
    from .recording import recording

    installed = _installed_roots()
    hidden = {}
    for name in set(sys.modules) - loaded_before:
        if name == "pallasite" or name.startswith("pallasite."):
            continue
        file = getattr(sys.modules.get(name), "__file__", None)
        if file is None or not _is_under(file, installed):
            hidden[name] = sys.modules.pop(name)
    try:
        failures: list[tuple[int, BaseException]] | None = [] if by_statement else None
        with contextlib.ExitStack() as stack:
            with recording(path):  # top-level calls of kernels stand in while it loads, as in the checked run
                module = stack.enter_context(user_module(path, text, modules, package, failures=failures,
                                                         carry_origins=True))
            yield module
    finally:
        sys.modules.update(hidden)


def locate_entry(entry: dict[str, Any], task_name: str, args: tuple[Any, ...], path: str, module: Any,
                 text: str | None) -> None:
    """Complete the failed ``entry`` (the checked run's plain dict) from the locating run of
    ``module`` (``carried_copy``): places for the dims of each matching reached call, and the values
    a failed check of the file read (see the module docstring). Never raises."""
    from .tasks import tasks_runtime
    from .reach import entry_namespaces, reached_calls

    try:
        tasks = tasks_runtime.discover(module, path, text)
    except Exception:  # noqa: BLE001 - nothing to locate with
        return
    task = next((t for t in tasks if t.name == task_name), None)
    if task is None or task.entry is None:
        return
    raised: list[BaseException] = []
    try:
        carried = reached_calls(task.entry, args, path, entry_namespaces(task.entry), raised=raised)
    except Exception:  # noqa: BLE001 - the locating run is optional
        return
    _merge_origins(entry.get("reached"), carried)
    if raised and not is_kernel_error(raised[0]):
        _attach_checked(entry.get("errors") or [], raised[0], path)


def _merge_origins(plain: list[dict[str, Any]] | None, carried: list[dict[str, Any]] | None) -> None:
    if not plain or not carried:
        return
    for mine, theirs in zip(plain, carried):
        if (mine.get("lines") != theirs.get("lines") or mine.get("kernel") != theirs.get("kernel")
                or _blocks(mine) != _blocks(theirs)):
            continue  # the locating run did something else here: its places are not this call's
        mine["origins"] = {**(theirs.get("origins") or {}), **(mine.get("origins") or {})}


def _blocks(call: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(b.get("role"), b.get("index"), tuple(b.get("shape") or ()), b.get("dtype")) for b in call.get("buffers") or ()]


def _attach_checked(errors: list[dict[str, Any]], exc: BaseException, path: str) -> None:
    """The values the check that raised ``exc`` read, on the checked run's record of the same error."""
    again = errors_mod.record(exc, path)
    same = [r for r in errors if r.get("type") == again["type"] and r.get("sentence") == again["sentence"]]
    if not same:
        return  # the locating run failed otherwise: it says nothing about the checked run's error
    values = checked_values(exc, path)
    if values:
        for rec in same:
            rec["checked"] = values


def checked_values(exc: BaseException, path: str) -> list[dict[str, Any]]:
    """``[{"name", "value", "places": [[line, col, end_col], ...]}]``: the int values the failing
    check of ``path`` (else the library check that raised, called from it) read (its guarding ``if`` condition and its message, or an ``assert``'s test
    and message), read off the raising frame's variables without calling anything, each with the
    places in ``path`` of the literals that made it."""
    frame, line = _raising_frame(exc, path)
    statement, roots = _check_roots(path, line, frame.f_code.co_firstlineno) if frame is not None else (None, [])
    if statement is None:  # not a check of the file's: a library's (``_verify_block`` of jax's flash attention)
        frame, line = _innermost_frame(exc)
        if frame is None:
            return []
        statement, roots = _check_roots(frame.f_code.co_filename, line, frame.f_code.co_firstlineno)
    if statement is None:
        return []
    target = os.path.realpath(path)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for root in roots:
        for node in _value_nodes(root):
            name = ast.unparse(node)
            if name in seen or len(out) >= MAX_CHECKED:
                continue
            seen.add(name)
            value = _read(node, frame)
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            places = sorted([ln, col, end] for file, ln, col, end in places_of(value)
                            if os.path.realpath(file) == target)
            if places:
                out.append({"name": name, "value": int(value), "places": places})
    return out


def _raising_frame(exc: BaseException, path: str) -> tuple[Any, int]:
    target = os.path.realpath(path)
    for link in errors_mod._chain(exc):
        found = None
        tb = link.__traceback__
        while tb is not None:
            if os.path.realpath(tb.tb_frame.f_code.co_filename) == target:
                found = (tb.tb_frame, tb.tb_lineno)
            tb = tb.tb_next
        if found is not None:
            return found
    return None, 0


def _innermost_frame(exc: BaseException) -> tuple[Any, int]:
    """The frame that raised ``exc`` (the last of its traceback), wherever it is."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return (tb.tb_frame, tb.tb_lineno) if tb is not None else (None, 0)


def _check_roots(path: str, line: int, first: int = 1) -> tuple[ast.stmt | None, list[ast.AST]]:
    """The ``raise``/``assert`` at ``line`` of ``path`` and the expressions it reads; ``first``: the
    first line of the function it is in (only that function is parsed; its lines keep the file's
    numbers)."""
    lines = linecache.getlines(path)
    block = lines[first - 1:]
    try:
        if first > 1 and block:
            block = inspect.getblock(block)
        source = textwrap.dedent("".join(block))
        tree = ast.parse(source)
        ast.increment_lineno(tree, first - 1)
    except (SyntaxError, ValueError, IndentationError):
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            return None, []
    parents: dict[int, ast.AST] = {}
    holding = []
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, (ast.Raise, ast.Assert)) and node.lineno <= line <= (node.end_lineno or node.lineno):
            holding.append(node)
    if not holding:
        return None, []
    statement = min(holding, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)
    roots: list[ast.AST] = []
    if isinstance(statement, ast.Raise):
        parent = parents.get(id(statement))
        if isinstance(parent, ast.If) and statement in parent.body:
            roots.append(parent.test)
        if statement.exc is not None:
            roots.append(statement.exc)
    else:
        roots.extend(x for x in (statement.test, statement.msg) if x is not None)
    return statement, roots


def _value_nodes(root: ast.AST) -> list[ast.expr]:
    """The outermost names, attributes and subscripts an expression reads (``cfg.block_q``, not
    ``cfg``); the callee of a call is not a value, its arguments are."""
    found: list[ast.expr] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            found.append(node)
            return
        if isinstance(node, ast.Call):
            for child in [*node.args, *(k.value for k in node.keywords)]:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(root)
    return found


_MISSING = object()


def _read(node: ast.expr, frame: Any) -> Any:
    """The value of a name, ``a.b`` or ``a[constant]`` in ``frame``, read from dicts only (no
    property, ``__getattr__`` or ``__getitem__`` of the user's runs)."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals):
            if node.id in scope:
                return scope[node.id]
        return _MISSING
    if isinstance(node, ast.Attribute):
        base = _read(node.value, frame)
        if base is _MISSING:
            return _MISSING
        try:
            fields = object.__getattribute__(base, "__dict__")
        except AttributeError:
            return _MISSING
        return fields.get(node.attr, _MISSING) if isinstance(fields, dict) else _MISSING
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        base = _read(node.value, frame)
        if type(base) is dict:
            return base.get(node.slice.value, _MISSING)
        if type(base) in (list, tuple) and isinstance(node.slice.value, int):
            try:
                return base[node.slice.value]
            except IndexError:
                return _MISSING
    return _MISSING


__all__ = ["carried_copy", "checked_values", "locate_entry"]
