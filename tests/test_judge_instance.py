"""runner/judging/instance.py: a reduced size whose integers break a relation the full size holds is no instance
of the task (JAXBench 7p: module-constant lengths summing to 4096 tokens beside a 128-row query buffer)."""

import jax
import jax.numpy as jnp
import numpy as np

from pallasite.runner.judging.instance import broken_relation, integer_leaves, integers_of


def _shapes(*arrays):
    return tuple(jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in arrays)


def _ragged(tokens, lens):
    q = np.zeros((tokens, 4, 8), np.float32)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    return q, cu


def test_offsets_that_no_longer_fit_the_buffer_they_index_are_no_instance():
    full = _ragged(4096, [1] * 48 + [512] * 7 + [464])
    reduced = _ragged(128, [1] * 48 + [512] * 7 + [464])  # the constants did not follow the CONFIG
    why = broken_relation(_shapes(*full), _shapes(*reduced), integer_leaves(full), integer_leaves(reduced))
    assert why and "integer input 1 reaches 4096, past input 0's axis 0 (128 at this size" in why


def test_offsets_made_again_at_the_reduced_size_are_an_instance():
    full = _ragged(4096, [1] * 48 + [512] * 7 + [464])
    reduced = _ragged(128, [1] * 8 + [40] * 3)  # made by the task's rules at its reduced size: they fit
    assert broken_relation(_shapes(*full), _shapes(*reduced), integer_leaves(full), integer_leaves(reduced)) is None


def test_integers_bounded_by_an_extent_the_reduction_kept_are_an_instance():
    pages = np.zeros((64, 16, 8), np.float32)
    table = np.arange(64, dtype=np.int32).reshape(8, 8)  # page ids below the (unreduced) page count
    small = np.zeros((64, 4, 8), np.float32)
    assert broken_relation(_shapes(pages, table), _shapes(small, table), integer_leaves((pages, table)),
                           integer_leaves((small, table))) is None


def test_float_only_inputs_and_missing_integers_say_nothing():
    x = np.zeros((256, 128), np.float32)
    assert broken_relation(_shapes(x), _shapes(x[:8]), integer_leaves((x,)), integer_leaves((x[:8],))) is None
    assert broken_relation(_shapes(x), _shapes(x[:8]), None, [None]) is None


def test_the_full_size_integers_are_read_without_making_the_float_arrays():
    def inputs():  # 4 GiB of floats if they were made: jit drops them, only the lengths are computed
        big = jax.random.normal(jax.random.key(0), (1 << 30,), jnp.float32)
        return big, jnp.cumsum(jnp.arange(5, dtype=jnp.int32))

    got = integers_of(inputs)
    assert got[0] is None and got[1].tolist() == [0, 1, 3, 6, 10]
    assert integers_of(lambda: np.zeros(3)[None][0].item().__class__.__name__.nonexistent) is None
