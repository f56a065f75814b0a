"""Tier 0 on kernels and sharded arrays (issue 50's sharding class, analysis/rules/sharding.py).

tests/data/sharding/ holds broken files, each marking its line with ``# expect: CODE``, and their
fixed twins (``*_fixed.py``), which must be silent. Before the rules, the broken ones were found at
no tier: the out_shape without the manual axis type under shard_map (jax refuses it while tracing)
and the kernel applied to a sharded array outside shard_map (jax on a TPU refuses to partition it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pallasite.analysis.source import apply_edits
from pallasite.analysis.tier0 import analyze

DATA = Path(__file__).parent / "data" / "sharding"
BROKEN = ("vma_out_shape.py", "unsharded_call.py")
FIXED = ("vma_out_shape_fixed.py", "unsharded_call_fixed.py")
SHARDING_CODES = ("PLS115", "PLS116")


def _expected(name: str) -> tuple[str, int]:
    lines = (DATA / name).read_text().splitlines()
    [(code, line)] = [(m.group(1), i + 1) for i, text in enumerate(lines) if (m := re.search(r"# expect: (PLS\d+)", text))]
    return code, line


def _sharding(text: str) -> list:
    return [f for f in analyze(text).findings if f.code in SHARDING_CODES]


@pytest.mark.parametrize("name", BROKEN)
def test_the_broken_file_is_found_at_its_line(name):
    found = _sharding((DATA / name).read_text())
    assert [(f.code, f.span.line + 1, f.severity) for f in found] == [(*_expected(name), "error")], found


@pytest.mark.parametrize("name", FIXED)
def test_the_fixed_twin_is_silent(name):
    assert _sharding((DATA / name).read_text()) == []


def test_the_out_shape_fix_passes_the_operands_manual_axis_type():
    text = (DATA / "vma_out_shape.py").read_text()
    [finding] = _sharding(text)
    fixed = apply_edits(text, finding.fix.edits)
    assert "jax.ShapeDtypeStruct(x.shape, x.dtype, manual_axis_type=jax.typeof(x).manual_axis_type)" in fixed
    assert _sharding(fixed) == []


def test_the_unpartitioned_call_names_the_shard_map_to_write():
    [finding] = _sharding((DATA / "unsharded_call.py").read_text())
    assert "jax.shard_map(double, mesh=mesh, in_specs=P('x', None), out_specs=P('x', None))(x)" in finding.message


KERNEL = '''
import functools
import jax
from jax.experimental import pallas as pl
from jax.sharding import PartitionSpec as P

def k(x_ref, o_ref):
    o_ref[...] = x_ref[...]

{decorator}
def per_shard(x):
    return pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
'''


@pytest.mark.parametrize("decorator, said", [
    ('@functools.partial(jax.shard_map, mesh=None, in_specs=P("x"), out_specs=P("x"))', True),
    ('@jax.shard_map(mesh=None, in_specs=P("x"), out_specs=P("x"))', True),
    ('@functools.partial(jax.shard_map, mesh=None, in_specs=P("x"), out_specs=P("x"), check_vma=False)', False),
    ("", False),
])
def test_a_decorating_shard_map_is_read_and_check_vma_false_is_silent(decorator, said):
    assert bool(_sharding(KERNEL.format(decorator=decorator))) is said


# ------------------------------------------------------------------ cost per edit (issue 58)
# Tier 0 runs after every edit; the sharding rules once read the whole file's tree 7-8 times per
# analysis whatever it held (80-88% of tier 0 on jax's splash attention). They must stop before
# reading a function on a file with no shard_map call and nothing placed with a sharding, and, on
# a file with some, read again only what an edit changed. Counted in calls, not time.

WORDS_ONLY = "sharding_in_words_only.py"


@pytest.fixture
def calls(monkeypatch):
    """How often each of the rules' readings of the file ran (wrapped where the rules call them)."""
    from pallasite.analysis.rules import sharding

    counts = {}
    for name in ("_defs", "_shard_mapped", "_pallas_calls", "_facts", "_read_unit"):
        real = getattr(sharding, name, None)
        if real is None:  # (the rules before issue 58 had no per-unit or per-def reading)
            continue

        def counted(*args, _real=real, _name=name, **kwargs):
            counts[_name] = counts.get(_name, 0) + 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(sharding, name, counted)
    return counts


def test_a_file_that_names_sharding_only_in_words_is_not_read_by_the_rules(calls):
    text = (DATA / WORDS_ONLY).read_text()
    assert "shard_map" in text and "NamedSharding" in text and "device_put" in text  # past the text gate
    result = analyze(text)
    assert result.sites and not [f for f in result.findings if f.code in SHARDING_CODES]
    assert {name: calls.get(name, 0) for name in ("_defs", "_shard_mapped", "_pallas_calls", "_facts")} == \
        {"_defs": 0, "_shard_mapped": 0, "_pallas_calls": 0, "_facts": 0}, calls


def test_a_file_without_the_words_is_not_read_at_all(calls):
    text = (DATA / WORDS_ONLY).read_text()
    plain = text.replace("shard_map", "shard map").replace("NamedSharding", "Sharding")
    analyze(plain)
    assert calls == {}


def test_after_an_edit_inside_one_function_only_that_unit_is_read_again(calls):
    from pallasite.analysis.tier0_state import Tier0State

    text = (DATA / WORDS_ONLY).read_text()
    state = Tier0State()
    analyze(text, "words.py", state=state)
    first = calls.pop("_read_unit")
    assert first > 3  # every unit once: imports, the kernel, its wrapper, the class...
    edited = text.replace("    rows, cols = x.shape\n", "    rows, cols = x.shape\n    _probe = rows\n")
    assert edited != text
    analyze(edited, "words.py", state=state)
    assert calls.get("_read_unit") == 1  # the edited function's unit; the others' facts were kept with them


def test_a_sharded_file_reads_again_only_the_edited_function(calls):
    from pallasite.analysis.tier0_state import Tier0State

    text = (DATA / "unsharded_call.py").read_text()
    state = Tier0State()
    assert [f.code for f in analyze(text, "u.py", state=state).findings if f.code in SHARDING_CODES] == ["PLS115"]
    built = calls.pop("_facts")
    calls.clear()
    from pallasite.analysis.rules import sharding

    made = []
    real_walk = sharding.walk
    sharding.walk = lambda node: (made.append(getattr(node, "name", None)), real_walk(node))[1]
    try:
        edited = text.replace("    sharding = NamedSharding", "    _probe = rows\n    sharding = NamedSharding")
        found = analyze(edited, "u.py", state=state).findings
    finally:
        sharding.walk = real_walk
    assert [(f.code, f.span.line) for f in found if f.code in SHARDING_CODES] == \
        [("PLS115", _expected("unsharded_call.py")[1])]  # one line down: the probe
    assert built >= 3 and made == ["run"]  # of double_kernel, double and run, only run's def is read again
