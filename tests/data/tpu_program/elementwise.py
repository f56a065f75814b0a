"""Element-wise kernels, one per op family, for the judge's interpreter of the TPU program.

Each entry is one ``pallas_call`` over whole arrays taken straight from the entry's inputs (so the
custom call's operands are the inputs), with a plain-jax ``reference`` (jit it: it is traced, not run op
by op) or a numpy one (``*_numpy``). ``CASES``: name -> (entry, inputs function, reference). Inputs are
numpy arrays made by a seeded generator.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

SHAPE = (8, 128)


def _call(kernel, outs, *args):
    return pl.pallas_call(kernel, out_shape=outs)(*args)


def _float_math_body(x, y):
    pos = jnp.abs(y) + 0.5
    return (jnp.exp(x), jnp.log(pos), jnp.tanh(x), lax.rsqrt(pos), jnp.sqrt(pos), jnp.power(pos, x),
            lax.erf(x), jnp.sin(x) + jnp.cos(y), jnp.floor(x * 3) + jnp.ceil(y * 3) + jnp.round(x * 3),
            jnp.maximum(x, y) - jnp.minimum(x, y), jnp.where(x > y, x, y), x / pos, jax.nn.sigmoid(x),
            jnp.abs(x) * -y + x, jnp.log1p(pos), jnp.exp2(x))


def float_math(x, y):
    def kernel(x_ref, y_ref, *o_refs):
        for o, v in zip(o_refs, _float_math_body(x_ref[...], y_ref[...])):
            o[...] = v

    outs = [jax.ShapeDtypeStruct(SHAPE, jnp.float32)] * 16
    return _call(kernel, outs, x, y)


def float_inputs():
    rng = np.random.default_rng(1)
    return rng.standard_normal(SHAPE, np.float32), rng.standard_normal(SHAPE, np.float32) * 2


def bf16_math(x, y):
    def kernel(x_ref, y_ref, a_ref, b_ref, c_ref, d_ref):
        x, y = x_ref[...], y_ref[...]
        a_ref[...] = x + y * x
        b_ref[...] = jnp.maximum(x, y) - y
        c_ref[...] = jnp.exp(x) * y
        d_ref[...] = (x.astype(jnp.float32) * 3).astype(jnp.bfloat16)

    outs = [jax.ShapeDtypeStruct(SHAPE, jnp.bfloat16)] * 4
    return _call(kernel, outs, x, y)


def bf16_inputs():
    x, y = float_inputs()
    return x.astype(jnp.bfloat16), y.astype(jnp.bfloat16)


def bf16_reference(x, y):
    return (x + y * x, jnp.maximum(x, y) - y, jnp.exp(x) * y, (x.astype(jnp.float32) * 3).astype(jnp.bfloat16))


def _int_math_body(a, b):
    s = b & 31
    return (a + b, a * b, a - b * 7, lax.div(a, b), lax.rem(a, b), a // b, a % b, a << s,
            lax.shift_right_arithmetic(a, s), lax.shift_right_logical(a, s), (a & b) | (a ^ ~b),
            jnp.maximum(a, b) + jnp.minimum(a, b), jnp.abs(a), (a > b).astype(jnp.int32) + (a == b) * 2,
            jnp.where(a < 0, -a, b))


def int_math(a, b):
    def kernel(a_ref, b_ref, *o_refs):
        for o, v in zip(o_refs, _int_math_body(a_ref[...], b_ref[...])):
            o[...] = v

    outs = [jax.ShapeDtypeStruct(SHAPE, jnp.int32)] * 15
    return _call(kernel, outs, a, b)


def int_inputs():
    rng = np.random.default_rng(2)
    a = rng.integers(-2**31, 2**31, SHAPE, dtype=np.int64).astype(np.int32)
    b = rng.integers(-1000, 1000, SHAPE).astype(np.int32)
    b[b == 0] = 3
    a[0, :4] = [2**31 - 1, -2**31, -7, 7]  # overflow and the signs of division
    b[0, :4] = [1, -1, 2, -2]
    return a, b


def unsigned_math(a, b):
    def kernel(a_ref, b_ref, q_ref, r_ref, gt_ref, sh_ref, mx_ref):
        a, b = a_ref[...], b_ref[...]
        q_ref[...] = a // b
        r_ref[...] = a % b
        gt_ref[...] = (a > b).astype(jnp.uint32)
        sh_ref[...] = a >> 3
        mx_ref[...] = jnp.maximum(a, b)

    outs = [jax.ShapeDtypeStruct(SHAPE, jnp.uint32)] * 5
    return _call(kernel, outs, a, b)


def unsigned_inputs():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2**32, SHAPE, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(1, 2**32, SHAPE, dtype=np.uint64).astype(np.uint32)
    return a, b


def unsigned_reference(a, b):
    return a // b, a % b, (a > b).astype(jnp.uint32), a >> 3, jnp.maximum(a, b)


def casts(x, n):
    def kernel(x_ref, n_ref, i_ref, f_ref, b_ref, w_ref, m_ref, bits_ref, back_ref):
        x, n = x_ref[...], n_ref[...]
        i_ref[...] = (x * 1000).astype(jnp.int32)
        f_ref[...] = n.astype(jnp.float32) * 0.5
        b_ref[...] = x.astype(jnp.bfloat16).astype(jnp.float32)
        w_ref[...] = (n * 1000).astype(jnp.int8).astype(jnp.int32)
        m_ref[...] = (x > 0).astype(jnp.int32) + (n > 0).astype(jnp.int32)
        bits_ref[...] = lax.bitcast_convert_type(x, jnp.int32)
        back_ref[...] = lax.bitcast_convert_type(n, jnp.float32)

    outs = [jax.ShapeDtypeStruct(SHAPE, d) for d in (jnp.int32, jnp.float32, jnp.float32, jnp.int32, jnp.int32,
                                                    jnp.int32, jnp.float32)]
    return _call(kernel, outs, x, n)


def cast_inputs():
    x, _ = float_inputs()
    n = np.random.default_rng(4).integers(-5000, 5000, SHAPE).astype(np.int32)
    return x, n


def cast_reference(x, n):
    return ((x * 1000).astype(jnp.int32), n.astype(jnp.float32) * 0.5, x.astype(jnp.bfloat16).astype(jnp.float32),
            (n * 1000).astype(jnp.int8).astype(jnp.int32), (x > 0).astype(jnp.int32) + (n > 0).astype(jnp.int32),
            lax.bitcast_convert_type(x, jnp.int32), lax.bitcast_convert_type(n, jnp.float32))


def packed_bitcast(x):
    """pltpu.bitcast bf16 (16, 128) -> int32 (8, 128): two rows per word, the first in the low half."""

    def kernel(x_ref, o_ref, back_ref):
        words = pltpu.bitcast(x_ref[...], jnp.int32)
        o_ref[...] = words
        back_ref[...] = pltpu.bitcast(words, jnp.bfloat16)

    outs = [jax.ShapeDtypeStruct((8, 128), jnp.int32), jax.ShapeDtypeStruct((16, 128), jnp.bfloat16)]
    return _call(kernel, outs, x)


def packed_inputs():
    return (np.random.default_rng(5).standard_normal((16, 128), np.float32).astype(jnp.bfloat16),)


def packed_reference_numpy(x):
    bits = np.asarray(x).view(np.uint16).astype(np.uint32)
    words = (bits[0::2] | (bits[1::2] << 16)).view(np.int32)
    return words, np.asarray(x)


CASES = {
    "float math": ("float_math", "float_inputs", lambda x, y: _float_math_body(x, y)),
    "bf16 math": ("bf16_math", "bf16_inputs", bf16_reference),
    "int math": ("int_math", "int_inputs", lambda a, b: _int_math_body(a, b)),
    "unsigned math": ("unsigned_math", "unsigned_inputs", unsigned_reference),
    "casts and bitcasts": ("casts", "cast_inputs", cast_reference),
    "packed bitcast": ("packed_bitcast", "packed_inputs", packed_reference_numpy),
}
