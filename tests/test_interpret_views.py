"""Refs viewed through a reshape or bitcast, and masked stores, in jax's TPU interpreter
(runner/tier3/interpret_views.py). Before: tier 3 said PLS306 "not checked" for any kernel viewing a ref
(ragged paged attention, the deepseek v4 kernels, gmm v2: a third of issue 57's reached-but-missed mutants),
and PLS300 for a correct masked store into a block whose first dim is longer than its second."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from checking import check_files, variants

from pallasite.runner.tier3 import interpret_views

DATA = Path(__file__).parent / "data" / "runtime"


def _mosaic_bitcast(x, dtype):
    """jax's own lowering of ``pltpu.bitcast`` (jax/_src/pallas/mosaic/primitives.py), run on CPU."""
    import jax
    import jax.numpy as jnp

    src, dst = jnp.dtype(x.dtype).itemsize, jnp.dtype(dtype).itemsize
    if src < dst:
        *lead, m, n = x.shape
        return jax.lax.bitcast_convert_type(jnp.swapaxes(x.reshape(*lead, m // (dst // src), dst // src, n), -1, -2),
                                            dtype)
    y = jax.lax.bitcast_convert_type(x, dtype)
    *lead, m, n, p = y.shape
    return jnp.swapaxes(y, -1, -2).reshape(*lead, m * p, n)


@pytest.mark.parametrize("src, dst", [("bfloat16", "int32"), ("int32", "bfloat16"), ("uint8", "int32")])
def test_the_bitcast_packs_the_second_minor_dim_as_mosaic_does(src, dst):
    import jax.numpy as jnp

    width = jnp.dtype(src).itemsize
    x = np.random.default_rng(0).integers(0, 256, size=(2, 16, 128 * width), dtype=np.uint8).view(jnp.dtype(src))
    ours = interpret_views._bitcast(x, np.dtype(jnp.dtype(dst)))
    theirs = np.asarray(_mosaic_bitcast(jnp.asarray(x), jnp.dtype(dst)))
    assert ours.shape == theirs.shape and ours.tobytes() == theirs.tobytes()
    back = interpret_views._bitcast(ours, x.dtype)
    assert back.tobytes() == x.tobytes()


def test_a_write_through_a_view_lands_where_the_view_points():
    class Reshape:  # the transforms' class names are what the wrapper reads
        def __init__(self, shape):
            self.shape = shape

    Reshape.__name__ = "ReshapeTransform"
    whole = np.arange(32, dtype=np.float32).reshape(4, 8)
    view = interpret_views._through(whole, [Reshape((8, 4))])
    assert view.shape == (8, 4) and view[1, 0] == 4
    written = interpret_views._written(whole, [Reshape((8, 4))], np.full((8, 4), -1.0, np.float32))
    assert written.shape == (4, 8) and (written == -1).all()


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, list[dict]]:
    """The two fixtures and a planted bug in each, checked in one run at tiers 0-3: name -> findings."""
    bugs = variants(tmp_path_factory.mktemp("views"), [
        (DATA / "viewed_refs.py", "bug_viewed_refs.py", "view[:, 0, :] + view[:, 1, :]", "view[:, 0, :] + view[:, 0, :]"),
        (DATA / "masked_store.py", "bug_masked_store.py", "mask=lanes < n", "mask=lanes <= n")])
    reports = check_files([DATA / "viewed_refs.py", DATA / "masked_store.py", *bugs], "0-3")
    return {name: report["findings"] for name, report in reports.items()}


def test_a_kernel_viewing_its_refs_runs_in_tier_3_and_a_bug_through_the_view_is_caught(checked):
    assert checked["viewed_refs.py"] == []  # was PLS306: tier 3 not checked
    found = [f for f in checked["bug_viewed_refs.py"] if f["severity"] == "error"]
    assert [f["code"] for f in found] == ["PLS304"] and "output 0 differs" in found[0]["message"]


def test_a_masked_store_in_bounds_is_not_out_of_bounds(checked):
    assert checked["masked_store.py"] == []  # was PLS300 "Out-of-bounds masked swap"
    found = [f for f in checked["bug_masked_store.py"] if f["severity"] == "error"]
    assert [f["code"] for f in found] == ["PLS304"]  # one lane more kept than the reference keeps


def test_the_interpreter_s_own_assertion_inside_a_callback_is_not_the_kernel_s_fault():
    """tpu-inference's gmm v2 waits on a DMA semaphore the interpreter's accounting asserts on (its
    shared_memory.py, the callback's last frame): "not checked" (PLS306), not the kernel's PLS300."""
    from pallasite.runner.tier3.interpret_verdicts import upstream_failure

    text = ('INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n'
            '  File "/x/jax/_src/pallas/mosaic/interpret/interpret_pallas_call.py", line 1142, in dma_wait\n'
            '  File "/x/jax/_src/pallas/mosaic/interpret/shared_memory.py", line 194, in wait\nAssertionError: \n')
    why = upstream_failure(RuntimeError(text), {"raised_at": {"file": "/work/k/gmm_v2.py", "line": 1416}})
    assert why is not None and "shared_memory.py:194 (AssertionError in wait)" in why
    user = text.replace("/x/jax/_src/pallas/mosaic/interpret/shared_memory.py", "/work/k/gmm_v2.py")
    assert upstream_failure(RuntimeError(user), {"raised_at": {"file": "/work/k/gmm_v2.py", "line": 1416}}) is None


def test_races_on_a_viewed_buffer_are_left_out_and_counted():
    """A view's elements (a strided slot, a packed row) are not one box, and the interpreter records boxes:
    deepseek v4's MLA-SWA showed two DMAs "racing" on one cache page whose rows they split."""
    interpret_views.VIEWED.clear()
    interpret_views.VIEWED.add("('hbm', 103, 0, 0)[")
    reports = ["RACE DETECTED\n  write of ('hbm', 103, 0, 0)[(slice(10, 11, 1),)] from 138",
               "RACE DETECTED\n  write of ('vmem', 7, 0, 0)[(0,)] from 0"]
    kept, left_out = interpret_views.unviewed_races(reports)
    assert kept == reports[1:] and left_out == 1
    interpret_views.VIEWED.clear()
