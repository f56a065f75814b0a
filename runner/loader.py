"""Loading a user's kernel file inside the worker, isolated per request.

``user_module(path, text)`` is a context manager: inside it, the file runs as a fresh module with a
unique name (so nothing is reused from an earlier request), its directory first on ``sys.path``
(so ``import helpers`` finds the user's sibling ``helpers.py``), and — when the file sits in a
package — its ``__package__`` set so relative imports work. The given text (the editor's unsaved
buffer) is compiled under the original path, and ``linecache`` serves that text, so tracebacks and
``inspect.getsource`` name the user's path with the buffer's line numbers. Local modules the
client sent with the request (protocol v2 ``Sources``) are imported from their sent text, compiled
under their original paths, before anything on disk: the user's folder need not exist here. On exit, the path
entries, the module, and every module newly imported from the user's folders are removed again, so
edits to sibling files are seen by the next request. The buffer's text stays in ``linecache``
(one entry per path, replaced by the next load) so a traceback formatted after the request still
shows the buffer's lines.

``failures``: a list given to ``load_user_module``/``user_module`` makes the load go on past a
top-level statement that raises: each statement runs on its own (as a notebook's cells would),
and ``(line, exception)`` is appended for each one that raised, so a guide-style file whose demo
code fails on a CPU still defines everything after it. A ``guard`` (a context manager factory)
wraps each statement: a deadline raising ``SkipStatement`` stops that statement (appended, the load
goes on), one raising ``StopLoading`` ends the load there (appended too). Without ``failures`` the
first exception propagates, as ``import`` does.

``carry_origins``: the file and the local modules sent with it run with their int and float
literals carrying where they were written (``runner/origin_values.py``), so a value a pallas_call
rejects can be traced to the literal that made it (the check op's locating run of a failed entry
asks for it, ``runner/carried_pass.py``; the tiers themselves run the file as written).

Worker side: stdlib only.
"""

from __future__ import annotations

import __future__
import ast
import contextlib
import importlib.abc
import importlib.util
import itertools
import linecache
import os
import re
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ContextManager

_counter = itertools.count(1)


class StopLoading(BaseException):
    """Raised into the user's code to stop it (a deadline): a load collecting ``failures`` ends at the
    statement it stopped, keeping what ran so far (BaseException: ``except Exception`` lets it by)."""


class SkipStatement(BaseException):
    """Raised into a top-level statement to stop it (it ran past its share of the time): a load
    collecting ``failures`` records it and goes on with the next statement."""


class UserFileNotFound(FileNotFoundError):
    """The file to check does not exist on the worker's machine and no text was sent."""


def unique_module_name(path: str) -> str:
    """A module name no earlier request used, readable in tracebacks: ``pallasite_user_<stem>_<n>``."""
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0]) or "file"
    return f"pallasite_user_{stem}_{next(_counter)}"


def package_of(path: str) -> tuple[str | None, str | None]:
    """(dotted package, folder to put on sys.path) if the file's folder has an __init__.py."""
    folder = os.path.dirname(path)
    parts: list[str] = []
    while os.path.isfile(os.path.join(folder, "__init__.py")) and folder != os.path.dirname(folder):
        parts.append(os.path.basename(folder))
        folder = os.path.dirname(folder)
    if not parts or not all(p.isidentifier() for p in parts):
        return None, None
    return ".".join(reversed(parts)), folder


def namespace_roots(path: str, text: str | None = None) -> list[str]:
    """Folders above the file from which its absolute imports of its own project resolve, where a folder
    between lacks ``__init__.py`` (a namespace package: tokamax's ``_src/ops/experimental/tpu/...``):
    for ``from tokamax._src.ops... import base`` in ``<root>/tokamax/_src/ops/...``, ``<root>``."""
    if text is None:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    ancestors = [os.path.dirname(path)]
    while os.path.dirname(ancestors[-1]) != ancestors[-1] and len(ancestors) < 32:
        ancestors.append(os.path.dirname(ancestors[-1]))
    roots: list[str] = []
    for node in tree.body:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        for name in names:
            parts = name.split(".")
            for folder in ancestors:
                if os.path.basename(folder) != parts[0]:
                    continue
                root = os.path.dirname(folder)
                target = os.path.join(root, *parts)
                if (os.path.isdir(target) or os.path.isfile(target + ".py")) and root not in roots:
                    roots.append(root)
                break
    return roots


def _installed_roots() -> tuple[str, ...]:
    """Folders whose modules are never dropped (the interpreter's and the installed packages')."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            roots.add(sysconfig.get_paths()[key])
    return tuple(os.path.realpath(r) + os.sep for r in roots if r)


def _is_under(file: str, folders: tuple[str, ...]) -> bool:
    real = os.path.realpath(file)
    return any(real.startswith(f) for f in folders)


def load_user_module(path: str, text: str | None = None, name: str | None = None, package: str | None = None,
                     failures: list[tuple[int, BaseException]] | None = None,
                     guard: Callable[[], ContextManager[Any]] | None = None,
                     carry_origins: bool = False) -> types.ModuleType:
    """Execute the file (or ``text`` under its path) as a new module registered in sys.modules.

    Does not clean up: use ``user_module`` for that. Exceptions from the user's code propagate
    unchanged (their tracebacks name the user's file), unless ``failures`` collects them (see the
    module docstring; a syntax error and ``SystemExit`` still propagate).
    """
    path = os.path.abspath(path)
    if text is None:
        linecache.cache.pop(path, None)  # forget an earlier request's unsaved buffer
        try:
            with open(path, "rb") as f:
                source: str | bytes = f.read()
        except FileNotFoundError:
            raise UserFileNotFound(
                f"{path}: no such file on the worker's machine; send its text in params 'text' "
                "or check the path mapping"
            ) from None
    else:
        source = text
        # mtime None: linecache.checkcache keeps the entry (it cannot be compared to the disk file)
        _cache_lines(path, text)
    module_name = name or unique_module_name(path)
    module = types.ModuleType(module_name)
    module.__file__ = path
    if package is None:
        package, _ = package_of(path)
    module.__package__ = package or ""
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules[module_name] = module
    with siblings_as_modules(path, source):
        if failures is None:
            exec(_compiled(source, path, module.__dict__, carry_origins), module.__dict__)
        else:
            run_statements(source, path, module.__dict__, failures, guard, carry_origins=carry_origins)
    return module


@contextlib.contextmanager
def siblings_as_modules(path: str, source: str | bytes) -> Iterator[None]:
    """While the file runs: ``from pkg import name`` of a module beside it (``name.py`` in its own folder,
    ``pkg`` named for that folder) gives that module, as when the package imports the file in its own
    order, even where the package's ``__init__`` later rebinds ``name`` to something else. jax's megablox
    ``__init__`` rebinds ``gmm`` to ``ops.gmm``, so ``ops.py`` run on its own got that function for
    ``from ...megablox import gmm as backend`` and failed at ``backend.gmm`` ("AttributeError")."""
    folder = os.path.dirname(path)
    patches = []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        tree = ast.Module(body=[], type_ignores=[])
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and node.module.rsplit(".", 1)[-1] == os.path.basename(folder)):
            continue
        for alias in node.names:
            if not os.path.isfile(os.path.join(folder, f"{alias.name}.py")):
                continue
            try:
                package = importlib.import_module(node.module)
                module = importlib.import_module(f"{node.module}.{alias.name}")
            except Exception:  # noqa: BLE001 - the file's own import says what is wrong, at its line
                continue
            if getattr(package, alias.name, None) is not module:
                patches.append((package, alias.name, getattr(package, alias.name, ABSENT), module))
    for package, name, _, module in patches:
        setattr(package, name, module)
    try:
        yield
    finally:
        restore_attributes([(package, name, before) for package, name, before, _ in reversed(patches)])


ABSENT = object()  # an attribute that was not there (``restore_attributes`` deletes it again)


def restore_attributes(saved: Iterable[tuple[Any, str, Any]]) -> None:
    """Put each (holder, attribute, value before) back; a value of ``ABSENT`` deletes the attribute."""
    for holder, name, before in saved:
        if before is ABSENT:
            with contextlib.suppress(AttributeError):
                delattr(holder, name)
        else:
            setattr(holder, name, before)


def _compiled(source: str | bytes, path: str, namespace: dict[str, Any], carry_origins: bool) -> Any:
    if not carry_origins:
        return compile(source, path, "exec", dont_inherit=True)
    from .origin_values import compile_carried

    return compile_carried(source, path, namespace)


def run_statements(source: str | bytes, path: str, namespace: dict[str, Any],
                   failures: list[tuple[int, BaseException]],
                   guard: Callable[[], ContextManager[Any]] | None = None, *, carry_origins: bool = False) -> None:
    """Execute the module's top-level statements one by one in ``namespace`` (each inside
    ``guard()``); a statement that raises is recorded in ``failures`` as (1-based line, exception)
    and the next one runs, until a ``StopLoading``."""
    if carry_origins:
        from .origin_values import rewrite_statements

        tree = rewrite_statements(source, path, namespace)
    else:
        tree = compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    flags = 0
    for node in tree.body:  # the file's `from __future__ import ...` applies to every statement
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                flags |= getattr(getattr(__future__, alias.name, None), "compiler_flag", 0)
    for node in tree.body:
        try:
            with guard() if guard is not None else contextlib.nullcontext():
                exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec", flags=flags, dont_inherit=True),
                     namespace)
        except (Exception, SkipStatement) as exc:  # noqa: BLE001 - the user's statement failed: record it, go on
            failures.append((node.lineno, exc))
        except StopLoading as exc:
            failures.append((node.lineno, exc))
            return


class _SentModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the local modules a request carried (``messages.Sources.modules``) ahead of the disk:
    each compiles from the sent text under its original path, so a worker on another machine needs
    no copy of the user's folder and tracebacks still name the user's files."""

    def __init__(self, modules: dict[str, tuple[str, str, bool]], carry_origins: bool = False) -> None:
        self.modules = modules  # dotted name -> (original path, text, is_package)
        self.carry_origins = carry_origins

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.modules:
            return None
        file, _, is_package = self.modules[fullname]
        spec = importlib.util.spec_from_loader(fullname, self, origin=file, is_package=is_package)
        if spec is not None:
            spec.has_location = True
            if is_package:
                spec.submodule_search_locations = [os.path.dirname(file)]
        return spec

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        file, text, _ = self.modules[module.__name__]
        module.__file__ = file
        _cache_lines(file, text)
        exec(_compiled(text, file, module.__dict__, self.carry_origins), module.__dict__)


def _cache_lines(path: str, text: str) -> None:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[path] = (len(text), None, lines, path)


def sent_modules(source: Any) -> list[tuple[str, str, str]]:
    """(dotted name, original path, text) of the local modules a request's ``Sources`` carried."""
    return [(m.module, m.path, m.text) for m in source.modules if m.module] if source is not None else []


@contextlib.contextmanager
def user_module(path: str, text: str | None = None, modules: Iterable[tuple[str, str, str]] = (),
                package: str | None = None, failures: list[tuple[int, BaseException]] | None = None,
                guard: Callable[[], ContextManager[Any]] | None = None,
                carry_origins: bool = False) -> Iterator[types.ModuleType]:
    """Load the file for the duration of one request, then remove every trace of it.

    ``modules``: (dotted name, original path, text) of the local modules the client sent; they are
    imported from that text (before anything on disk) and dropped again afterwards. ``failures``,
    ``guard``, ``carry_origins``: see ``load_user_module``."""
    path = os.path.abspath(path)
    sent = {name: (os.path.abspath(file), body, os.path.basename(file) == "__init__.py")
            for name, file, body in modules}
    finder = _SentModules(sent, carry_origins) if sent else None
    if finder is not None:
        sys.meta_path.insert(0, finder)
    folder = os.path.dirname(path)
    _, package_root = package_of(path)
    added = [folder] + ([package_root] if package_root and package_root != folder else [])
    added += [root for root in namespace_roots(path, text) if root not in added]
    user_folders = tuple(os.path.realpath(f) + os.sep for f in added)
    installed = _installed_roots()
    modules_before = set(sys.modules)
    for entry in reversed(added):
        sys.path.insert(0, entry)
    name = unique_module_name(path)
    try:
        yield load_user_module(path, text, name=name, package=package, failures=failures, guard=guard,
                               carry_origins=carry_origins)
    finally:
        for entry in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)
        if finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(finder)
            for sent_name in sent:
                if sent_name not in modules_before:  # never one the worker had before (numpy.py next to a kernel)
                    sys.modules.pop(sent_name, None)
        sys.modules.pop(name, None)
        for mod_name in set(sys.modules) - modules_before:
            file = getattr(sys.modules.get(mod_name), "__file__", None)
            if mod_name == "pallasite" or mod_name.startswith("pallasite."):
                continue  # our own modules (an editable install lives in a user-like folder)
            if file and _is_under(file, user_folders) and not _is_under(file, installed):
                sys.modules.pop(mod_name, None)
