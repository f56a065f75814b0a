"""Issue 49: one comparison function, one timing loop, one rank function, read from the code itself.

Each test scans the project's modules (ast, not text, so a comment or docstring does not count) and fails
when a second comparison, timing loop or ranking appears beside the one the judge uses. The request side
("one place that builds a judging request") is tests/test_one_verdict.py's
``test_only_the_judge_sends_a_candidate_to_be_estimated_tested_or_timed``.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("runner", "engine", "agents", "server", "analysis", "knowledge", "wire")


@cache
def _nodes() -> tuple[tuple[str, ast.AST], ...]:
    """Every node of every module of the project's layers, with its module's path."""
    return tuple((path.relative_to(ROOT).as_posix(), node) for layer in LAYERS
                 for path in sorted((ROOT / layer).rglob("*.py"))
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def _calls(name_of_interest: set[str]) -> list[tuple[str, str, int]]:
    """(module path, called name, line) for every call whose function name is in ``name_of_interest``."""
    found = []
    for rel, node in _nodes():
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in name_of_interest:
                found.append((rel, name, node.lineno))
    return found


def _defs(name: str) -> list[str]:
    return [rel for rel, node in _nodes() if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name]


def test_outputs_are_compared_with_a_reference_in_one_function():
    """Closeness to a reference is computed only in runner/tier3/interpret_compare.compare; the judge reaches it
    through timing_guards.compare_outputs, which only runner/judging/ calls."""
    closeness = _calls({"allclose", "isclose", "assert_allclose", "assert_array_almost_equal"})
    assert closeness == [], closeness
    assert _defs("compare") == ["runner/tier3/interpret_compare.py"]
    callers = {rel for rel, _, _ in _calls({"compare_outputs"})}
    assert callers and all(rel.startswith("runner/judging/") for rel in callers), callers


def test_a_candidate_is_timed_in_one_loop():
    """The judged time is runner/measure/timing.time_pair's interleaved loop; the profile's loop beside it measures
    the profiler's overhead for the profile view and never makes a judged figure (runner/judging/timing_profile.py)."""
    timed = {rel for rel, _, _ in _calls({"perf_counter_ns"})}
    assert timed == {"runner/measure/timing.py", "runner/judging/timing_profile.py"}, timed
    assert _defs("time_pair") == ["runner/measure/timing.py"]
    users = {rel for rel, _, _ in _calls({"time_pair"})}
    assert users and users <= {"runner/judging/judge.py", "runner/judging/exported_run.py", "runner/measure/timing.py"}, users


def test_every_winner_is_chosen_by_the_one_rank():
    """analysis.verdict.rank is the only ranking; tune, search, eval and pick_winner call it."""
    assert _defs("rank") == ["analysis/verdict.py"]
    callers = {rel for rel, _, _ in _calls({"rank"})}
    assert {"engine/tuning/tune.py", "agents/eval_agents.py", "agents/search_graph.py", "analysis/verdict.py"} <= callers
