"""Front ends stay thin (issue 37): no CLI front end (``server/commands/cmd_*.py``) imports another, and no
other server module imports one (what they share lives in server/run_request.py, server/commands/flags.py or
below); a CLI ``run`` and an editor command function (``server/editor/*_lsp.py``) are at most 30 lines.

Functions still over 30 lines would be listed by name in ``STILL_LONG`` (empty now): the list may only
shrink (a new long function fails, and so does a listed one that got short without leaving the list)."""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parent.parent / "server"
MAX_LINES = 30
STILL_LONG: set[tuple[str, str]] = set()  # none left (issue 37 listed eight, the CLI runs of eval, optimize, ...)


def _front_ends(server: Path = SERVER) -> list[Path]:
    return sorted((server / "commands").glob("cmd_*.py"))


def _module_of(path: Path, server: Path) -> list[str]:
    rel = path.relative_to(server).with_suffix("")
    parts = ["pallasite", "server", *rel.parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported_modules(path: Path, server: Path = SERVER) -> set[str]:
    """The dotted names ``path`` imports, resolved (``from . import x``, ``from .x import y``,
    ``pallasite.server.x``; each ``from a import b`` gives both ``a`` and ``a.b``), lazy imports included."""
    package = _module_of(path, server)
    package = package if path.name == "__init__.py" else package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def front_end_imports(server: Path = SERVER) -> list[str]:
    fronts = {"pallasite.server.commands." + p.stem: p for p in _front_ends(server)}
    wrong = []
    for path in sorted(server.rglob("*.py")):
        own = ".".join(_module_of(path, server))
        for target in sorted(set(fronts) & _imported_modules(path, server) - {own}):
            wrong.append(f"server/{path.relative_to(server)} imports server/commands/{fronts[target].name}")
    return wrong


def _long_functions(server: Path = SERVER) -> dict[tuple[str, str], int]:
    out = {}
    paths = [p for p in server.rglob("*.py") if p.stem.startswith("cmd_") or p.stem.endswith("_lsp")]
    for path in paths:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
                continue
            if path.stem.startswith("cmd_") and node.name != "run":
                continue
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                out[(path.stem, node.name)] = lines
    return out


def test_no_front_end_imports_another():
    assert not front_end_imports(), "\n".join(front_end_imports())


def test_no_new_long_run_or_command_function():
    long = _long_functions()
    new = {k: v for k, v in long.items() if k not in STILL_LONG}
    assert not new, f"over {MAX_LINES} lines (move the setup into server/run_request.py or a service): {new}"


def test_the_list_of_long_functions_only_shrinks():
    gone = STILL_LONG - set(_long_functions())
    assert not gone, f"now at most {MAX_LINES} lines: remove them from STILL_LONG: {sorted(gone)}"


def test_a_front_end_importing_another_is_caught(tmp_path):
    (tmp_path / "commands").mkdir()
    (tmp_path / "editor").mkdir()
    (tmp_path / "commands" / "cmd_a.py").write_text("def run(args):\n    from .cmd_b import helper\n")
    (tmp_path / "commands" / "cmd_b.py").write_text("from pallasite.server.commands import cmd_a\n")
    (tmp_path / "editor" / "search_lsp.py").write_text("from ..commands import cmd_b\n")
    (tmp_path / "run_setup.py").write_text("from .commands.flags import add\n")
    assert front_end_imports(tmp_path) == ["server/commands/cmd_a.py imports server/commands/cmd_b.py",
                                           "server/commands/cmd_b.py imports server/commands/cmd_a.py",
                                           "server/editor/search_lsp.py imports server/commands/cmd_b.py"]


def test_a_long_run_is_caught(tmp_path):
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "cmd_x.py").write_text("def run(args):\n" + "    pass\n" * 31 + "\ndef helper():\n" + "    pass\n" * 40)
    assert _long_functions(tmp_path) == {("cmd_x", "run"): 32}


# the agent commands' front ends: the CLI's and the editor's
AGENT_FRONT_ENDS = ("cmd_fix", "cmd_optimize", "cmd_search", "cmd_eval", "cmd_tune", "fix_command", "optimize_lsp",
                    "search_lsp", "tune_lsp")
# what only agents/run_setup.py decides: settings, store, recorder, workspace, the confinement refusal
SETUP_NAMES = {"load_project_settings", "apply_project_defaults", "ResultsStore", "OptimizeRecorder", "workspace_for",
               "untrusted_problem", "refusal_for", "judge_tiers", "TARGETS"}


def _front_end(server: Path, stem: str) -> Path:
    """An agent command's front end: the CLI's in server/commands/, the editor's in server/editor/."""
    return server / ("commands" if stem.startswith("cmd_") else "editor") / f"{stem}.py"


def setup_made_in_front_ends(server: Path = SERVER) -> list[str]:
    """``module: name`` for each setup decision a front end makes itself instead of asking the run setup."""
    found = []
    for stem in AGENT_FRONT_ENDS:
        tree = ast.parse(_front_end(server, stem).read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        found += [f"{stem}: {name}" for name in sorted(names & SETUP_NAMES)]
    return found


def test_every_agent_command_is_set_up_by_the_one_run_setup():
    """fix, optimize, search, eval and tune, from the CLI and the editor, get their settings, chip, check
    options, device, store, recorder and refusal from agents/run_setup.prepare; none makes them itself."""
    assert not setup_made_in_front_ends(), setup_made_in_front_ends()
    for stem in AGENT_FRONT_ENDS:
        text = _front_end(SERVER, stem).read_text(encoding="utf-8")
        assert "prepare(" in text or "run_setup(" in text, f"server/{stem}.py does not use the run setup"


def test_a_front_end_deciding_its_own_setup_is_caught(tmp_path):
    for folder in ("commands", "editor"):
        (tmp_path / folder).mkdir()
    for stem in AGENT_FRONT_ENDS:
        _front_end(tmp_path, stem).write_text("def run(args):\n    return prepare(args)\n")
    assert setup_made_in_front_ends(tmp_path) == []
    (tmp_path / "commands" / "cmd_tune.py").write_text("from ...knowledge.store import ResultsStore\n"
                                          "def run(args):\n    return ResultsStore.open(args.path)\n")
    assert setup_made_in_front_ends(tmp_path) == ["cmd_tune: ResultsStore"]


def functions_taking_args(path: Path) -> list[str]:
    """The functions of a front end with an ``args`` parameter (argparse's Namespace, by this code's convention)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted(node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and any(a.arg == "args" for a in node.args.args + node.args.kwonlyargs))


def test_optimize_converts_its_arguments_once_at_the_door(tmp_path):
    """issue 61: optimize's flags become its typed request in ``_request``; nothing below ``run`` takes argparse."""
    assert functions_taking_args(SERVER / "commands" / "cmd_optimize.py") == ["_request", "run"]
    (tmp_path / "cmd_x.py").write_text("def run(args):\n    return _render(args)\n\ndef _render(args):\n    return 0\n")
    assert functions_taking_args(tmp_path / "cmd_x.py") == ["_render", "run"]
