"""pallas_call sites kept across edits (analysis/site_memo.py): after every random edit, the sites
read with the file's kept sites equal the sites read from scratch, and kept sites are used."""

from __future__ import annotations

import os
import random

import pytest

from pallasite.analysis import site_memo
from pallasite.analysis.rules.apis import jax_root
from pallasite.analysis.sites import find_sites
from pallasite.analysis.source import Source, forget
from pallasite.analysis.tier0_state import Tier0State

DEPENDENT = '''import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK = 128
ROWS, COLS = 8, 256
SEM = ("parallel", "arbitrary")


def index_map(i, j):
    return (i, j)


def make_specs(bm):
    return [pl.BlockSpec((bm, COLS), index_map), pl.BlockSpec((bm, COLS), lambda i, j: (i, 0))]


def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def other(a, b):
    return a + b


def run(x, y, bm=BLOCK):
    return pl.pallas_call(
        kernel,
        grid=(ROWS, 2),
        in_specs=make_specs(bm),
        out_specs=pl.BlockSpec((bm, COLS), index_map),
        out_shape=jax.ShapeDtypeStruct((1024, COLS), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=SEM),
    )(x, y)


@functools.partial(pl.pallas_call, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                   grid=(2,), in_specs=[pl.BlockSpec((8, 128), index_map)])
def decorated(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def second(x):
    def inner_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    return pl.pallas_call(inner_kernel, grid=(BLOCK // 64,), in_specs=[pl.BlockSpec((ROWS, 128), index_map)],
                          out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))(x)
'''

# lines an edit may insert, each changing what some site reads (or nothing it reads)
INSERTS = [
    "BLOCK = 256", "ROWS, COLS = 16, 512", "SEM = ('arbitrary', 'arbitrary')", "index_map = None",
    "def kernel(a_ref, o_ref):\n    pass", "def index_map(i):\n    return (i,)",
    "def make_specs(bm):\n    return pl.BlockSpec((bm, 128), index_map)",
    "def inner_kernel(q_ref, r_ref, s_ref):\n    pass", "def other(a):\n    global BLOCK\n    BLOCK = 3",
    "import jax.experimental.pallas.triton as plgpu", "x = 1; y = 2", "# a comment", "", "    pass",
    "def helper():\n    return (BLOCK := 4)", "class K:\n    def kernel(self):\n        pass",
]


def _edit(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    i = rng.randrange(len(lines) + 1)
    kind = rng.random()
    if kind < 0.45:
        block = rng.choice(INSERTS).split("\n")
        if i < len(lines) and lines[i].startswith(" ") and rng.random() < 0.5:  # inside a function
            indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
            block = [indent + line.strip() for line in block if line.strip()] or [indent + "pass"]
        lines[i:i] = block
    elif kind < 0.6 and i < len(lines):
        del lines[i]
    elif kind < 0.75 and i < len(lines):
        lines[i] = lines[i].replace("128", rng.choice(["64", "256", "128"]), 1).replace("2", "3", 1)
    elif kind < 0.85 and len(lines) > 4:  # a run of lines moved elsewhere
        a = rng.randrange(len(lines) - 3)
        run = lines[a:a + rng.randint(1, 3)]
        del lines[a:a + len(run)]
        at = rng.randrange(len(lines) + 1)
        lines[at:at] = run
    else:
        lines.insert(i, "")
    return "\n".join(lines)


def _check(text: str, rng: random.Random, edits: int) -> int:
    """Apply ``edits`` random edits; after each, the sites with the kept ones equal a fresh read.
    Returns how many sites were handed out again."""
    hits = 0
    key = Tier0State()
    real_get = site_memo.SiteMemo.get

    def counting(self, call):
        nonlocal hits
        found = real_get(self, call)
        hits += found is not None
        return found

    site_memo.SiteMemo.get = counting
    try:
        original = text
        for step in range(edits):
            text = original if step % 7 == 6 else _edit(text, rng)  # now and then an undo to the start
            kept = find_sites(Source(text, state=key))
            fresh = find_sites(Source(text))
            assert kept == fresh, f"step {step}: the kept sites differ from a fresh read"
    finally:
        site_memo.SiteMemo.get = real_get
        forget(key)
    return hits


def test_kept_sites_equal_a_fresh_read_after_random_edits():
    hits = 0
    for seed in range(6):
        hits += _check(DEPENDENT, random.Random(seed), 60)
    assert hits > 100  # sites were handed out again, not only read


def test_a_change_to_what_a_site_reads_reads_it_again():
    key = Tier0State()
    try:
        first = find_sites(Source(DEPENDENT, state=key))
        for old, new in (("BLOCK = 128", "BLOCK = 256"), ("    return (i, j)", "    return (i,)"),
                         ("def kernel(x_ref, y_ref, o_ref):", "def kernel(x_ref, o_ref):"),
                         ('SEM = ("parallel", "arbitrary")', 'SEM = ("arbitrary", "arbitrary")')):
            text = DEPENDENT.replace(old, new)
            assert text != DEPENDENT
            kept = find_sites(Source(text, state=key))
            assert kept == find_sites(Source(text)) and kept != first, old
        moved = "\n\n# two lines above everything\n" + DEPENDENT  # moved, else unchanged: the same sites, two lines down
        kept = find_sites(Source(moved, state=key))
        assert kept == find_sites(Source(moved)) and [s.span.line for s in kept] == [s.span.line + 3 for s in first]
    finally:
        forget(key)


def test_a_forgotten_file_keeps_no_sites():
    key = Tier0State()
    find_sites(Source(DEPENDENT, state=key))
    assert key.sites
    forget(key)
    assert not key.sites


JAX_FILES = ["splash_attention/splash_attention_kernel.py", "flash_attention.py", "megablox/gmm.py"]


@pytest.mark.skipif(jax_root() is None, reason="jax is not installed")
@pytest.mark.parametrize("name", JAX_FILES)
def test_kept_sites_on_jax_kernels(name):
    path = os.path.join(jax_root(), "experimental", "pallas", "ops", "tpu", name)
    if not os.path.exists(path):
        pytest.skip(f"{name} is not in this jax")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    _check(text, random.Random(name), 25)
