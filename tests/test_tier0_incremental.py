"""Incremental tier 0 equals a full analysis: random edit sequences over real kernel files (jax's own
Pallas TPU kernels), each text analysed the way the language server does (``analyze(text, path, state=...)``:
the document's last tree-sitter tree and Python ast units reused) and from scratch (no state);
sites, tasks and findings must be the same.

The default suite runs 42 edits (the same six texts, fewer edits each); ``pytest -m slow tests/test_tier0_incremental.py`` runs 1,120
(the five files, and splash attention with tier 0's fixture kernels spliced in, twice as many).
"""

from __future__ import annotations

import os
import random
import re

import pytest

from pallasite.analysis import ast_units
from pallasite.analysis.rules.apis import jax_root
from pallasite.analysis.tier0_state import Tier0State
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.types import to_json

KERNELS = ("splash_attention/splash_attention_kernel.py", "flash_attention.py",
           "paged_attention/paged_attention_kernel.py", "megablox/gmm.py", "ragged_paged_attention/kernel.py")
SCOPED_VMEM = 2 << 20  # small: the VMEM rule fires on some blocks, and edits to sizes change that


def _kernel_texts() -> list[tuple[str, str]]:
    root = jax_root()
    out = []
    for name in KERNELS:
        path = os.path.join(root or "", "experimental", "pallas", "ops", "tpu", name)
        if root is not None and os.path.exists(path):
            out.append((name, open(path, encoding="utf-8").read()))
    return out


FIXTURES = os.path.join(os.path.dirname(__file__), "data", "tier0")
PLANTED = ("pls015_vmem_bad.py", "pls016_parallel_carry_bad.py", "pls001_tiling_bad.py", "pls013_static_bounds_bad.py",
           "pls005_kernel_params_bad.py", "pls003_index_map_results_bad.py", "pls006_program_id_if_bad.py")


def _renamed(text: str, k: int) -> str:
    """A fixture's constants and task functions renamed apart from the others' (one file holds them
    all); the first keeps ``example_inputs``, so the VMEM rule knows its dtypes."""
    text = text.replace("BLOCK_ROWS", f"BLOCK_ROWS_{k}")
    if k == 0:  # the task's entry named, among the many public functions reaching a pallas_call
        return text.replace("\ndef copy(x):", '\nPALLASITE_ENTRY = "copy"\n\n\ndef copy(x):')
    return text.replace("def example_inputs", f"def example_inputs_{k}")


def _spliced(texts: list[tuple[str, str]]) -> list[tuple[str, str, tuple[int, int] | None]]:
    """(name, text, focus lines) per file; the first (splash attention) also with tier 0's fixture kernels
    that have findings spliced into its middle (jax's kernels give none: their block sizes are
    parameters), so that edits move, make and remove findings in a large file. ``focus``: the lines
    of the spliced kernels, where a quarter of that file's edits go."""
    out: list[tuple[str, str, tuple[int, int] | None]] = [(name, text, None) for name, text in texts]
    if texts:
        name, text = texts[0]
        lines = text.split("\n")
        middle = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].startswith("def "))
        middle -= 2 if lines[middle - 1].startswith("@") else 0
        planted = "\n\n".join(_renamed(open(os.path.join(FIXTURES, f), encoding="utf-8").read(), k)
                                for k, f in enumerate(PLANTED)).split("\n")
        joined = lines[:middle] + planted + ["", ""] + lines[middle:]
        out.append((f"planted/{name}", "\n".join(joined), (middle, middle + len(planted))))
    return out


TEXTS = _spliced(_kernel_texts())
NUMBERS = ("1", "3", "7", "8", "100", "128", "256", "512", "1024", "4096", "100000000")
NOISE = ("(", ")", ":", "#", '"', "'''", "\n", "  ", "x", ",", "\\", "def ", "ü")


def _edit(rng: random.Random, text: str, history: list[str], focus: tuple[int, int] | None = None) -> str:
    """One edit of the kinds an author makes: statements added or removed inside functions, numbers
    changed, lines duplicated or moved out of their function, undo, and stray keystrokes (which
    may leave the text unparsable). With ``focus`` (first, last line), a quarter of the edits land there."""
    lines = text.split("\n")
    low, high = (0, len(lines)) if focus is None or rng.random() < 0.75 else focus
    high = max(low + 1, min(high, len(lines)))
    at = rng.randrange(low, high)
    kind = rng.random()
    statements = [s for s in _statement_lines(text) if low <= s[0] < high]
    if kind < 0.30 and statements:  # a statement inside a function, before one that is there
        at = rng.choice(statements)[0]
        indent = re.match(r"[ \t]*", lines[at]).group()
        lines.insert(at, f"{indent}probe_{rng.randrange(1000)} = {rng.choice(NUMBERS)}")
    elif kind < 0.45 and statements:  # a one-line statement of a function removed
        one_line = [first for first, last, alone in statements if first == last and not alone]
        if one_line:
            del lines[rng.choice(one_line)]
    elif kind < 0.45:
        del lines[at]
    elif kind < 0.65:  # a number in the file changed (block sizes, grid sizes, vmem limits, axes)
        first, last = sum(len(row) + 1 for row in lines[:low]), sum(len(row) + 1 for row in lines[:high])
        numbers = [m for m in re.finditer(r"(?<![\w.])\d+(?![\w.])", text) if first <= m.start() < last]
        if numbers:
            m = rng.choice(numbers)
            return text[:m.start()] + rng.choice(NUMBERS) + text[m.end():]
    elif kind < 0.70:
        swapped = text.replace('"parallel"', '"arbitrary"', 1) if rng.random() < 0.5 else \
            text.replace('"arbitrary"', '"parallel"', 1)
        return swapped
    elif kind < 0.78:
        lines.insert(at, lines[at])
    elif kind < 0.83:
        lines.insert(at, f"MOVED_{rng.randrange(100)} = {rng.choice(NUMBERS)}")  # a new top-level unit mid-function
    elif kind < 0.93 and history:
        return rng.choice(history[-6:])  # undo back to a recent text
    else:
        offset = rng.randrange(len(text) + 1)
        return text[:offset] + rng.choice(NOISE) + text[offset:]
    return "\n".join(lines)


_STATEMENTS: dict[str, list[tuple[int, int, bool]]] = {}


def _statement_lines(text: str) -> list[tuple[int, int, bool]]:
    """(first, last 0-based line, the body's only statement) of each statement in a function body
    (none when the text does not parse)."""
    if text not in _STATEMENTS:
        import ast

        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            tree = None
        _STATEMENTS.clear()
        _STATEMENTS[text] = [(stmt.lineno - 1, stmt.end_lineno - 1, len(fn.body) == 1)
                             for fn in (ast.walk(tree) if tree is not None else ())
                             if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) for stmt in fn.body]
    return _STATEMENTS[text]


def _summary(analysis) -> dict:
    return {"uses_pallas": analysis.uses_pallas, "syntax_ok": analysis.syntax_ok, "sites": to_json(analysis.sites),
            "tasks": to_json(analysis.tasks), "findings": to_json(analysis.findings)}


def _differential(edits_per_file: int, seed: int) -> int:
    compared = 0
    for index, (name, original, focus) in enumerate(TEXTS):
        rng = random.Random(seed + index)
        key = f"/virtual/incremental/{name}"
        target = "v5p" if index % 2 else "v5e"  # v5p: the megacore rule's two-core wording
        state = Tier0State()
        base, history = original, []
        for step in range(edits_per_file * (2 if focus else 1)):
            text = _edit(rng, base, history, focus)
            history.append(text)
            incremental = analyze(text, key, target=target, scoped_vmem=SCOPED_VMEM, state=state)
            full = analyze(text, key, target=target, scoped_vmem=SCOPED_VMEM)
            assert _summary(incremental) == _summary(full), f"{name}: edit {step} diverged (seed {seed + index})"
            compared += 1
            if full.syntax_ok or rng.random() < 0.2:  # a broken text is mostly typed on from where it was
                base = text
    return compared


@pytest.mark.skipif(len(TEXTS) < len(KERNELS) + 1, reason="jax's Pallas TPU kernels are not installed")
def test_incremental_tier0_equals_a_full_analysis_over_42_random_edits():
    assert _differential(6, seed=36) == 42


@pytest.mark.slow
@pytest.mark.skipif(len(TEXTS) < len(KERNELS) + 1, reason="jax's Pallas TPU kernels are not installed")
def test_incremental_tier0_equals_a_full_analysis_over_1120_random_edits():
    assert _differential(160, seed=1036) == 1120


def test_units_are_reused_moved_and_equal_a_whole_parse():
    """An edit inside one function re-parses that function's unit only; the others are the same
    node objects, moved to their new lines, and the module reads like ``ast.parse``'s."""
    import ast

    from pallasite.analysis.source import Source

    text = ("import jax\n\nBLOCK = 128\n\n\ndef f(x):\n    return x + 1\n\n\n"
            "@jax.jit\ndef g(y):\n    a = 1; b = 2\n    return y * BLOCK\n")
    key = Tier0State()
    first = Source(text, state=key)
    module = ast_units.module_for(first.text, first.data, ast_units.units(first.root, first.data), key)
    g_before = module.body[-1]
    ast_units.release(key, module)
    edited = text.replace("    return x + 1", "    z = 2\n    return x + z")
    second = Source(edited, state=key)
    again = ast_units.module_for(second.text, second.data, ast_units.units(second.root, second.data), key)
    assert again.body[-1] is g_before and g_before.lineno == 12  # reused, moved one line down
    assert ast.dump(again, include_attributes=True) == ast.dump(ast.parse(edited), include_attributes=True)
    index = ast_units.index_of(again)
    assert [d.name for d in index.defs] == ["f", "g"]
    assert [ast.unparse(n) for n in index.expressions_at(13, 11)] == ["y * BLOCK", "y"]
    key.clear()
    assert ast_units.module_for(second.text, second.data, ast_units.units(second.root, second.data), key) is not None

