"""Kernels with planted bugs for the judge's interpreter of the TPU program: each must give a KernelFault
(or NaN where the output was never written), and a kernel using an op the interpreter does not cover
must be Unsupported naming it. ``CASES`` name -> (entry, inputs, None); each entry's pallas_call takes
its inputs straight. The comment on each entry's bug line says what the interpreter must report.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ANY = pl.BlockSpec(memory_space=pl.ANY)
OUT = jax.ShapeDtypeStruct((8, 128), jnp.float32)


def _f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape, np.float32)


def _inputs():
    return (_f32((16, 128), 60),)


def read_before_wait(x):
    def kernel(x_hbm, o_ref, buf, sem):
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf, sem.at[0])
        copy.start()
        o_ref[...] = buf[...] * 2  # BUG: reads the DMA's target before its wait
        copy.wait()

    return pl.pallas_call(kernel, in_specs=[ANY], out_shape=OUT,
                          scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))])(x)


def wrong_semaphore(x):
    def kernel(x_hbm, o_ref, buf, sem):
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf, sem.at[0]).start()
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf, sem.at[1]).wait()  # BUG: the copy signals sem 0
        o_ref[...] = buf[...]

    return pl.pallas_call(kernel, in_specs=[ANY], out_shape=OUT,
                          scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))])(x)


def dma_out_of_bounds(start, x):
    def kernel(s_ref, x_hbm, o_ref, buf, sem):
        pltpu.make_async_copy(x_hbm.at[pl.ds(s_ref[0], 8)], buf, sem).start()  # BUG: rows 12..19 of 16
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf, sem).wait()
        o_ref[...] = buf[...]

    spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(1,), in_specs=[ANY],
                                        out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0)),
                                        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA(())])
    return pl.pallas_call(kernel, grid_spec=spec, out_shape=OUT)(start, x)


def oob_inputs():
    return np.array([12], np.int32), _f32((16, 128), 61)


def unwritten_output(x):
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)  # BUG: only the first block of the output is written
        def _():
            o_ref[...] = x_ref[...]

    return pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)


def runaway_loop(x):
    def kernel(x_ref, o_ref):
        def body(i, acc):
            return acc + 1.0

        o_ref[...] = x_ref[0:8] + jax.lax.fori_loop(0, 1 << 30, body, 0.0)  # BUG: 10^9 trips

    return pl.pallas_call(kernel, out_shape=OUT)(x)


def endless_while(x):
    def kernel(x_ref, o_ref):
        _, acc = jax.lax.while_loop(lambda s: s[0] >= 0, lambda s: (s[0] + 1, s[1] + 1.0),  # BUG: never ends
                                    (jnp.int32(0), jnp.float32(0)))
        o_ref[...] = x_ref[0:8] + acc

    return pl.pallas_call(kernel, out_shape=OUT)(x)


def index_out_of_bounds(start, x):
    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(s_ref[0], 8), :]  # BUG: rows 12..19 of a 16-row block

    spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(1,),
                                        in_specs=[pl.BlockSpec((16, 128), lambda i, s: (0, 0))],
                                        out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0)))
    return pl.pallas_call(kernel, grid_spec=spec, out_shape=OUT)(start, x)


def write_source_in_flight(x):
    def kernel(x_ref, o_hbm, buf, sem):
        buf[...] = x_ref[0:8]
        copy = pltpu.make_async_copy(buf, o_hbm, sem)
        copy.start()
        buf[...] = x_ref[8:16]  # BUG: overwrites the DMA's source before its wait
        copy.wait()

    return pl.pallas_call(kernel, out_specs=ANY, out_shape=OUT,
                          scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA(())])(x)


def never_waited(x):
    def kernel(x_ref, o_hbm, sem):
        pltpu.make_async_copy(x_ref.at[pl.ds(0, 8)], o_hbm, sem).start()  # BUG: the output's DMA is not waited

    return pl.pallas_call(kernel, out_specs=ANY, out_shape=OUT, scratch_shapes=[pltpu.SemaphoreType.DMA(())])(x)


def semaphore_hang(x):
    def kernel(x_ref, o_ref, sem):
        pl.semaphore_signal(sem, 1)
        pl.semaphore_wait(sem, 2)  # BUG: only 1 was signalled, one core runs: a hang
        o_ref[...] = x_ref[0:8]

    return pl.pallas_call(kernel, out_shape=OUT, scratch_shapes=[pltpu.SemaphoreType.REGULAR])(x)


def hardware_prng(x):
    def kernel(x_ref, o_ref):
        pltpu.prng_seed(7)  # the TPU's own random bits: not interpreted
        bits = pltpu.prng_random_bits((8, 128))
        o_ref[...] = x_ref[0:8] + (bits & 1).astype(jnp.float32)

    return pl.pallas_call(kernel, out_shape=OUT)(x)


def huge_scratch(x):
    def kernel(x_ref, o_ref, big_ref):  # BUG: a 4 GiB VMEM scratch (no TPU has it; the judge must not allocate it)
        big_ref[0:8, 0:128] = x_ref[0:8]
        o_ref[...] = big_ref[0:8, 0:128]

    return pl.pallas_call(kernel, out_shape=OUT, scratch_shapes=[pltpu.VMEM((32768, 32768), jnp.float32)])(x)


def core_parallel(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    return pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=(pltpu.CORE_PARALLEL,)))(x)


CASES = {
    "bad: read before wait": ("read_before_wait", "_inputs", None),
    "bad: wrong semaphore": ("wrong_semaphore", "_inputs", None),
    "bad: DMA out of bounds": ("dma_out_of_bounds", "oob_inputs", None),
    "bad: unwritten output": ("unwritten_output", "_inputs", None),
    "bad: runaway loop": ("runaway_loop", "_inputs", None),
    "bad: endless while": ("endless_while", "_inputs", None),
    "bad: index out of bounds": ("index_out_of_bounds", "oob_inputs", None),
    "bad: source written in flight": ("write_source_in_flight", "_inputs", None),
    "bad: DMA never waited": ("never_waited", "_inputs", None),
    "bad: semaphore hang": ("semaphore_hang", "_inputs", None),
    "bad: hardware PRNG": ("hardware_prng", "_inputs", None),
    "bad: huge scratch": ("huge_scratch", "_inputs", None),
    "bad: core_parallel": ("core_parallel", "_inputs", None),
}
