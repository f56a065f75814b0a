"""A big kernel file (tests/test_lsp_bigfile.py's generator: a real kernel repeated) costs tier 0
and the check started on open what its size says, no more: what an analysis made is freed without
the garbage collector, a document's state keeps no tree of a text past ``KEEP_TREE_BYTES``, and the
shape inference the check runs on the server's event loop is linear in the file (it was quadratic:
minutes for 5 MB). The figures (first diagnostics, RSS while open): benchmarks/bench_lsp_bigdoc.py."""

from __future__ import annotations

import ast
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_lsp_bigfile import big_kernel_file  # noqa: E402

from pallasite.analysis import ast_units, inferred_inputs, source as source_mod  # noqa: E402
from pallasite.analysis.source import Source, parse  # noqa: E402
from pallasite.analysis.tier0 import analyze  # noqa: E402
from pallasite.analysis.tier0_state import Tier0State  # noqa: E402


def _ast_nodes_alive() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, ast.AST))


def test_an_unkept_python_ast_is_freed_without_the_garbage_collector():
    """Its parent links are cycles: with the collector off (as the server's tier-0 thread runs it,
    freezing what is left), a 300 KB file's ast stayed alive after its analysis."""
    text = big_kernel_file(300_000)
    analyze("import jax\n", None)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        before = _ast_nodes_alive()
        for state in (None, Tier0State()):  # a candidate's check; a document over MAX_TEXT_BYTES
            if state is not None:
                text = big_kernel_file(ast_units.MAX_TEXT_BYTES + 10_000)
            found = analyze(text, "/virtual/big.py", target="v6e", state=state)
            assert found.sites
            del found
            if state is not None:  # the server frees it once the diagnostics are out
                assert state.units is None and state.unkept is not None
                ast_units.discard_unkept(state)
            assert _ast_nodes_alive() - before < 100
    finally:
        if enabled:
            gc.enable()


def test_a_state_keeps_no_tree_of_a_text_past_the_limit(monkeypatch):
    monkeypatch.setattr(source_mod, "KEEP_TREE_BYTES", 50_000)
    state = Tier0State()
    parse("x = 1\n" * 1_000, state)
    assert state.tree is not None
    big = "x = 2\n" * 10_000
    tree = parse(big, state)
    assert state.tree is None and not state.earlier and tree.root_node.end_byte == len(big)
    parse("x = 1\n" * 1_000, state)
    assert state.tree is not None


def test_shape_inference_reads_the_module_functions_once(monkeypatch):
    """``_owner`` (asked for every call of the file) built a map of every module-level function per
    call: 1.2 s for 0.5 MB, minutes for 5 MB, on the server's event loop when the file was checked."""
    reads = []

    class Counting(dict):
        def items(self):
            reads.append(1)
            return super().items()

    real = inferred_inputs.module_functions
    monkeypatch.setattr(inferred_inputs, "module_functions", lambda source: Counting(real(source)))
    inferred_inputs.infer_tasks(Source(big_kernel_file(100_000)))
    assert len(reads) <= 2, len(reads)
