"""Declarations at the declaration (issue 57): a finding caused by a declared value lands where the value
is declared, with its use related. Fixtures in tests/data/declarations/, each with its planted line; before
these changes every one was said at the statement that used the value (the kernel's add, the store, the
stored-to line's field default).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checking import check_files, variants

DATA = Path(__file__).parent / "data" / "declarations"


def check(name: str, tiers: str) -> dict:
    return check_files([DATA / name], tiers)[name]


def error(file: dict, code: str) -> dict:
    (found,) = [f for f in file["findings"] if f["code"] == code and f["severity"] == "error"]
    return found


@pytest.mark.parametrize("name, line, column, words", [
    ("block_off.py", 30, 31, "the block in_specs[1] declares dim 1 as 120 where the kernel combines it with 128"),
    ("scratch_halved.py", 35, 37, "the scratch buffer scratch_shapes[0] declares dim 0 as 64"),
])
def test_a_block_or_scratch_dim_off_the_others_is_said_at_its_entry(name, line, column, words):
    found = error(check(name, "0,1"), "PLS100")
    assert (found["line"], found["column"]) == (line, column), found
    assert words in found["message"]
    (use,) = [r for r in found["related"] if r["message"] == "the kernel statement the declared shape breaks"]
    assert use["line"] in (15, 16)  # the accumulation in the kernel


def test_a_block_entry_in_an_elif_chain_is_said_where_the_trace_saw_its_value_written():
    """Before: at the kernel's dot (line 14): the entry's name is bound in three arms, and which ran only the
    trace knows; of the places its value was written as the program ran, one lies in the calling function."""
    found = error(check("block_in_elif_chain.py", "0,1"), "PLS100")
    assert (found["line"], found["column"]) == (26, 37), found
    assert "the block in_specs[1] declares dim 0 as 124 where the kernel combines it with 128" in found["message"]


def test_a_scratch_dim_off_in_the_second_call_of_a_task_is_said_at_its_conditional_entry():
    # the task calls the wrapper twice; only the second call has the scratch (``VMEM(...) if flag else None``):
    # the shapes are read from the call that failed, the dim from the arm that declares the buffer
    found = error(check("scratch_halved_second_call.py", "0,1"), "PLS104")
    assert (found["line"], found["column"]) == (31, 25), found
    assert "the scratch buffer scratch_shapes[0] declares dim 0 as 64" in found["message"]


def test_a_concatenate_of_a_scratch_off_the_block_is_said_at_the_dim_of_a_scratch_written_over_lines():
    found = error(check("scratch_concat.py", "0,1"), "PLS100")
    assert (found["line"], found["column"]) == (27, 18), found  # ``bm // 2`` on the line after ``pltpu.VMEM(``
    assert "the scratch buffer scratch_shapes[0] declares dim 0 as 8 where the kernel combines it with 16" in found["message"]


def test_an_out_shape_of_another_input_s_dtype_is_said_at_the_declaration():
    found = error(check("dtype_mixed.py", "0,1"), "PLS104")
    assert (found["line"], found["column"]) == (21, 49), found
    assert "the dtype of its first input" in found["message"]
    assert any(r["line"] == 12 and "stores bfloat16" in r["message"] for r in found["related"])


@pytest.mark.tpu_compiler
def test_an_output_of_a_struct_declared_int_is_said_at_its_field_s_dtype():
    """Before: at the store ``outputs.sum_ref[...] = ...`` (line 21): the stored ref is a field of a struct of
    outputs, not a kernel parameter, so which output it is was never found."""
    found = error(check("dtype_struct_field.py", "0,1"), "PLS104")
    assert found["line"] == 32, found
    assert "output sum_ref's dtype is set here" in found["message"]


def test_a_wrong_output_dtype_of_a_task_s_second_call_is_said_at_that_call_s_out_shape():
    """Before: at the first pallas_call's out_shape (line 24), whose output 0 the record named: the task's output
    of the wrong dtype is the second call's (sglang-jax's simple GLA, axlearn's flash attention in corpus v3)."""
    found = error(check("dtype_second_call.py", "0,1,3"), "PLS304")
    assert (found["line"], found["column"]) == (28, 49), found
    assert "jnp.int32) made here" in found["message"]


def test_a_vmem_limit_written_in_the_wrong_unit_is_said_at_the_number_that_set_it():
    found = error(check("vmem_limit_unit.py", "0,1,2"), "PLS201")
    assert (found["line"], found["column"]) == (22, 36), found  # the `1024` of the helper (MiB meant)
    assert "vmem_limit_bytes is 16384 bytes" in found["message"]
    related = {(r["line"], r["message"]) for r in found["related"]}
    assert (15, "this number made the limit too") in related  # the dataclass field's 16
    assert (31, "the pallas_call that runs out of VMEM") in related


def test_a_grid_with_a_step_too_many_is_said_at_its_entry_once():
    found = [f for f in check("grid_step_too_many.py", "0,1")["findings"] if f["code"] == "PLS020"]
    assert [(f["line"], f["column"]) for f in found] == [(19, 13)], found  # was: each BlockSpec (lines 21, 22)
    assert found[0]["message"].startswith("grid axis 0 has more steps than the array has blocks")


def test_a_scratch_declared_empty_is_said_at_its_zero_dim():
    """Before: at the pallas_call (tier 3's out-of-bounds store, line 20); a scratch dim of 0 holds nothing, so
    the declaration is what is off (the corpus's halved scratch dims of flash attention: ``block_b // 2``)."""
    found = error(check("scratch_empty.py", "0,1,3"), "PLS302")
    assert (found["line"], found["column"]) == (26, 37), found  # the `block_b // 2`
    assert "declares dim 0 as 0 (shape (0, 8, 128))" in found["message"]
    assert any(r["message"] == "where tier 3 found the access past its end" for r in found["related"])


def test_an_index_map_following_a_grid_axis_past_the_end_is_said_at_that_grid_entry(tmp_path):
    """Before: at the index map (line 26; its row block comes from a prefetched table, so no static check reads
    it); the map names block 2 on the last step of grid axis 1, so that entry has a step too many. The unplanted
    file is clean."""
    found = error(check("grid_past_end.py", "0,1,3"), "PLS302")
    assert (found["line"], found["column"]) == (30, 17), found  # the `n // bn + 1`
    assert "the grid has a step too many on axis 1" in found["message"]
    assert any(r["line"] == 26 and "follows this grid axis" in r["message"] for r in found["related"])
    (clean,) = variants(tmp_path, [(DATA / "grid_past_end.py", "grid_ok.py", "n // bn + 1,", "n // bn,")])
    assert check_files([clean], "0,1,3")["grid_ok.py"]["findings"] == []


def test_the_grid_entry_is_found_through_a_name_bound_once():
    from pallasite.analysis.types import Span
    from pallasite.engine.findings.grid_step import grid_entry

    text = "def f(n, m):\n    grid = (n // 8, m // 128 + 1)\n    return call(grid=grid)\n"
    at_name = Span(2, 21, 2, 25)  # the `grid` passed to the call
    assert grid_entry(text, at_name, 1) == Span(1, 20, 1, 32)  # `m // 128 + 1`
    twice = text.replace("    return", "    grid = grid + (1,)\n    return")
    assert grid_entry(twice, Span(3, 21, 3, 25), 1) is None  # bound twice: not certain which tuple ran


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, dict]:
    """This round's fixtures and the clean variants of two of them, checked in one run (tiers 0, 1 and 3)."""
    names = ["specs_by_name.py", "reshape_off.py", "dtype_int_unpacked.py", "scratch_short.py", "table_past_end.py",
             "scratch_short_shared.py"]
    clean = variants(tmp_path_factory.mktemp("declarations"), [
        (DATA / "scratch_short.py", "clean_scratch_short.py", "VMEM((1, r, c)", "VMEM((2, r, c)"),
        (DATA / "table_past_end.py", "clean_table_past_end.py", "grid=(m // bm + 1,)", "grid=(m // bm,)")])
    return check_files([DATA / n for n in names] + clean, "0,1,3")


@pytest.mark.parametrize("name, line, column, words", [
    # before: the kernel's store (line 13); the out_specs list is built apart and appended to in an if/else
    ("specs_by_name.py", 25, 44, "the block out_specs[1] declares dim 1 as 124"),
    # before: the kernel's reshape (line 12); one spec serves the input and the output
    ("reshape_off.py", 19, 21, "the block in_specs[0] declares dim 2 as 124 where the kernel's reshape needs 128"),
])
def test_a_block_written_apart_from_the_call_is_said_at_its_entry(checked, name, line, column, words):
    (found,) = [f for f in checked[name]["findings"] if f["severity"] == "error"]
    assert (found["line"], found["column"]) == (line, column), found
    assert words in found["message"]


def test_a_store_into_an_output_declared_int_is_said_at_the_declaration_with_operands_unpacked(checked):
    """Before: at the store (line 11): the call's operands are passed as ``(*operands)``, so which kernel
    parameter is the output is now counted from the end (outputs, then scratch)."""
    found = error(checked["dtype_int_unpacked.py"], "PLS104")
    assert (found["line"], found["column"]) == (21, 60), found
    assert "o_ref's dtype is declared int32 here (out_shape[0]), but the kernel computes float32" in found["message"]


def test_a_scratch_slot_one_short_is_said_at_its_dim(checked):
    """Before: at the pallas_call (line 20): slot 1 of a scratch declared one slot deep. The access window now
    keeps its single indices (``[1, 0:8, 0:128]``), which say the dim; two slots are clean."""
    found = error(checked["scratch_short.py"], "PLS302")
    assert (found["line"], found["column"]) == (26, 37), found
    assert "[1, 0:8, 0:128]" in found["message"]
    assert "declares dim 0 as 1 (shape (1, 8, 128)), and the kernel accesses index 1 there" in found["message"]
    assert checked["clean_scratch_short.py"]["findings"] == []


def test_a_scratch_slot_one_short_declared_once_for_two_buffers_is_said_at_its_dim(checked):
    """Before: at the pallas_call: the short shape was two scratch entries' (one ``VMEM`` passed twice)."""
    found = error(checked["scratch_short_shared.py"], "PLS302")
    assert (found["line"], found["column"]) == (22, 25), found
    assert "the scratch buffer scratch_shapes[0], scratch_shapes[1] declares dim 0 as 1" in found["message"]


def test_a_per_step_table_read_past_its_end_is_said_at_the_grid_entry(checked):
    """Before: in the kernel (line 12); the table has an entry per step and the grid one step more."""
    found = error(checked["table_past_end.py"], "PLS302")
    assert (found["line"], found["column"]) == (24, 19), found
    assert "the grid has a step too many on axis 0" in found["message"]
    assert checked["clean_table_past_end.py"]["findings"] == []


def test_an_index_map_past_the_end_moves_to_the_grid_entry_when_the_grid_was_traced():
    """megablox's grid holds a traced size (its active tiles), so the run records no grid: the step tier 3
    stopped at stands for the axis's last (was: the map stayed the place)."""
    from types import SimpleNamespace

    from pallasite.analysis.types import Span
    from pallasite.engine.findings.grid_step import to_grid_entry

    text = "def f(n, tiles):\n    return call(grid=(n + 1, tiles, 2))\n"
    site = SimpleNamespace(grid_span=Span(1, 21, 1, 38))
    rec = {"sentence": "the index_map of input rhs returns block (0, 0, 3) at grid step (3, 0, 0): it reads "
                       "[0:128, 384:512] of an array of shape (4, 256, 384), past its end"}
    moved = to_grid_entry("PLS302", rec, site, [], text, Span(0, 0, 0, 1))
    assert moved is not None and moved.span == Span(1, 22, 1, 27)  # `n + 1`
    rec["sentence"] = rec["sentence"].replace("(3, 0, 0)", "(3, 3, 0)")  # two axes at 3: not clear which
    assert to_grid_entry("PLS302", rec, site, [], text, Span(0, 0, 0, 1)) is None


def test_a_store_into_a_scratch_of_another_shape_names_the_scratch_dim():
    """simple GLA's and gmm's halved scratch (sglang-jax): the value stored has the size other buffers have,
    the scratch alone its own; an output block of the same shape as the scratch leaves it unclear."""
    from pallasite.engine.findings.odd_declaration import _stored_into_scratch

    message = ("Invalid shape for `swap`. Ref shape: (64, 384). Expected shape: (64, 384). Value shape: (128, 384). "
               "Transforms: ().")
    buffers = [("scratch_shapes", 0, (8, 384)), ("scratch_shapes", 1, (64, 384)), ("scratch_shapes", 3, (512, 128))]
    assert _stored_into_scratch(message, buffers) == (("scratch_shapes", 1, 0), [64], [128])
    assert _stored_into_scratch(message, buffers + [("out_specs", 0, (64, 384))]) is None
    assert _stored_into_scratch(message, buffers[:2]) is None  # nothing else is 128 there


def test_a_spec_list_is_read_through_its_name():
    from pallasite.analysis.types import Span
    from pallasite.engine.findings.written_specs import dim_span

    text = (DATA / "specs_by_name.py").read_text()
    lines = text.splitlines()
    call = next(i for i, t in enumerate(lines) if "return pl.pallas_call(" in t)
    at = Span(call, lines[call].index("pl.pallas_call"), call, lines[call].index("pl.pallas_call") + 14)
    assert dim_span(text, at, "out_specs", 1, 1) == Span(24, 43, 24, 49)  # `bn - 4`, appended in the if branch
    assert dim_span(text, at, "out_specs", 0, 0) == Span(20, 22, 20, 24)  # the literal's `bm`
    assert dim_span(text, at, "in_specs", 0, 1) == Span(17, 34, 17, 36)
    assert dim_span(text, at, "out_specs", 2, 0) is None  # no such entry
    rebound = text.replace("    if with_square:", "    out_specs = list(out_specs)\n    if with_square:")
    assert dim_span(rebound, Span(at.line + 1, at.column, at.line + 1, at.end_column), "out_specs", 1, 1) is None


def test_a_scratch_list_bound_in_each_arm_of_an_if_is_read_through_its_names():
    """jax's flash attention: ``scratch_shapes = [m_scratch, l_scratch, acc_scratch]`` or ``[]`` by a branch,
    each buffer a name bound in the branch (was: not resolved, the finding stayed at the access)."""
    from pallasite.analysis.types import Span
    from pallasite.engine.findings.written_specs import dim_span

    text = ("def f(x, bb, bq, d, k):\n"
            "    if k:\n"
            "        m = pltpu.VMEM((bb, bq, 128), jnp.float32)\n"
            "        acc = pltpu.VMEM((bb // 2, bq, d), jnp.float32)\n"
            "        scratch_shapes = [m, acc]\n"
            "    else:\n"
            "        scratch_shapes = []\n"
            "    return pl.pallas_call(kernel, scratch_shapes=scratch_shapes)(x)\n")
    call = Span(7, 11, 7, 25)
    assert dim_span(text, call, "scratch_shapes", 1, 0) == Span(3, 26, 3, 33)  # `bb // 2`
    assert dim_span(text, call, "scratch_shapes", 2, 0) is None
    looped = text.replace("    return", "    for m in range(2):\n        pass\n    return")
    assert dim_span(looped, Span(9, 11, 9, 25), "scratch_shapes", 0, 0) is None  # `m` rebound by a loop


def test_an_einsum_label_mismatch_is_read_as_a_shape_mismatch():
    """jax's paged attention: ``Size of label 'd' for operand 1 (124) does not match previous terms (128)`` was not
    read as a mismatch at all (a block entry off the others stayed at the einsum)."""
    from pallasite.engine.findings.odd_declaration import MISMATCH, _combined_off

    message = "ValueError: Size of label 'd' for operand 1 (124) does not match previous terms (128)."
    assert MISMATCH.search(message)
    buffers = [("in_specs", 0, (None, 2, None, 124)), ("in_specs", 1, (2, 16, 128)), ("out_specs", 0, (2, 16, 128))]
    assert _combined_off(message, buffers) == (("in_specs", 0, 3), [124], [128])


def test_a_block_dim_declared_zero_is_the_one_off_whatever_the_others_hold():
    """gdn decode's gate block ``(bounded_bt, H_v - 4, K)`` with H_v 4 (tpu-inference): the kernel's multiply of
    ``(2, 1)`` by ``(0, 128)`` failed; 2 is held by one buffer as well, so neither size stood out and the
    finding stayed at the multiply."""
    from pallasite.engine.findings.odd_declaration import _combined_off

    message = "mul got incompatible shapes for broadcasting: (2, 1), (0, 128)."
    buffers = [("in_specs", 0, (8, 2, 128)), ("in_specs", 1, (8, 0, 128)), ("in_specs", 2, (2, 64))]
    assert _combined_off(message, buffers) == (("in_specs", 1, 1), [0], [2])
    assert _combined_off(message, buffers[:1] + buffers[2:]) is None  # no buffer is empty: unclear, left alone


def test_a_scratch_tuple_bound_in_both_arms_is_read_in_the_arm_the_call_ran_with():
    """jax's paged attention binds ``scratch_shapes`` in both arms of an if/else (with and without quantisation
    scales): a double buffer's slot dim declared 1 was found by tier 3 and said at the DMA helper, since either
    arm's third entry could be it; the shape the call ran with tells them apart by the numbers written."""
    from pallasite.analysis.types import Span
    from pallasite.engine.findings.written_specs import dim_span

    text = '''import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def attend(kernel, q, pages, scales, n):
    if scales is not None:
        scratch_shapes = (
            pltpu.VMEM((2, n, 128), jnp.float32),
            None,
            pltpu.VMEM((2, n, 128), jnp.float32),
        )
    else:
        scratch_shapes = (
            pltpu.VMEM((2, n, 128), jnp.float32),
            None,
            pltpu.VMEM((1, n, 128), jnp.float32),
        )
    return pl.pallas_call(kernel, out_shape=q, scratch_shapes=scratch_shapes)(q, pages)
'''
    lines = text.splitlines()
    call = next(i for i, t in enumerate(lines) if "pl.pallas_call(" in t)
    at = Span(call, lines[call].index("pl.pallas_call"), call, lines[call].index("pl.pallas_call") + 14)
    assert dim_span(text, at, "scratch_shapes", 2, 0) is None  # either arm's
    assert dim_span(text, at, "scratch_shapes", 2, 0, declared=(1, 8, 128)) == Span(16, 24, 16, 25)  # the else's 1
    assert dim_span(text, at, "scratch_shapes", 2, 0, declared=(2, 8, 128)) == Span(10, 24, 10, 25)
    assert dim_span(text, at, "scratch_shapes", 0, 0, declared=(2, 8, 128)) is None  # both arms agree: unclear
