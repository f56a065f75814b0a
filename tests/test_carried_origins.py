"""Numbers that carry where they were written (runner/origin_values.py) and the findings placed at
them (engine/findings/origin_findings.py ``to_carried_origin``, ``buffer_place``).

Each fixture of tests/data/carried/ is a small real Pallas kernel whose block size travels before it
reaches a BlockSpec: a dict entry copied into a dataclass by a comprehension and read back as an
attribute in another function, a config dict consumed through ``**options`` and
``functools.partial``, a page count that makes the blocks overflow VMEM through a class attribute,
an int32 out_shape made by a helper into a dict. The literal (or dtype) that made the value carries
a ``# origin`` comment. Before the running program carried the places, the findings landed at the
BlockSpec (lines 39 and 18), at the pallas_call (line 23) and at the rejected store (line 10).
"""

from __future__ import annotations

import functools
import json
import os
import pickle
from pathlib import Path

import pytest

from pallasite.runner.origin_values import OFloat, OInt, compile_carried, places_of

DATA = Path(__file__).parent / "data" / "carried"


def _marked(text: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines()) if line.rstrip().endswith("# origin")]
    assert len(lines) == 1
    return lines[0]


def _check(name: str, tiers: tuple[int, ...]):
    from pallasite.analysis import tier0
    from pallasite.engine.findings import locate
    from pallasite.engine.sources import sources_for
    from pallasite.runner import checks
    from pallasite.wire.messages import CheckParams

    path = str(DATA / name)
    text = Path(path).read_text()
    result = checks.handle_check(CheckParams(source=sources_for(path), chip="v6e", tiers=tiers))
    return text, result, locate.locate_result(result, text, tier0.analyze(text, path, target="v6e"), "v6e")


@pytest.mark.parametrize("name, literal", [("dict_dataclass_attr.py", "100"), ("options_splat.py", "96")])
def test_a_block_dim_that_travelled_is_found_at_the_literal_that_made_it(name, literal):
    text, _, located = _check(name, (1,))
    [finding] = [f for f in located.findings if f.code == "PLS101"]
    line = _marked(text)
    assert finding.span.line == line
    assert text.splitlines()[line][finding.span.column:finding.span.end_column] == literal
    assert "the number " + literal + " written here" in finding.message
    assert any("the BlockSpec that uses this value" in r.message for r in finding.related)


@pytest.mark.pipeline
def test_a_page_count_that_overflows_vmem_is_found_at_the_count():
    from pallasite.runner.tiers import tier2_unavailable

    if tier2_unavailable("v6e"):
        pytest.skip("tier 2 needs libtpu")
    text, _, located = _check("vmem_pages.py", (1, 2))
    [finding] = [f for f in located.findings if f.code == "PLS201"]
    line = _marked(text)
    assert finding.span.line == line
    assert text.splitlines()[line][finding.span.column:finding.span.end_column] == "2048"


def test_an_out_shape_dtype_made_in_a_helper_is_found_at_the_dtype():
    """The ShapeDtypeStruct is made in a helper, kept in a dict and passed on: before, the finding
    stayed at the store the lowering rejected (line 10); the worker now says where the struct was made
    even though the failed trace cut the entry short (``partial``)."""
    text, result, located = _check("out_dtype_helper.py", (1,))
    [finding] = [f for f in located.findings if f.code == "PLS104"]
    line = _marked(text)
    assert finding.span.line == line
    assert text.splitlines()[line][finding.span.column:finding.span.end_column] == "jnp.int32"
    [call] = result.entries[0].reached
    assert call.partial  # the trace failed in this call: what else the entry reaches is unknown


def test_the_worker_reports_the_places_of_each_dim():
    _, result, _ = _check("options_splat.py", (1,))
    [entry] = result.entries
    [call] = entry.reached
    assert call.origins["in_specs[0][1]"] == ((9, 41, 43),)  # CONFIG's 96
    assert call.origins["grid[1]"] == ((9, 41, 43),)  # x.shape[1] // cols carries the 96 too


# --------------------------------------------------------------------------- the values themselves


def _carried(value, line=1):
    return (OInt if isinstance(value, int) else OFloat)(value, frozenset({("f.py", line, 0, 1)}))


def test_arithmetic_unions_places_and_comparisons_stay_plain():
    a, b = _carried(256, 1), _carried(2, 2)
    for made in (a // b, a * b, a + b, a - b, a % b, a ** b, -(-a // b)):
        assert type(made) is OInt and places_of(made) == {("f.py", 1, 0, 1), ("f.py", 2, 0, 1)}
    assert type(a / b) is OFloat
    assert type(a < b) is bool and type(a == 256) is bool
    assert places_of(a * 3) == {("f.py", 1, 0, 1)}
    assert places_of(3 * a) == {("f.py", 1, 0, 1)}
    assert places_of(int(a)) == frozenset() and type(int(a)) is int


def test_hash_equality_repr_json_and_pickle_are_the_plain_numbers():
    a, f = _carried(256), _carried(0.5)
    assert hash(a) == hash(256) and a == 256 and {256: "x"}[a] == "x"
    assert repr(a) == "256" and str(f) == "0.5" and json.dumps([a, f]) == "[256, 0.5]"
    assert type(pickle.loads(pickle.dumps(a))) is int and type(pickle.loads(pickle.dumps(f))) is float
    assert type(a)(5) == 5 and type(f)("1.5") == 1.5  # code that rebuilds a number by its type still can


def test_places_survive_containers_fields_partial_and_options():
    namespace: dict = {}
    source = (
        "import dataclasses, functools\n"
        "T = {'bq': 128}\n"
        "@dataclasses.dataclass\n"
        "class S:\n"
        "    bq: int = 8\n"
        "def f(*, bq, scale=2):\n"
        "    return max(bq * scale, 16)\n"
        "g = functools.partial(f, **T)\n"
        "s = S(bq=g())\n"
    )
    exec(compile_carried(source, "m.py", namespace), namespace)
    lines = sorted(line for _, line, _, _ in places_of(namespace["s"].bq))
    assert namespace["s"].bq == 256 and lines == [2, 6, 7]  # 128, the default 2, and max's 16


def test_min_max_carry_only_where_the_file_does_not_rebind_them_and_add_no_public_names():
    carried: dict = {}
    exec(compile_carried("a = min(128, 4 * 64)\n", "m.py", carried), carried)
    assert sorted(line for _, line, _, _ in places_of(carried["a"])) == [1, 1, 1]
    assert "min" not in carried and "max" not in carried  # an import * of the module copies nothing new
    own: dict = {}
    exec(compile_carried("def max(*a):\n    return 7\nb = max(1, 2)\n", "m.py", own), own)
    assert own["b"] == 7


def test_match_patterns_fstrings_and_annotations_are_left_as_written():
    namespace: dict = {}
    source = ("x: 'int' = 3\n"
              "match x:\n"
              "    case 3: y = f'{x:4d}'\n"
              "    case _: y = None\n")
    exec(compile_carried(source, "m.py", namespace), namespace)
    assert namespace["y"] == "   3" and places_of(namespace["x"])


def test_a_jit_static_argument_gives_the_same_result_and_one_trace_per_value():
    """jaxlib's C++ cache keys a static argument by its type too: a carried 3 and a plain 3 are two
    entries (one more compile, same result); carried 3s made from different literals are one."""
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda x, n: x * n, static_argnums=1)
    plain = f(jnp.ones(2), 3)
    carried = f(jnp.ones(2), _carried(3, 1))
    f(jnp.ones(2), _carried(3, 2))
    assert plain.dtype == carried.dtype and (plain == carried).all()
    assert f._cache_size() == 2


KERNEL = '''
import functools
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

SIZES = {"bm": 16, "bn": 128}

def kernel(x_ref, y_ref, o_ref, *, scale):
    acc = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = (acc * scale + 0.5).astype(o_ref.dtype)

def matmul(x, y, bm=SIZES["bm"], bn=SIZES["bn"]):
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        functools.partial(kernel, scale=0.25),
        grid=(m // bm, n // bn),
        in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)), pl.BlockSpec((k, bn), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
        interpret=True,
    )(x, y)
'''


def test_a_real_kernel_gives_identical_results_with_and_without_the_rewrite(tmp_path):
    import jax
    import numpy as np

    from pallasite.runner.loader import user_module

    path = tmp_path / "mm.py"
    path.write_text(KERNEL)
    x = jax.random.normal(jax.random.key(0), (64, 32), dtype="bfloat16")
    y = jax.random.normal(jax.random.key(1), (32, 256), dtype="bfloat16")
    outs = []
    for carry in (False, True):
        with user_module(str(path), carry_origins=carry) as module:
            outs.append(np.asarray(jax.jit(module.matmul)(x, y)))
            if carry:
                assert places_of(module.SIZES["bm"])
    assert outs[0].dtype == outs[1].dtype and np.array_equal(outs[0], outs[1])
