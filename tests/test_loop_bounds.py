"""Work the counts cannot see, priced from what it can move (issue 56): a loop whose trip count the known values
do not give is bounded by the refs its body reaches (runner/program/loop_bounds.py), or the kernel is not estimated
and says why - never counted once; a kernel's own DMAs are priced by the bytes they move and not hidden
behind its compute; every estimate says what it rests on (runner/program/checked_classes.py)."""

from __future__ import annotations

import os

import numpy as np

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from pallasite.analysis.types import chip_target  # noqa: E402
from pallasite.runner.chip_probe import spec_from_jax  # noqa: E402
from pallasite.runner.loader import user_module  # noqa: E402
from pallasite.runner.program.program_price import price_program  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")
V6E = spec_from_jax(chip_target("v6e"))
X = jax.ShapeDtypeStruct((256, 128), jnp.float32)


def _priced(entry: str, *args):
    with user_module(os.path.join(DATA, "module_cost", "row_loop.py")) as module:
        return price_program(getattr(module, entry), list(args), V6E)


def test_a_loop_of_unknown_trips_over_a_refs_rows_is_bounded_by_its_rows():
    """32 trips of 8 rows cover the 256 rows. With the count unknown the loop was counted once before (1/32 of
    the work, "a lower bound"); now at most (256 - 8) / 8 + 1 = 32 trips, the exact count's work, an upper bound."""
    exact = _priced("add", np.array([32], np.int32), X, X)
    blind = _priced("add", jax.ShapeDtypeStruct((1,), jnp.int32), X, X)
    assert exact.status == blind.status == "ok", (exact.error, blind.error)
    (e,), (b,) = exact.calls, blind.calls
    assert e.flops_count == "exact" and b.flops_count == "upper bound"
    assert b.flops >= 256 * 128 and b.flops >= e.flops  # every row's add, never 1/32 of it
    assert any("bounded at 32 trips" in n and "(8 of 256 per trip)" in n for n in b.notes)
    assert blind.seconds >= exact.seconds


def test_a_loop_nothing_bounds_is_not_estimated_and_says_why():
    blind = _priced("accumulate", jax.ShapeDtypeStruct((1,), jnp.int32), X)
    assert blind.status == "trace_error" and blind.seconds is None
    assert "a number of trips the known values do not give" in blind.error and "pass the inputs' values" in blind.error
    known = _priced("accumulate", np.array([5], np.int32), X)
    assert known.status == "ok" and known.calls[0].transcendentals == 5 * 256 * 128


def _reward_hack(name: str) -> str:
    from reward_hacks import FROZEN

    return (open(os.path.join(DATA, "reward_hacks", f"{name}.py")).read() + FROZEN)


def _price_text(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    with user_module(str(path)) as module:
        return price_program(module.add, list(module.example_inputs()), V6E)


def test_a_kernel_moving_its_inputs_by_hand_costs_no_less_than_with_blockspecs(tmp_path):
    """tests/data/reward_hacks/dma_hidden.py: the inputs in HBM (pl.ANY), copied by the kernel's own DMAs and
    waited at once. Priced by the bytes those DMAs move, none hidden behind its compute: failed before (its
    copies overlapped its compute, 2.425 us against 2.585 us for the same kernel with whole-array BlockSpecs)."""
    hidden = _price_text(tmp_path, "dma_hidden", _reward_hack("dma_hidden"))
    blocks = _price_text(tmp_path, "whole_blocks", _reward_hack("dma_hidden").replace(
        "in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)]",
        "in_specs=[pl.BlockSpec(x.shape, lambda i: (0, 0))] * 2").replace(
        "cx.start()\n    cy.start()\n    cx.wait()\n    cy.wait()\n    o_ref[...] = x_vmem[...] + y_vmem[...]",
        "o_ref[...] = x_hbm[...] + y_hbm[...]"))
    assert hidden.status == blocks.status == "ok", (hidden.error, blocks.error)
    (call,) = hidden.calls
    assert (call.dma_copies, call.dma_bytes, call.dma_count) == (2, 2 * 256 * 128 * 4, "exact")
    assert call.dma_bytes + call.hbm_bytes == blocks.calls[0].hbm_bytes  # the same bytes, moved by hand
    assert hidden.seconds >= blocks.seconds * (1 - 1e-12)


def test_the_loop_attack_is_bounded_by_the_refs_it_reaches_and_never_priced_below_the_honest_kernel(tmp_path):
    """tests/data/reward_hacks/loop_unknown_trips.py: its trip count comes from an input's value (x[0, 0] * 0 added
    to rows / 8), which the module cannot fix and the judge never makes for floats, so the loop is bounded by the
    refs its body reaches ("upper bound"), never counted once: at least the honest 128-row kernel's work and bytes,
    and a figure no lower than the honest kernel's (the attack's one grid step saves overhead it cannot keep)."""
    from reward_hacks import RIGHT

    attack = _price_text(tmp_path, "loop_unknown_trips", _reward_hack("loop_unknown_trips"))
    honest = _price_text(tmp_path, "honest", RIGHT)
    (a,), (h,) = attack.calls, honest.calls
    assert (a.flops_count, h.flops_count) == ("upper bound", "exact")
    assert a.flops >= h.flops == 256 * 128
    assert a.hbm_bytes >= h.hbm_bytes
    assert (a.steps, h.steps) == (1, 2)
    assert attack.seconds >= honest.seconds


def test_an_estimate_says_what_it_rests_on():
    with user_module(os.path.join(DATA, "tune", "matmul.py")) as module:
        matmul = price_program(module.matmul, list(module.example_inputs()), V6E)
    assert matmul.rests_on[0].startswith("matmul_kernel: a blocked matmul, rules checked out of sample on jax's "
                                         "Pallas matmul guide")
    exact = _priced("add", np.array([32], np.int32), X, X)
    assert "rules not yet checked against a TPU" in exact.rests_on[0]
    assert any(r.startswith("priced for these inputs' values: add_kernel's scalar-prefetch tables") for r in exact.rests_on)
    blind = _priced("add", jax.ShapeDtypeStruct((1,), jnp.int32), X, X)
    assert not any("priced for these inputs' values" in r for r in blind.rests_on)
