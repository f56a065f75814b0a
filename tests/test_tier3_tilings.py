"""Without a reference, tier 3 compares the kernel with itself at another tiling (runner/tier3/interpret_tilings.py)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "tilings"


def tier3(name: str) -> list:
    [report] = check_paths([str(DATA / name)], CheckOptions(target="v6e", tiers=(3,), time_limit_s=120))
    return [f for f in report.findings if f.tier == 3]


def line_of(name: str, snippet: str) -> int:
    return next(i for i, line in enumerate((DATA / name).read_text().splitlines(), 1) if snippet in line)


def test_a_grid_divided_by_a_literal_differs_at_another_tiling():
    got = tier3("literal_grid.py")
    assert [(f.code, f.severity) for f in got] == [("PLS303", "warning")], [f.message for f in got]
    message = got[0].message
    assert "on v6e (1 TensorCore)" not in message, message  # wrong at one tiling on every chip: not a two-core matter
    assert "depends on the tiling: with bk = 128 (the file's 256)" in message, message
    assert "16 of 16 values differ" in message and "there is no reference" in message, message
    assert got[0].span.line + 1 == line_of("literal_grid.py", "k // 256"), "at the number written for bk"
    assert "The number 256 at line" in message and "is bk's default written out" in message, message
    related = [(r.span.line + 1, r.message) for r in got[0].related]
    assert (line_of("literal_grid.py", "bk: int = 256"), "bk's default") in related, related
    assert (line_of("literal_grid.py", "return pl.pallas_call("), "the pallas_call") in related, related


def test_a_number_equal_to_a_block_size_is_named_only_when_it_is_the_one():
    from pallasite.runner.tier3.interpret_tilings import written_out

    text = (DATA / "literal_grid.py").read_text()
    call = line_of("literal_grid.py", "return pl.pallas_call(")
    moved = {"bk": ("keyword", 256, 128)}
    assert written_out(text, call, moved) == (line_of("literal_grid.py", "k // 256"),
                                              text.splitlines()[line_of("literal_grid.py", "k // 256") - 1].index("256"),
                                              "bk")
    two = text.replace("bm = 8", "bm = 256 // 32")  # a second 256 in the function: no single suspect
    assert written_out(two, call, moved) is None
    assert written_out(text, call, {"tm": ("keyword", 256, 128)}) is None  # not a name of that function


@pytest.mark.parametrize("name", ["grid_from_block.py", "only_its_own_tiling.py"])
def test_a_kernel_right_at_every_tiling_or_taking_only_its_own_gets_no_finding(name):
    assert tier3(name) == []


def test_only_block_sizes_move_and_declared_candidates_win():
    from pallasite.runner.tier3.interpret_tilings import tunable_moves

    def entry(x, *, bk: int = 256, top_k: int = 2, tile_m: int = 3, tm: int = 64):
        return x

    task = types.SimpleNamespace(entry=entry, tunables={"tm": [16, 32, 64, 128]})
    assert tunable_moves(task) == {"bk": ("keyword", 256, 128), "tm": ("keyword", 64, 32)}
    declared = types.SimpleNamespace(entry=entry, tunables={"top_k": [1, 2, 4]})
    assert tunable_moves(declared)["top_k"] == ("keyword", 2, 1)  # declared in TUNABLES: a tiling choice after all


def test_tuned_params_entries_move_on_the_module_and_come_back():
    import sys

    from pallasite.runner.tier3.interpret_tilings import applied, tunable_moves

    module = types.ModuleType("tilings_fixture_module")
    module.TUNED_PARAMS = {"block_q": 512, "causal": 1}
    exec("def entry(x):\n    return TUNED_PARAMS['block_q']\n", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        task = types.SimpleNamespace(entry=module.entry, tunables={})
        moves = tunable_moves(task)
        assert moves == {"block_q": ("tuned_params", 512, 256)}
        with applied(task, moves) as entry:
            assert entry(None) == 256
        assert module.entry(None) == 512 and module.TUNED_PARAMS == {"block_q": 512, "causal": 1}
    finally:
        del sys.modules[module.__name__]


def test_moved_runs_name_the_one_value_and_stop_at_the_limit():
    import numpy as np

    from pallasite.runner.tier3 import interpret_tilings as tilings

    own = (np.arange(6, dtype=np.float32),)

    def entry(x, *, bq: int = 128, bk: int = 256):
        return x

    task = types.SimpleNamespace(entry=entry, tunables={})
    moves = tilings.tunable_moves(task)
    seen = []

    def run_with(fn):  # the combined move fails; bq alone agrees; bk alone differs
        kw = fn.keywords
        seen.append(dict(kw))
        if len(kw) == 2:
            return types.SimpleNamespace(error=RuntimeError("block too small"), races=[], outputs=None)
        out = own[0] + (1.0 if "bk" in kw else 0.0)
        return types.SimpleNamespace(error=None, races=[], outputs=(out,))

    problem, named = tilings.moved_runs(run_with, own, moves, task)
    assert named == {"bk": ("keyword", 256, 128)} and problem["count"] == 6
    assert seen == [{"bq": 64, "bk": 128}, {"bq": 64}, {"bk": 128}]
    seen.clear()
    assert tilings.moved_runs(lambda fn: run_with(fn) if len(fn.keywords) == 2 else types.SimpleNamespace(
        error=TimeoutError("past its limit"), races=[], outputs=None), own, moves, task) is None
