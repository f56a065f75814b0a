"""Guards on model-written code that are read from its text: it must not touch the task's tests.

A candidate (a proposed fix, an optimize or search candidate) is judged by the task's own tests: the
inputs (``example_inputs``, JAXBench ``CONFIG``/``create_inputs``), the ``reference`` and the
tolerances (``TOLERANCE``). Code that redefines any of them is marking its own homework, so
``tampering(frozen, candidate)`` names every test definition the candidate adds or changes against
the frozen text (the original file plus the tests the run froze), and every write to one of those
names that is not a plain top-level definition (``global TOLERANCE``, ``globals()["reference"]``,
``setattr(module, "TOLERANCE", ...)``). The fixer refuses such a proposal; optimize fails its
compile phase with the reason (the frozen definitions are also spliced back over the candidate's:
engine/judge_phase.freeze).

Interpret mode is not judged here: whether a pallas_call runs in interpret mode is decided from what
the worker traced (runner/tier3/interpret_guard.py, finding PLS114).
"""

from __future__ import annotations

import ast
import os
import re

# The task's test definitions, by name (the frozen tests of optimize, the fixer's reference).
TEST_NAMES = ("example_inputs", "extra_inputs", "reference", "TOLERANCE", "TOLERANCES", "CONFIG", "create_inputs",
              "workload")
_NAMES = "|".join(TEST_NAMES)
_DYNAMIC = re.compile(rf"""(?:globals\(\)|__dict__|vars\([^)]*\))\s*\[\s*['"](?P<a>{_NAMES})['"]"""
                      rf"""|setattr\([^,]+,\s*['"](?P<b>{_NAMES})['"]""")


def frozen_names(path: str | None) -> tuple[str, ...]:
    """The test names of the file at ``path``. A JAXBench candidate (a ``baseline.py`` beside it) is
    held to the baseline's ``workload``: its own ``workload`` is the kernel being improved, not a test."""
    if path and os.path.basename(path) != "baseline.py" \
            and os.path.isfile(os.path.join(os.path.dirname(os.path.abspath(path)), "baseline.py")):
        return tuple(n for n in TEST_NAMES if n != "workload")
    return TEST_NAMES


def definitions(text: str, names: tuple[str, ...] = TEST_NAMES) -> dict[str, str]:
    """Top-level definitions of the test names (the last one wins, as in Python), as comparable text."""
    out: dict[str, str] = {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            targets_named = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            targets_named = [t.id for t in targets if isinstance(t, ast.Name)]
        else:
            continue
        for name in targets_named:
            if name in names:
                out[name] = ast.dump(node, include_attributes=False)
    return out


def tampering(frozen: str, candidate: str, names: tuple[str, ...] = TEST_NAMES) -> list[str]:
    """What the candidate does to the frozen tests (``names``: ``frozen_names(path)``), as sentences
    ([]: nothing, or it does not parse: the compile phase says that)."""
    try:
        theirs, mine, tree = definitions(frozen, names), definitions(candidate, names), ast.parse(candidate)
    except SyntaxError:
        return []
    out = [f"{'redefines' if name in theirs else 'adds'} the task's {_what(name)}" for name, body in mine.items()
           if theirs.get(name) != body]
    declared = sorted({n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names
                       if n in names})
    out += [f"rebinds the task's {_what(name)} through `global {name}`" for name in declared]
    out += sorted({f"writes the task's {_what(m.group('a') or m.group('b'))} through {m.group(0).split('(')[0]}"
                   for m in _DYNAMIC.finditer(candidate)})
    return out


def _what(name: str) -> str:
    return f"{name}()" if name[0].islower() else name
