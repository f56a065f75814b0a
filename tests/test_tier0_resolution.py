"""Tier 0 follows values it used to miss, and stays quiet where they are not certain:
module-level tuple constants (grid, block shapes, dimension_semantics), program_id loop
counters (``i = pl.program_id(0)`` ... ``i += 1``), and BlockSpecs built by a helper function of
the same file (recorded with the helper call as ``via_span``; a tunable default as fix target)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.analysis.source import apply_edits
from pallasite.analysis.tier0 import analyze

DATA = Path(__file__).parent / "data" / "tier0"

HEADER = '''import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
'''

CALL = '''
def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(
        copy_kernel,
        grid=GRID,
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((512, 512), jnp.float32),
    )(x)
'''


def codes(text: str) -> list[str]:
    return [f.code for f in analyze(text).findings]


def site(text: str):
    (only,) = analyze(text).sites
    return only


# ---------------------------------------------------------------------------- module-level tuples


def test_module_grid_tuple_resolves():
    assert site(HEADER + "GRID = (4, 2)\n" + CALL).grid == (4, 2)
    assert codes(HEADER + "GRID = (4, 2)\n" + CALL) == ["PLS002", "PLS002"]


def test_module_grid_alias_and_tuple_of_constants_resolve():
    text = HEADER + "M, BM = 512, 128\nBASE = (M // BM, 2)\nGRID = BASE\n" + CALL
    assert site(text).grid == (4, 2)


@pytest.mark.parametrize("binding", [
    "GRID = (4, 2)\nGRID = (4,)\n",                          # bound twice
    "GRID = (4, 2)\nif jax.__version__:\n    GRID = (4,)\n",   # rebound in a module-level block
    "GRID = (4, 2)\nfor GRID in [(4,)]:\n    pass\n",         # a loop target
    "GRID = (4, 2)\n\ndef reset():\n    global GRID\n    GRID = (4,)\n",  # rebound through `global`
    "GRID = [4, 2]\n",                                        # a list may be mutated elsewhere
    "GRID = (4, 2)\ntry:\n    pass\nexcept ValueError as GRID:\n    pass\n",  # an except alias
    "GRID = (4, 2)\nwith open(__file__) as GRID:\n    pass\n",  # a with alias
    "GRID = (4, 2)\nGRID += (1,)\n",                          # augmented
    "GRID = (4, 2)\nprint(GRID := (4,))\n",                   # a walrus
    "GRID = (4, 2)\nSHAPE, GRID = (1,), (4,)\n",              # unpacked
    "GRID = OTHER = (4, 2)\nOTHER = (4,)\nGRID = OTHER\n",     # chained, then rebound
    "from shapes import GRID\n",                              # imported: unknown here
])
def test_uncertain_module_bindings_are_not_resolved(binding):
    text = HEADER + binding + CALL
    assert site(text).grid is None
    assert codes(text) == []


def test_a_local_binding_shadows_the_module_tuple():
    text = HEADER + "GRID = (4, 2)\n" + CALL.replace("    return pl.pallas_call(", "    GRID = (4,)\n    return pl.pallas_call(")
    assert site(text).grid == (4,)
    assert codes(text) == []


def test_module_block_shape_tuple_resolves_with_its_origin():
    text = HEADER + "GRID = (4,)\nBLOCK = (128, 256)\n" + CALL.replace("(128, 256), lambda i: (i, 0))],", "BLOCK, lambda i: (i, 0))],")
    spec = site(text).in_specs[0]
    assert spec.block_shape == (128, 256)
    assert spec.block_shape_span.line == 5  # the tuple on BLOCK's line


def test_module_semantics_fix_edits_the_constant():
    text = (DATA / "pls004_module_semantics_bad.py").read_text()
    (finding,) = analyze(text).findings
    assert finding.code == "PLS004"
    fixed = apply_edits(text, finding.fix.edits)
    assert 'SEMANTICS = ("parallel", "arbitrary")\n' in fixed
    assert codes(fixed) == []


# ---------------------------------------------------------------------------- program_id counters

KERNEL_CALL = '''
def kernel(x_ref, o_ref):
BODY

def run(x):
    return pl.pallas_call(
        kernel,
        grid=(4,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((512, 128), jnp.float32),
    )(x)
'''


def kernel_codes(body: str) -> list[str]:
    return codes(HEADER + KERNEL_CALL.replace("BODY", body))


@pytest.mark.parametrize("step", ["i += 1", "i = i + 1", "i = 1 + i"])
def test_while_on_a_program_id_counter_is_reported(step):
    body = f"    i = pl.program_id(0)\n    while i < 3:\n        o_ref[...] = x_ref[...]\n        {step}\n"
    assert kernel_codes(body) == ["PLS006"]


def test_counter_from_a_tuple_assignment_is_reported():
    body = "    i, j = pl.program_id(0), pl.program_id(1)\n    while i < 3:\n        i += 1\n    o_ref[...] = x_ref[...]\n"
    assert kernel_codes(body) == ["PLS006"]


def test_counter_chained_through_another_name_is_reported():
    body = "    i = pl.program_id(0)\n    j = i * 2\n    while j < 6:\n        j += 2\n    o_ref[...] = x_ref[...]\n"
    assert kernel_codes(body) == ["PLS006"]


@pytest.mark.parametrize("body", [
    "    i = pl.program_id(0)\n    i = 0\n    while i < 3:\n        i += 1\n",          # rebound to an int
    "    i = pl.program_id(0)\n    for i in range(3):\n        if i == 0:\n            pass\n",  # loop target
    "    a = 1\n    b = a\n    a = b\n    while a < 3:\n        a += 1\n",              # no program_id at all
    "    i = pl.program_id(0)\n    i = jnp.minimum(i, 3)\n    if i == 0:\n        pass\n",  # a call: not certain scalar
    "    i, j = divmod(pl.program_id(0), 2)\n    while i < 3:\n        i += 1\n",     # unpacked from a call
    "    i, j = pl.program_id(0), 1\n    while j < 3:\n        j += 1\n",              # j is the int
])
def test_uncertain_counters_stay_quiet(body):
    assert kernel_codes(body + "    o_ref[...] = x_ref[...]\n") == []


# ---------------------------------------------------------------------------- helper-built BlockSpecs


def test_helper_specs_are_recorded_with_the_helper_call():
    text = (DATA / "pls001_helper_specs_bad.py").read_text()
    found = site(text)
    (spec,) = found.in_specs
    assert spec.certain and spec.block_shape == (8, 200)
    assert spec.span.line == 12  # the pl.BlockSpec inside _make_spec
    lines = text.splitlines()
    assert spec.via_span is not None and lines[spec.via_span.line].strip() == "in_specs=[_make_spec(block_cols)],"
    assert spec.index_map_arity == 2
    (out,) = found.out_specs  # the same helper, called again for the output
    assert out.span == spec.span and lines[out.via_span.line].strip() == "out_specs=_make_spec(block_cols),"


def test_helper_tiling_fix_edits_the_tunable_default():
    text = (DATA / "pls001_helper_specs_bad.py").read_text()
    (finding,) = analyze(text).findings
    # issue 14: at the tunable default that set the value, the helper's BlockSpec dim related
    assert finding.code == "PLS001" and text.splitlines()[finding.span.line].strip().startswith("def scale(")
    assert finding.related and finding.related[0].span.line == 12
    fixed = apply_edits(text, finding.fix.edits)
    assert "block_cols: int = 256)" in fixed and "def _make_spec(cols):" in fixed
    assert codes(fixed) == []


HELPER_CALL = '''
def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

HELPER

def run(x, *, cols: int = 200):
    return pl.pallas_call(
        kernel,
        grid=(4,),
        in_specs=ARG,
        out_specs=pl.BlockSpec((128, 512), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((512, 512), jnp.float32),
    )(x)
'''


def helper_site(helper: str, arg: str):
    text = HEADER + HELPER_CALL.replace("HELPER", helper).replace("ARG", arg)
    return site(text), codes(text)


def test_helper_with_literal_argument_and_default():
    helper = "def specs(rows, cols=100):\n    return [pl.BlockSpec((rows, cols), lambda i: (i, 0))]\n"
    found, _ = helper_site(helper, "specs(128)")
    assert found.in_specs[0].block_shape == (128, 100)
    found, _ = helper_site(helper, "specs(128, cols=cols)")
    assert found.in_specs[0].block_shape == (128, 200)


def test_helper_returning_one_spec_inside_a_list():
    helper = "def spec(cols):\n    return pl.BlockSpec((128, cols), lambda i: (i, 0))\n"
    found, _ = helper_site(helper, "[spec(cols)]")
    assert found.in_specs[0].block_shape == (128, 200) and found.in_specs[0].via_span is not None


@pytest.mark.parametrize("helper,arg", [
    ("def specs(cols):\n    cols = cols * 2\n    return [pl.BlockSpec((128, cols), lambda i: (i, 0))]\n", "specs(cols)"),
    ("def specs(cols):\n    if cols > 100:\n        return [pl.BlockSpec((128, 128), lambda i: (i, 0))]\n"
     "    return [pl.BlockSpec((128, cols), lambda i: (i, 0))]\n", "specs(cols)"),
    ("def specs(*dims):\n    return [pl.BlockSpec(dims, lambda i: (i, 0))]\n", "specs(128, cols)"),
    ("def specs(cols):\n    return [pl.BlockSpec((128, cols), lambda i: (i, 0))]\n", "specs(x.shape[1])"),
    ("@functools.cache\ndef specs(cols):\n    return [pl.BlockSpec((128, cols), lambda i: (i, 0))]\n", "specs(cols)"),
])
def test_uncertain_helpers_give_no_tiling_finding(helper, arg):
    found, found_codes = helper_site(helper, arg)
    assert "PLS001" not in found_codes
    dims = [s.block_shape for s in found.in_specs or ()]
    assert (128, 200) not in dims and (128, 400) not in dims


def test_helper_parameter_named_like_a_module_function_is_not_that_function():
    helper = ("def index_map(i, j):\n    return i, j\n\n"
              "def spec(cols, index_map):\n    return pl.BlockSpec((128, cols), index_map)\n")
    found, found_codes = helper_site(helper, "[spec(cols, lambda i: (i, 0))]")
    assert found.in_specs[0].block_shape == (128, 200)
    assert found.in_specs[0].index_map_arity is None
    assert "PLS002" not in found_codes
