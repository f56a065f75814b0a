"""The language server's shape (issue 28), checked over its source (AST), like test_layers.py:

- thin handlers: no function of the LSP handler module or of the command modules over
  ``MAX_HANDLER_LINES`` lines (the shared work lives in job_command.py and the agents' services);
- ``Session`` under ``MAX_SESSION_METHODS`` methods, its own and inherited (logic lives in plain
  functions of small modules: tier0_runs.py, checks.py, session_settings.py);
- no ``hasattr``/``setattr``/``getattr`` on the pygls server object (``ls``, ``server``, ``client``,
  ``self.client``) nor attributes assigned to it: feature state is ``Session.features`` (features.py);
- ``DocumentSnapshot`` is immutable: a frozen dataclass, and nothing in server/ assigns to a snapshot.

Each checker is run on the package and on a synthetic module that breaks its rule, so the checks
are known to catch what they are for.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
SERVER = PACKAGE_ROOT / "server"
# the handlers (lsp.py) and the modules the commands' handlers call into
HANDLER_MODULES = ("lsp.py", "editor/job_command.py", "editor/search_lsp.py", "editor/optimize_lsp.py",
                   "editor/tune_lsp.py", "editor/timing_lsp.py", "editor/fix_command.py")
MAX_HANDLER_LINES = 30
MAX_SESSION_METHODS = 15  # Session must have fewer
SERVER_NAMES = ("ls", "server", "client")


def long_functions(source: str, limit: int = MAX_HANDLER_LINES) -> list[str]:
    """``name (N lines)`` of every function (nested ones counted within their parent) over ``limit``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                out.append(f"{node.name} ({lines} lines)")
    return out


def _is_server_object(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in SERVER_NAMES
    return isinstance(node, ast.Attribute) and node.attr == "client" and isinstance(node.value, ast.Name) \
        and node.value.id == "self"


def server_attribute_uses(source: str) -> list[str]:
    """``line: what`` of every ``hasattr``/``getattr``/``setattr``/``delattr`` on the server object and
    every attribute assigned to it (``ls.x = ...``) outside a class body (its own ``__init__``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr", "setattr", "delattr") and node.args
                and _is_server_object(node.args[0])):
            out.append(f"{node.lineno}: {node.func.id}({ast.unparse(node.args[0])}, ...)")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and target.value.id in SERVER_NAMES:
                out.append(f"{node.lineno}: assigns {ast.unparse(target)}")
    return sorted(out, key=lambda found: int(found.split(":")[0]))


def snapshot_mutations(source: str) -> list[str]:
    """``line: what`` of every assignment to an attribute of a name that holds a snapshot
    (``snapshot``, ``snap``, ``*_snapshot``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and (
                        part.value.id in ("snapshot", "snap") or part.value.id.endswith("_snapshot")):
                    out.append(f"{node.lineno}: assigns {ast.unparse(part)}")
    return out


def method_count(cls: type) -> int:
    """Functions and properties a class defines or inherits (not ``object``'s)."""
    names = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        names.update(n for n, v in vars(klass).items()
                     if callable(v) or isinstance(v, (property, staticmethod, classmethod)))
    return len(names)


# --------------------------------------------------------------------------- the package


def test_no_handler_is_over_30_lines():
    found = {name: long_functions((SERVER / name).read_text(encoding="utf-8")) for name in HANDLER_MODULES}
    assert {k: v for k, v in found.items() if v} == {}


def test_session_has_fewer_than_15_methods():
    from pallasite.server.session import Session

    assert method_count(Session) < MAX_SESSION_METHODS, sorted(
        n for k in Session.__mro__ if k is not object for n, v in vars(k).items()
        if callable(v) or isinstance(v, property))


def test_nothing_is_hung_on_the_server_object():
    found = {path.name: server_attribute_uses(path.read_text(encoding="utf-8")) for path in SERVER.rglob("*.py")}
    assert {k: v for k, v in found.items() if v} == {}


def test_document_snapshots_are_immutable():
    from pallasite.server.documents import DocumentSnapshot

    assert dataclasses.is_dataclass(DocumentSnapshot) and DocumentSnapshot.__dataclass_params__.frozen
    found = {path.name: snapshot_mutations(path.read_text(encoding="utf-8")) for path in SERVER.rglob("*.py")}
    assert {k: v for k, v in found.items() if v} == {}


# --------------------------------------------------------------------------- the checkers catch what they are for


def test_a_long_handler_is_caught():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_HANDLER_LINES))
    assert long_functions(f"async def handler(ls, *args):\n{body}\n") == [f"handler ({MAX_HANDLER_LINES + 1} lines)"]
    assert long_functions("def short(ls):\n    return 1\n") == []


def test_state_hung_on_the_server_is_caught():
    source = textwrap.dedent("""
        def runs(ls):
            if not hasattr(ls, "optimize_runs"):
                ls.optimize_runs = {}
            return getattr(ls, "optimize_runs", {})

        class S:
            def talk(self):
                setattr(self.client, "x", 1)
                return getattr(ls.client_capabilities, "window", None)  # a pygls attribute: fine
        """)
    assert server_attribute_uses(source) == ["3: hasattr(ls, ...)", "4: assigns ls.optimize_runs",
                                             "5: getattr(ls, ...)", "9: setattr(self.client, ...)"]


def test_snapshot_mutation_is_caught():
    source = "def f(snapshot, doc_snapshot):\n    snapshot.text = ''\n    doc_snapshot.findings += ()\n"
    assert snapshot_mutations(source) == ["2: assigns snapshot.text", "3: assigns doc_snapshot.findings"]


def test_methods_are_counted_with_the_inherited_ones():
    class Base:
        def a(self): ...

        @property
        def b(self): ...

    class Child(Base):
        def c(self): ...

    assert method_count(Child) == 3
