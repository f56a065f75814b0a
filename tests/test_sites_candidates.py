"""``sites._candidates`` (the calls a text search says may name pallas_call, partial or a wrapper)
loses no site: reading every call of the file gives the same sites, on tier 0's fixtures, the
wrapper, alias and partial forms, and jax's own Pallas TPU kernels."""

from __future__ import annotations

import glob
import os

import pytest

from pallasite.analysis import sites
from pallasite.analysis.rules.apis import jax_root
from pallasite.analysis.source import Source

FIXTURES = os.path.join(os.path.dirname(__file__), "data")
FORMS = '''
import functools
from functools import partial as p
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import pallas_call as launch


def my_pallas_call(kernel, **kwargs):
    return pl.pallas_call(kernel, **kwargs)


def forward(kernel, grid, out_shape):
    return pl.pallas_call(kernel, grid=grid, out_shape=out_shape)


def k(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def run(x):
    a = launch(k, out_shape=x, grid=(1,))(x)
    b = my_pallas_call(k, out_shape=x, grid=(1,))(x)
    c = forward(k, grid=(2,), out_shape=x)(x)
    d = p(pl.pallas_call, k, out_shape=x)(x)
    e = functools.partial(pl.pallas_call, out_shape=x)(k)(x)
    f = block.pallas_call(k, out_shape=x, grid=(1,), in_specs=[])(x)
    return a, b, c, d, e, f
'''


def _texts() -> list[str]:
    paths = sorted(glob.glob(os.path.join(FIXTURES, "tier0", "*.py")) + glob.glob(os.path.join(FIXTURES, "lsp", "*.py")))
    root = jax_root()
    if root is not None:
        paths += sorted(glob.glob(os.path.join(root, "experimental", "pallas", "ops", "tpu", "**", "*.py"),
                                  recursive=True))
    return [FORMS] + [open(p, encoding="utf-8").read() for p in paths]


def test_the_candidates_hold_every_site(monkeypatch):
    texts = _texts()
    fast = [sites.find_sites(Source(text)) for text in texts]
    monkeypatch.setattr(sites, "_candidates", lambda source: source.calls)
    every = [sites.find_sites(Source(text)) for text in texts]
    assert fast == every
    assert len(fast[0]) == 8 and sum(len(found) for found in fast) > 40
    assert len(texts) > 40 or pytest.skip("jax's kernels are not installed")
