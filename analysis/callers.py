"""Callers of a kernel file anywhere in the workspace, read as source (nothing imported or run).

A kernel library's file states no task and calls nothing itself; its tests, benchmarks and the model
code call it. ``find_callers(path, root)`` finds the workspace's files that import it — by any name whose
dotted tail is the file's own path (``from jax.experimental.pallas.ops.tpu import paged_attention`` names
``.../ops/tpu/paged_attention/``; ``from kernels.flash import attention`` names ``kernels/flash.py``) — and
in each, the test functions that reach it (a ``test_*`` function, a ``Class.test_*`` method, or one calling
a function of the file that uses the imported name). The worker runs them (``runner/tasks/tasks_callers.py``).

The search is bounded (``Limits``: files, bytes, seconds): a folder walk that skips virtual environments,
build output and hidden folders, tests and benchmarks first; each file's import lines are indexed once
per process (re-read when its size or time changes), and only the files whose imports name the kernel
file's stem or folder are parsed. ``CallerSearch.describe()`` says what was searched, for the note that
says none was found. Never imports JAX; stdlib only.
"""

from __future__ import annotations

import ast
import os
import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .local_imports import package_of

SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "build", "dist", "venv", "env",
                       "htmlcov", "third_party"})
FIRST_DIRS = ("tests", "test", "benchmarks", "benchmark", "bench", "examples")
MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import\b(.*)|import[ \t]+(.+))", re.M)
_WORD = re.compile(rb"\w+")


@dataclass(frozen=True)
class Limits:
    files: int = 4000  # .py files looked at
    bytes: int = 64 * 2**20  # text read
    seconds: float = 3.0
    file_bytes: int = 2 * 2**20  # larger files are not read
    callers: int = 3  # caller files handed to the worker
    tests: int = 24  # tests listed per caller


@dataclass(frozen=True)
class Caller:
    path: str  # absolute
    shown: str  # relative to the workspace root
    alias: str  # the dotted name the caller imports the kernel file by
    tests: tuple[str, ...]  # "test_fn" or "Class.test_method", in file order; then functions its __main__ calls
    line: int  # 1-based line of its import
    exact: bool  # it imports the file itself (not its package)
    at_import: bool = False  # its top-level code uses the file (a script, a notebook-style benchmark)


@dataclass(frozen=True)
class CallerSearch:
    root: str
    callers: tuple[Caller, ...] = ()
    files: int = 0
    bytes: int = 0
    stopped: str = ""  # why the walk ended early ("" when it saw the whole workspace)

    def describe(self) -> str:
        """What was searched: "searched 312 Python files (1.9 MB) under /repo"."""
        files = f"{self.files} Python file{'s' if self.files != 1 else ''}"
        said = f"searched {files} ({self.bytes / 2**20:.1f} MB) under {self.root}"
        return said + (f", stopped at {self.stopped}" if self.stopped else "")


def workspace_root(path: str, cwd: str | None = None) -> str:
    """The folder callers are searched in: the nearest folder above ``path`` holding a project marker
    (``.git``, ``pyproject.toml``, ``setup.py``, ``setup.cfg``), else the working folder when it holds
    the file, else the file's folder."""
    folder = os.path.dirname(os.path.abspath(path))
    probe = folder
    for _ in range(32):
        if any(os.path.exists(os.path.join(probe, m)) for m in MARKERS):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    cwd = os.path.abspath(cwd or os.getcwd())
    return cwd if (folder + os.sep).startswith(cwd.rstrip(os.sep) + os.sep) else folder


def find_callers(path: str, root: str | None = None, limits: Limits = Limits()) -> CallerSearch:
    """The workspace's callers of the kernel file at ``path``, best first (see the module docstring): files
    that import it (or a package above it that re-exports it) and have tests reaching it; a module of the
    workspace that imports it without tests of its own (megablox's ``ops.py`` over ``gmm.py``) is followed
    to its own callers, two steps at most, the kernel file's name kept for the alias."""
    path = os.path.abspath(path)
    root = os.path.abspath(root or workspace_root(path))
    comps = _module_parts(path)
    started = time.monotonic()
    files = read = 0
    stopped = ""
    found: dict[str, Caller] = {}
    frontier = [(path, comps, None)]  # (file, its dotted parts, the alias of the kernel file, once known)
    seen = {path}
    for _ in range(3):
        following = []
        for file, parts, alias in frontier:
            left = Limits(limits.files, limits.bytes, max(0.1, limits.seconds - (time.monotonic() - started)),
                          limits.file_bytes, limits.callers, limits.tests)
            keys, reexported = _keys(file, parts)
            n, r, why, candidates = _INDEX.candidates(root, keys, left, exclude=file)
            files, read, stopped = max(files, n), max(read, r), stopped or why
            for candidate in candidates:
                caller = _caller(candidate, root, parts, reexported, limits)
                if caller is None or candidate in seen:
                    continue
                seen.add(candidate)
                caller = replace(caller, alias=alias or caller.alias, exact=caller.exact and alias is None)
                if caller.tests or (caller.at_import and package_of(candidate)[0] is None):  # a test, a script
                    found.setdefault(candidate, caller)
                elif caller.exact or alias is not None:  # a module of the workspace: follow it to its callers
                    following.append((candidate, _module_parts(candidate), caller.alias if alias is None else alias))
        frontier = following
        if not frontier or len(found) >= limits.callers:
            break
    ranked = sorted(found.values(), key=lambda c: (not c.exact, not c.tests, not _test_like(c.shown),
                                                  -_common(c.path, path),
                                                  -len(os.path.commonprefix([comps[-1], os.path.basename(c.path)])),
                                                  len(os.path.basename(c.path)), c.shown))
    return CallerSearch(root, tuple(ranked[:limits.callers]), files, read, stopped)


def _common(a: str, b: str) -> int:
    """Folders two paths share (a test beside the kernel shares its folder)."""
    return len(os.path.commonpath([os.path.dirname(a), os.path.dirname(b)]).split(os.sep))


def _keys(path: str, comps: list[str]) -> tuple[set[bytes], bool]:
    """(words an import of the file must contain, whether its package re-exports it): its name, and its
    package's when the package's ``__init__`` names the file."""
    keys = {comps[-1].encode()}
    init = os.path.join(os.path.dirname(path), "__init__.py")
    reexported = False
    if os.path.basename(path) != "__init__.py" and len(comps) > 1:
        try:
            with open(init, "rb") as f:
                reexported = comps[-1].encode() in f.read(256 * 1024)
        except OSError:
            pass
    if reexported:
        keys.add(comps[-2].encode())
    return keys, reexported


def _module_parts(path: str) -> list[str]:
    parts = list(Path(path).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _test_like(shown: str) -> bool:
    name = os.path.basename(shown)
    parts = set(Path(shown).parts[:-1])
    return name.startswith("test") or name.endswith("_test.py") or bool(parts & set(FIRST_DIRS))


# --------------------------------------------------------------------------- one caller file


def _caller(file: str, root: str, comps: list[str], reexported: bool, limits: Limits) -> Caller | None:
    summary = _INDEX.summary(file)
    if summary is None:
        return None
    best: tuple[bool, str, int, set[str]] | None = None
    for dotted, bound, line in summary.imports:
        alias, exact = _alias(dotted, comps, reexported)
        if alias is None:
            continue
        if best is None or (exact and not best[0]):
            best = (exact, alias, line, {bound})
        elif best[1] == alias:
            best[3].add(bound)
    if best is None:
        return None
    exact, alias, line, names = best
    reaching = _reaching(summary.functions, names)
    return Caller(path=file, shown=os.path.relpath(file, root), alias=alias, line=line, exact=exact,
                  tests=_tests(summary, reaching, limits.tests), at_import=bool(summary.toplevel & reaching))


@dataclass(frozen=True)
class _Summary:
    imports: list[tuple[str, str, int]]  # (dotted name, the name it binds, 1-based line)
    functions: list[tuple[str, str, set[str]]]  # (qualified name, name, names it reads)
    toplevel: set[str]  # names the top-level code reads (not in functions, classes or the __main__ block)
    main_calls: list[str]  # functions of the file its ``if __name__ == "__main__":`` block calls with no argument
    derived: list[str]  # test classes built on a base of another file (their inherited tests are not read here)


def _summary(file: str) -> _Summary | None:
    try:
        with open(file, "rb") as f:
            tree = ast.parse(f.read(), file)
    except (OSError, SyntaxError, ValueError):
        return None
    package, _ = package_of(file)
    imports = [(dotted, bound, node.lineno) for node in ast.walk(tree) for dotted, bound in _imported(node, package)]
    functions: list[tuple[str, str, set[str]]] = []
    toplevel: set[str] = set()
    main_calls: list[str] = []
    derived: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append((node.name, node.name, _reads(node)))
        elif isinstance(node, ast.ClassDef):
            if "Test" in node.name and any(not ast.unparse(b).endswith("TestCase") for b in node.bases):
                derived.append(node.name)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions.append((f"{node.name}.{item.name}", item.name, _reads(item)))
        elif _is_main_block(node):
            main_calls += [n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                           and not n.args and not n.keywords]
        elif not isinstance(node, (ast.Import, ast.ImportFrom)):
            toplevel |= _reads(node)
    return _Summary(imports, functions, toplevel, main_calls, derived)


def _is_main_block(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


def _imported(node: ast.AST, package: str | None) -> list[tuple[str, str]]:
    """(dotted name, the name it binds in the file) for an import statement: ``import a.b as x`` gives
    (a.b, x); ``from a.b import c`` gives (a.b, c) — c read from the module a.b — and (a.b.c, c) — c a
    module itself."""
    if isinstance(node, ast.Import):
        return [(a.name, a.asname or a.name.split(".")[0]) for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        if not package:
            return []
        parts = package.split(".")
        if node.level - 1 >= len(parts):
            return []
        base = ".".join(parts[:len(parts) - (node.level - 1)] + ([base] if base else []))
    names = [(a.name, a.asname or a.name) for a in node.names if a.name != "*"]
    return ([(base, bound) for _, bound in names] if base else []) + [
        (f"{base}.{name}" if base else name, bound) for name, bound in names]


def _alias(dotted: str, comps: list[str], reexported: bool) -> tuple[str | None, bool]:
    """The name the caller would import the kernel file by, when ``dotted`` names it (its dotted tail is the
    file's path: exact) or its package, when the package re-exports it; and whether it is exact. A name of
    one part names it only as a whole; longer ones need two parts in common."""
    parts = dotted.split(".")
    for up in ((0, 1) if reexported else (0,)):
        target = comps[:len(comps) - up]
        common = 0
        while common < min(len(parts), len(target)) and parts[-1 - common] == target[-1 - common]:
            common += 1
        if common and (common == len(parts) or common >= 2):
            return ".".join(parts + comps[len(comps) - up:]), up == 0
    return None, False


def _reaching(functions: list[tuple[str, str, set[str]]], names: set[str]) -> set[str]:
    """``names`` (the imported kernel file or its functions), the strings that name one of them
    (``impl="pallas_philox4x32"``), and the file's functions that use any of them, directly or through
    another function of the file."""
    reaching = {n for n in names if n}
    reaching |= {r for _, _, reads in functions for r in reads
                 if r.startswith("'") and any(len(n) > 3 and n in r for n in names if n)}
    changed = True
    while changed:  # a helper of the file that calls the kernel reaches it too
        changed = False
        for _, simple, reads in functions:
            if simple not in reaching and reads & reaching:
                reaching.add(simple)
                changed = True
    return reaching


def _tests(summary: _Summary, reaching: set[str], most: int) -> tuple[str, ...]:
    """The test functions and ``Class.test_*`` methods that reach the kernel file (``_reaching``), then
    the functions the ``__main__`` block calls that do (a benchmark's ``main()``); when no test reaches
    it, every test of the file (jax's random tests import ``philox`` only to register its PRNG); last,
    ``Class.test`` for a test class built on another file's base (tokamax's ``test_base``): all its tests."""
    tests = [q for q, simple, reads in summary.functions if simple.startswith("test") and reads & reaching]
    if not tests:
        tests = [q for q, simple, _ in summary.functions if simple.startswith("test")]
    tests += [name for name in dict.fromkeys(summary.main_calls) if name in reaching and name not in tests]
    tests = tests[:most - len(summary.derived)] + [f"{cls}.test" for cls in summary.derived]  # every inherited test
    return tuple(tests[:most])


def _reads(node: ast.AST) -> set[str]:
    """The names a function reads, and ``"'<text>"`` for each short string it holds (a registered name such as
    ``impl="pallas_philox4x32"`` reaches the module that registers it)."""
    out = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
           if isinstance(n, (ast.Name, ast.Attribute))}
    return out | {"'" + n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and 2 < len(n.value) <= 64}


# --------------------------------------------------------------------------- the workspace's import index


class _Index:
    """Per workspace root: each Python file's (size, mtime, the words of its import lines)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[int, int, frozenset[bytes]]] = {}
        self._parsed: dict[str, tuple[tuple[int, int], _Summary | None]] = {}

    def candidates(self, root: str, keys: set[bytes], limits: Limits,
                   exclude: str) -> tuple[int, int, str, list[str]]:
        """(files looked at, bytes read or known, why the walk stopped, files whose imports name a key)."""
        started = time.monotonic()
        files = read = 0
        stopped = ""
        out = []
        with self._lock:
            for file, size, mtime in _walk(root):
                if files >= limits.files:
                    stopped = f"the limit of {limits.files} files"
                    break
                if read + size > limits.bytes:
                    stopped = f"the limit of {limits.bytes // 2**20} MB"
                    break
                if time.monotonic() - started > limits.seconds:
                    stopped = f"the limit of {limits.seconds:g} s"
                    break
                files += 1
                if size > limits.file_bytes:
                    continue
                read += size
                words = self._words(file, size, mtime)
                if file != exclude and words & keys:
                    out.append(file)
        return files, read, stopped, out

    def summary(self, file: str) -> _Summary | None:
        """``_summary(file)``, parsed once per size and time of the file."""
        try:
            st = os.stat(file)
        except OSError:
            return None
        key = (st.st_size, st.st_mtime_ns)
        with self._lock:
            known = self._parsed.get(file)
            if known is not None and known[0] == key:
                return known[1]
        found = _summary(file)
        with self._lock:
            self._parsed[file] = (key, found)
        return found

    def _words(self, file: str, size: int, mtime: int) -> frozenset[bytes]:
        known = self._files.get(file)
        if known is not None and known[:2] == (size, mtime):
            return known[2]
        try:
            with open(file, "rb") as f:
                data = f.read()
        except OSError:
            data = b""
        words = frozenset(w for m in _IMPORT_LINE.finditer(data) for g in m.groups() if g for w in _WORD.findall(g))
        self._files[file] = (size, mtime, words)
        return words


_INDEX = _Index()


def _walk(root: str):
    """(path, size, mtime_ns) of the Python files under ``root``: tests and benchmarks first, no hidden,
    virtual-environment or build folders."""
    def order(names: list[str]) -> list[str]:
        return sorted(names, key=lambda n: (n not in FIRST_DIRS, n))

    for folder, dirs, names in os.walk(root):
        dirs[:] = order([d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS
                         and not os.path.isfile(os.path.join(folder, d, "pyvenv.cfg"))])
        for name in sorted(names):
            if name.endswith(".py"):
                file = os.path.join(folder, name)
                try:
                    st = os.stat(file)
                except OSError:
                    continue
                yield file, st.st_size, st.st_mtime_ns
