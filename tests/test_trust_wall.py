"""The trust wall drawn by files (issue 61): everything that runs in the candidate's process is
runner/judging/candidate.py, which imports nothing of the judge's side - of the judging wing only the channel's
shared frames (frames.py) and its own PID namespace (nest.py) - and no module of the judge's side imports it (the
judge names it to start a process, never imports it). Read from every import, lazy ones included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WING = "pallasite.runner.judging"
CANDIDATE = f"{WING}.candidate"
SHARED = {f"{WING}.frames", f"{WING}.nest", WING}  # (the package itself: its ACTIVE flag, never the judge)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("pallasite", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def imports(text: str, name: str) -> set[str]:
    """Every module ``text`` (the module ``name``) imports, relative imports resolved, lazy ones included."""
    package = name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)  # (``from . import x``: a module x)
    return out


def judge_side_modules() -> set[str]:
    return {module_name(p) for p in (ROOT / "runner" / "judging").glob("*.py")} - SHARED - {CANDIDATE}


def wall_breaches(candidate_text: str, others: dict[str, str]) -> list[str]:
    judge_side = judge_side_modules()
    breaches = [f"candidate.py imports {m}" for m in sorted(imports(candidate_text, CANDIDATE) & judge_side)]
    for name, text in others.items():
        if CANDIDATE in imports(text, name):
            breaches.append(f"{name} imports the candidate's module")
    return breaches


def test_the_candidates_process_and_the_judges_side_import_nothing_of_each_other():
    others = {module_name(p): p.read_text() for folder in ("runner", "engine", "agents", "server", "wire", "analysis")
              for p in (ROOT / folder).rglob("*.py") if module_name(p) != CANDIDATE}
    assert len(judge_side_modules()) > 10 and f"{WING}.judge" in judge_side_modules()
    assert wall_breaches((ROOT / "runner" / "judging" / "candidate.py").read_text(), others) == []


def test_the_check_sees_a_breach_either_way():
    candidate = (ROOT / "runner" / "judging" / "candidate.py").read_text()
    assert wall_breaches(candidate + "\nfrom .judge import JUDGE\n", {}) == [
        f"candidate.py imports {WING}.judge"]
    assert wall_breaches(candidate, {f"{WING}.judge": "def f():\n    from .candidate import main\n"}) == [
        f"{WING}.judge imports the candidate's module"]
