"""A check with the results store asks tier 1 first (tier 2 may be stored) for a path's first check
and for code it has seen, and tiers 1-2 in one request once the code changed (engine/tier2_route.py)."""

from __future__ import annotations

import asyncio

from pallasite.engine import tier2_route
from pallasite.engine.checker import Checker, CheckOptions

KERNEL = '''import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0  # the body


def add(x):
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)
'''


def test_the_code_digest_ignores_comments_and_trailing_blank_space_only():
    digest = tier2_route.code_digest
    assert digest(KERNEL) == digest(KERNEL.replace("# the body", "# another comment") + "\n\n# end\n")
    assert digest(KERNEL) == digest(KERNEL.replace("+ 1.0  # the body", "+ 1.0   \t"))
    assert digest(KERNEL) != digest(KERNEL.replace("+ 1.0", "+ 2.0"))
    # the lowered module's hash holds every operation's line and column: code that moved is new code
    assert digest(KERNEL) != digest(KERNEL.replace("x_ref[...] + 1.0", "x_ref[...]  +  1.0"))
    assert digest(KERNEL) != digest(KERNEL.replace("def add_kernel", "# a comment line\ndef add_kernel"))


def test_first_check_and_known_code_go_tier1_first_changed_code_asks_both():
    path = "/virtual/route/first.py"
    assert tier2_route.tier1_first(path, KERNEL)  # first time: a stored verdict may exist
    assert tier2_route.tier1_first(path, KERNEL + "# saved again\n")  # same code
    changed = KERNEL.replace("+ 1.0", "+ 2.0")
    assert not tier2_route.tier1_first(path, changed)  # new code: tier 2 compiles anyway
    assert tier2_route.tier1_first(path, KERNEL)  # an undo: seen before
    assert tier2_route.tier1_first("/virtual/route/other.py", changed)  # per path


class _Recording:
    """Stands for the check worker: records the tiers each request asks and fails it (no worker runs)."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, ...]] = []

    async def request(self, params, **kwargs):
        from pallasite.engine.workers.backend import Reply

        self.asked.append(tuple(params.tiers))
        return Reply(status="error", error=None)


class _Store:
    def get(self, key, tier):
        return None

    def put(self, *args, **kwargs):
        pass

    def source_hash(self, path, text):
        return "h"


def test_the_checker_asks_both_tiers_at_once_when_the_code_changed(tmp_path):
    path = str(tmp_path / "kernel.py")
    (tmp_path / "kernel.py").write_text(KERNEL)
    asked = []
    moved = KERNEL.replace("+ 1.0", "+ 3.0").replace("def add_kernel", "# a comment line\ndef add_kernel")
    for text in (KERNEL, KERNEL.replace("+ 1.0", "+ 3.0"), KERNEL.replace("+ 1.0", "+ 3.0") + "# comment\n", moved):
        client = _Recording()
        checker = Checker(CheckOptions(target="v5e", tiers=(0, 1, 2)), client=client, cache=_Store())
        asyncio.run(checker.check(path, text))
        asked.append(client.asked[0] if client.asked else None)
    # a comment line above the kernel moves its lowered locations: tier 2 would compile again, so both at once
    assert asked == [(1,), (1, 2), (1,), (1, 2)]
