# harness for: recurrentgemma:recurrentgemma/jax/pallas.py
# ruff: noqa
# Appended to the kernel file: the file's own lru_pallas_scan (its custom VJP _lru, _lru_fwd/_lru_bwd,
# linear_rnn_shard_corrected_pallas_call, linear_rnn_pallas_call, linear_rnn_pallas_kernel) on a real float32
# x, a of shape (2, 75, 1152) (batch 2, 75 steps, width 1152) with an initial state h0 (2, 1152), seq blocks of 32
# (min = max = 32): the sequence is padded 75 -> 96 (x with 0, a with 1; at the back forward, at the front in
# reverse), so grid (batch 2, width 2, seq 3), the width in blocks of 8 x 128 lanes (the second one partial: 9 tiles
# of 128). Three runs: the forward direction (the primal _lru), the reverse direction under jax.vjp (the kernel with
# reverse=True and the reversed block specs), then the forward direction under jax.vjp (the backprop kernel, which
# runs reversed specs), the cotangents (dy, dh_last) being inputs. Returns (y, h_last) forward, (y, h_last, dx, da,
# dh0) reverse, (dx, da, dh0) forward. a lies in [0.8, 0.999] (decays, as the model's RG-LRU), so the carry
# reaches across blocks. The reference is the sibling module's plain-JAX lru_linear_scan
# (recurrentgemma.jax.scan, unmutated: a lax.scan), with jax.vjp of it for the gradients.
import jax
import jax.numpy as jnp

from recurrentgemma.jax.scan import lru_linear_scan as _ref_lru_linear_scan

_B, _T, _D = 2, 75, 1152
_BLOCK = 32
PALLASITE_ENTRY = "harness_lru_pallas_scan"
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}


def _kernel_scan(reverse):
    def f(x, a, h0):
        return lru_pallas_scan(x, a, h0, reverse=reverse, max_seq_block_size=_BLOCK, min_seq_block_size=_BLOCK)
    return f


def harness_lru_pallas_scan(x, a, h0, dy, dh):
    y_f, h_f = _kernel_scan(False)(x, a, h0)
    (y_r, h_r), vjp_r = jax.vjp(_kernel_scan(True), x, a, h0)
    dx_r, da_r, dh0_r = vjp_r((dy, dh))
    _, vjp_f = jax.vjp(_kernel_scan(False), x, a, h0)
    dx_f, da_f, dh0_f = vjp_f((dy, dh))
    return (y_f, h_f), (y_r, h_r, dx_r, da_r, dh0_r), (dx_f, da_f, dh0_f)


def example_inputs():
    keys = jax.random.split(jax.random.key(2024), 5)
    shape = (_B, _T, _D)
    x = jax.random.normal(keys[0], shape, jnp.float32) + 0.25 * jnp.arange(_T, dtype=jnp.float32)[None, :, None] / _T
    a = 0.8 + 0.199 * jax.random.uniform(keys[1], shape, jnp.float32)
    h0 = 2.0 * jax.random.normal(keys[2], (_B, _D), jnp.float32) + jnp.arange(_B, dtype=jnp.float32)[:, None]
    dy = jax.random.normal(keys[3], shape, jnp.float32)
    dh = jax.random.normal(keys[4], (_B, _D), jnp.float32) - 0.5
    return (x, a, h0, dy, dh)


def _ref_scan(reverse):
    def f(x, a, h0):
        return _ref_lru_linear_scan(x, a, h0, reverse=reverse)
    return f


def reference(x, a, h0, dy, dh):
    y_f, h_f = _ref_scan(False)(x, a, h0)
    (y_r, h_r), vjp_r = jax.vjp(_ref_scan(True), x, a, h0)
    dx_r, da_r, dh0_r = vjp_r((dy, dh))
    _, vjp_f = jax.vjp(_ref_scan(False), x, a, h0)
    dx_f, da_f, dh0_f = vjp_f((dy, dh))
    return (y_f, h_f), (y_r, h_r, dx_r, da_r, dh0_r), (dx_f, da_f, dh0_f)
