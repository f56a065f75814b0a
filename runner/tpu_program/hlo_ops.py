"""The op table of the TPU program's executor, for ops without regions: each StableHLO (and chlo) op as
the ``jax.lax`` primitive that lowers to the same op with the same attributes (worker side, imports jax).

A translation keeps XLA's semantics where a ``jax.lax`` wrapper would change them: ``dynamic_slice`` and
``dynamic_update_slice`` bind their primitives directly (the wrappers wrap negative start indices, XLA
clamps them); ``gather`` runs in jax's CLIP mode (a plain ``stablehlo.gather``: XLA clamps the
start indices) and ``compare`` honours its comparison type (TOTALORDER by the sign-flipped integer key
XLA orders floats by; a SIGNED or UNSIGNED comparison of the other kind of integer through a bitcast).
Every table row lists the attributes it reads; an op carrying any other is refused (hlo_plan.py).
Regions (reduce, while, case, sort, scatter, ...) are in runner/tpu_program/hlo_regions.py.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from ..program.mlir_tree import Op
from . import hlo_attrs as attrs
from .hlo_plan import Entry, Planner, Refuse


def _entry(build: Callable[[Op, Planner], Callable[..., Any]], *names: str) -> Entry:
    return Entry(frozenset(names), build)


def _unary(fn_name: str, accuracy: bool = False) -> Entry:
    """An element-wise op that is one ``jax.lax`` function of its operands."""

    def build(op: Op, plan: Planner) -> Callable[..., Any]:
        from jax import lax

        if "result_accuracy" in op.attrs and not attrs.default_accuracy(op.attrs["result_accuracy"]):
            raise Refuse(f"result_accuracy {str(op.attrs['result_accuracy'])[:80]}")
        fn = _resolve(lax, fn_name)
        return lambda env, *a: (fn(*a),)

    return Entry(frozenset({"result_accuracy"} if accuracy else ()), build)


def _resolve(lax: Any, name: str) -> Callable[..., Any]:
    if name.startswith("round:"):
        method = getattr(lax.RoundingMethod, name.split(":")[1])
        return lambda x: lax.round(x, method)
    if name == "is_inf":
        return lambda x: lax.eq(lax.abs(x), np.asarray(np.inf, x.dtype))
    if name == "is_pos_inf":
        return lambda x: lax.eq(x, np.asarray(np.inf, x.dtype))
    if name == "is_neg_inf":
        return lambda x: lax.eq(x, np.asarray(-np.inf, x.dtype))
    if name == "select":
        return lambda p, t, f: lax.select_n(p, f, t)
    return getattr(lax, name)


_UNARY = {"abs": "abs", "cbrt": "cbrt", "ceil": "ceil", "count_leading_zeros": "clz", "cosine": "cos",
          "exponential": "exp", "exponential_minus_one": "expm1", "floor": "floor", "imag": "imag", "real": "real",
          "is_finite": "is_finite", "log": "log", "log_plus_one": "log1p", "logistic": "logistic", "negate": "neg",
          "not": "bitwise_not", "popcnt": "population_count", "round_nearest_afz": "round:AWAY_FROM_ZERO",
          "round_nearest_even": "round:TO_NEAREST_EVEN", "rsqrt": "rsqrt", "sign": "sign", "sine": "sin",
          "sqrt": "sqrt", "tan": "tan", "tanh": "tanh"}
_ACCURACY = frozenset({"cbrt", "cosine", "exponential", "exponential_minus_one", "log", "log_plus_one", "logistic",
                       "rsqrt", "sine", "sqrt", "tan", "tanh"})
_NARY = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "remainder": "rem", "maximum": "max",
         "minimum": "min", "power": "pow", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
         "shift_left": "shift_left", "shift_right_arithmetic": "shift_right_arithmetic",
         "shift_right_logical": "shift_right_logical", "atan2": "atan2", "complex": "complex", "clamp": "clamp",
         "select": "select"}
_CHLO = {"erf": "erf", "erfc": "erfc", "erf_inv": "erf_inv", "lgamma": "lgamma", "digamma": "digamma", "sinh": "sinh",
         "cosh": "cosh", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "asinh": "asinh",
         "acosh": "acosh", "atanh": "atanh", "square": "square", "is_inf": "is_inf", "is_pos_inf": "is_pos_inf",
         "is_neg_inf": "is_neg_inf", "next_after": "nextafter", "conj": "conj", "polygamma": "polygamma",
         "zeta": "zeta"}


# --------------------------------------------------------------------------- compare


def _compare(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    direction = attrs.enum(op.attrs["comparison_direction"], "comparison_direction")
    dtype = plan.dtype(op.operands[0])
    kind = attrs.enum(op.attrs["compare_type"], "comparison_type") if "compare_type" in op.attrs else "NOTYPE"
    fn = {"EQ": lax.eq, "NE": lax.ne, "LT": lax.lt, "LE": lax.le, "GT": lax.gt, "GE": lax.ge}[direction]
    natural = "FLOAT" if dtype.kind in "fcV" and dtype != np.bool_ else "SIGNED" if dtype.kind == "i" else "UNSIGNED"
    if kind in ("NOTYPE", natural) or (kind == "UNSIGNED" and dtype == np.bool_):
        return lambda env, a, b: (fn(a, b),)
    if kind == "TOTALORDER" and natural == "FLOAT" and dtype.kind != "c":
        return lambda env, a, b: (fn(_total_key(a), _total_key(b)),)
    if kind in ("SIGNED", "UNSIGNED") and dtype.kind in "iu":
        other = np.dtype(f"{'i' if kind == 'SIGNED' else 'u'}{dtype.itemsize}")
        return lambda env, a, b: (fn(lax.bitcast_convert_type(a, other), lax.bitcast_convert_type(b, other)),)
    raise Refuse(f"a {kind} comparison of {dtype.name} values")


def _total_key(x: Any) -> Any:
    """XLA's total order of floats as signed integers: -NaN < -inf < ... < -0 < +0 < ... < inf < NaN."""
    from jax import lax

    bits = np.dtype(x.dtype).itemsize * 8
    signed = np.dtype(f"i{bits // 8}")
    i = lax.bitcast_convert_type(x, signed)
    flipped = lax.bitwise_xor(i, np.asarray(np.iinfo(signed).max, signed))
    return lax.select_n(lax.lt(i, np.asarray(0, signed)), i, flipped)


# --------------------------------------------------------------------------- shapes and data movement


def _constant(op: Op, plan: Planner) -> Callable[..., Any]:
    value = attrs.constant(op.attrs["value"], plan.shape(op.results[0]), plan.dtype(op.results[0]))
    return lambda env: (value,)


def _iota(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    dim, shape, dtype = attrs.integer(op.attrs["iota_dimension"]), plan.shape(op.results[0]), plan.dtype(op.results[0])
    return lambda env: (lax.broadcasted_iota(dtype, shape, dim),)


def _broadcast_in_dim(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    dims, shape = tuple(attrs.ints(op.attrs["broadcast_dimensions"])), plan.shape(op.results[0])
    return lambda env, x: (lax.broadcast_in_dim(x, shape, dims),)


def _broadcast(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    sizes = tuple(attrs.ints(op.attrs["broadcast_sizes"]))
    return lambda env, x: (lax.broadcast(x, sizes),)


def _reshape(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    shape = plan.shape(op.results[0])
    return lambda env, x: (lax.reshape(x, shape),)


def _transpose(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    perm = tuple(attrs.ints(op.attrs["permutation"]))
    return lambda env, x: (lax.transpose(x, perm),)


def _reverse(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    dims = tuple(attrs.ints(op.attrs["dimensions"]))
    return lambda env, x: (lax.rev(x, dims),)


def _slice(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    start, limit = attrs.ints(op.attrs["start_indices"]), attrs.ints(op.attrs["limit_indices"])
    strides = attrs.ints(op.attrs["strides"]) if "strides" in op.attrs else None
    return lambda env, x: (lax.slice(x, start, limit, strides),)


def _dynamic_slice(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax._src.lax import slicing

    sizes = tuple(attrs.ints(op.attrs["slice_sizes"]))
    return lambda env, x, *idx: (slicing.dynamic_slice_p.bind(x, *idx, slice_sizes=sizes),)


def _dynamic_update_slice(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax._src.lax import slicing

    return lambda env, x, update, *idx: (slicing.dynamic_update_slice_p.bind(x, update, *idx),)


def _concatenate(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    dim = attrs.integer(op.attrs["dimension"])
    return lambda env, *xs: (lax.concatenate(xs, dim),)


def _pad(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    lo, hi = attrs.ints(op.attrs["edge_padding_low"]), attrs.ints(op.attrs["edge_padding_high"])
    interior = attrs.ints(op.attrs["interior_padding"])
    config = list(zip(lo, hi, interior))
    return lambda env, x, value: (lax.pad(x, value, config),)


def _convert(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    dtype = plan.dtype(op.results[0])
    return lambda env, x: (lax.convert_element_type(x, dtype),)


def _bitcast_convert(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    dtype = plan.dtype(op.results[0])
    return lambda env, x: (lax.bitcast_convert_type(x, dtype),)


def _reduce_precision(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    e, m = attrs.integer(op.attrs["exponent_bits"]), attrs.integer(op.attrs["mantissa_bits"])
    return lambda env, x: (lax.reduce_precision(x, e, m),)


def _get_dimension_size(op: Op, plan: Planner) -> Callable[..., Any]:
    size = plan.shape(op.operands[0])[attrs.integer(op.attrs["dimension"])]
    value = np.asarray(size, plan.dtype(op.results[0]))
    return lambda env, x: (value,)


def _device_id(op: Op, plan: Planner) -> Callable[..., Any]:
    value = np.zeros(plan.shape(op.results[0]), plan.dtype(op.results[0]))  # one device: id 0
    return lambda env: (value,)


def _tuple(op: Op, plan: Planner) -> Callable[..., Any]:
    return lambda env, *xs: (tuple(xs),)


def _get_tuple_element(op: Op, plan: Planner) -> Callable[..., Any]:
    index = attrs.integer(op.attrs["index"])
    return lambda env, t: (t[index],)


def _optimization_barrier(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    return lambda env, *xs: tuple(lax.optimization_barrier(tuple(xs)))


def _top_k(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    k = attrs.integer(op.attrs["k"])
    if plan.dtype(op.results[1]) != np.int32:
        raise Refuse(f"top_k indices of type {plan.dtype(op.results[1]).name}")
    return lambda env, x: tuple(lax.top_k(x, k))


# --------------------------------------------------------------------------- contractions, gathers


def _precision(op: Op) -> Any:
    from jax import lax

    if "precision_config" not in op.attrs:
        return None
    names = attrs.precisions(op.attrs["precision_config"])
    return tuple(lax.Precision[n] for n in names) if names else None


def _dot_general(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax
    from jaxlib.mlir.dialects import stablehlo

    if "algorithm" in op.attrs:
        raise Refuse(f"dot algorithm {str(op.attrs['algorithm'])[:80]}")
    d = stablehlo.DotDimensionNumbers(op.attrs["dot_dimension_numbers"])
    dims = ((tuple(d.lhs_contracting_dimensions), tuple(d.rhs_contracting_dimensions)),
            (tuple(d.lhs_batching_dimensions), tuple(d.rhs_batching_dimensions)))
    precision, dtype = _precision(op), plan.dtype(op.results[0])
    return lambda env, a, b: (lax.dot_general(a, b, dims, precision=precision, preferred_element_type=dtype),)


def _dot(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax

    rank = len(plan.shape(op.operands[0]))
    dims = (((rank - 1,), (0,)), ((), ()))
    precision, dtype = _precision(op), plan.dtype(op.results[0])
    return lambda env, a, b: (lax.dot_general(a, b, dims, precision=precision, preferred_element_type=dtype),)


def _convolution(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax
    from jaxlib.mlir.dialects import stablehlo

    if "window_reversal" in op.attrs and any(attrs.bools(op.attrs["window_reversal"])):
        raise Refuse("window_reversal")
    c = stablehlo.ConvDimensionNumbers(op.attrs["dimension_numbers"])
    spatial = len(c.input_spatial_dimensions)
    numbers = lax.ConvDimensionNumbers(
        (c.input_batch_dimension, c.input_feature_dimension, *c.input_spatial_dimensions),
        (c.kernel_output_feature_dimension, c.kernel_input_feature_dimension, *c.kernel_spatial_dimensions),
        (c.output_batch_dimension, c.output_feature_dimension, *c.output_spatial_dimensions))
    get = op.attrs.get
    strides = attrs.ints(get("window_strides")) if get("window_strides") is not None else [1] * spatial
    padding = attrs.pairs(get("padding")) if get("padding") is not None else [(0, 0)] * spatial
    lhs_dil = attrs.ints(get("lhs_dilation")) if get("lhs_dilation") is not None else [1] * spatial
    rhs_dil = attrs.ints(get("rhs_dilation")) if get("rhs_dilation") is not None else [1] * spatial
    groups = attrs.integer(op.attrs["feature_group_count"]) if "feature_group_count" in op.attrs else 1
    batch_groups = attrs.integer(op.attrs["batch_group_count"]) if "batch_group_count" in op.attrs else 1
    precision, dtype = _precision(op), plan.dtype(op.results[0])

    def fn(env: Any, lhs: Any, rhs: Any) -> tuple[Any]:
        return (lax.conv_general_dilated(lhs, rhs, strides, padding, lhs_dil, rhs_dil, numbers, groups, batch_groups,
                                         precision=precision, preferred_element_type=dtype),)

    return fn


_RAGGED = re.compile(r"(\w+_dimensions) = \[([^\]]*)\]")


def _ragged_dot(op: Op, plan: Planner) -> Callable[..., Any]:
    """``chlo.ragged_dot`` (``lax.ragged_dot``: a matmul per group of rows) as ``lax.ragged_dot_general``."""
    from jax import lax

    text = str(op.attrs["ragged_dot_dimension_numbers"])
    dims = {k: tuple(int(x) for x in v.split(",") if x.strip()) for k, v in _RAGGED.findall(text)}
    known = {f"{s}_{k}_dimensions" for s in ("lhs", "rhs") for k in ("batching", "contracting")} | \
        {"lhs_ragged_dimensions", "rhs_group_dimensions"}
    if not text.startswith("#chlo.ragged_dot<") or set(dims) - known:
        raise Refuse(f"ragged_dot_dimension_numbers {text[:120]}")
    get = lambda k: dims.get(k, ())  # noqa: E731
    numbers = lax.RaggedDotDimensionNumbers(
        ((get("lhs_contracting_dimensions"), get("rhs_contracting_dimensions")),
         (get("lhs_batching_dimensions"), get("rhs_batching_dimensions"))),
        get("lhs_ragged_dimensions"), get("rhs_group_dimensions"))
    precision = None
    if "precision_config" in op.attrs:
        names = re.findall(r"precision (\w+)>", str(op.attrs["precision_config"]))
        precision = tuple(lax.Precision[n] for n in names) if names else None
    dtype = plan.dtype(op.results[0])
    return lambda env, a, b, groups: (lax.ragged_dot_general(a, b, groups, numbers, precision=precision,
                                                             preferred_element_type=dtype),)


def index_vector_last(indices: Any, ivd: int, batching: tuple[int, ...]) -> tuple[Any, tuple[int, ...]]:
    """Indices with their index vector as the last dimension (jax's convention), and the batching
    dimensions of the indices renumbered to match."""
    from jax import lax

    rank = len(indices.shape)
    if ivd == rank:
        return lax.expand_dims(indices, (rank,)), batching
    if ivd == rank - 1:
        return indices, batching
    perm = tuple(d for d in range(rank) if d != ivd) + (ivd,)
    return lax.transpose(indices, perm), tuple(d - 1 if d > ivd else d for d in batching)


def _gather(op: Op, plan: Planner) -> Callable[..., Any]:
    from jax import lax
    from jaxlib.mlir.dialects import stablehlo

    d = stablehlo.GatherDimensionNumbers(op.attrs["dimension_numbers"])
    sizes = tuple(attrs.ints(op.attrs["slice_sizes"]))
    is_sorted = attrs.boolean(op.attrs["indices_are_sorted"]) if "indices_are_sorted" in op.attrs else False
    ivd = int(d.index_vector_dim)

    def fn(env: Any, operand: Any, indices: Any) -> tuple[Any]:
        indices, batching = index_vector_last(indices, ivd, tuple(d.start_indices_batching_dims))
        numbers = lax.GatherDimensionNumbers(tuple(d.offset_dims), tuple(d.collapsed_slice_dims),
                                             tuple(d.start_index_map), tuple(d.operand_batching_dims), batching)
        return (lax.gather(operand, indices, numbers, sizes, indices_are_sorted=is_sorted, unique_indices=False,
                           mode=lax.GatherScatterMode.CLIP),)

    return fn


def table() -> dict[str, Entry]:
    """The region-free rows of the op table."""
    out: dict[str, Entry] = {}
    for name, fn in _UNARY.items():
        out[f"stablehlo.{name}"] = _unary(fn, accuracy=name in _ACCURACY)
    for name, fn in _NARY.items():
        out[f"stablehlo.{name}"] = _unary(fn)
    for name, fn in _CHLO.items():
        out[f"chlo.{name}"] = _unary(fn)
    out["stablehlo.compare"] = _entry(_compare, "comparison_direction", "compare_type")
    out["stablehlo.constant"] = _entry(_constant, "value")
    out["stablehlo.iota"] = _entry(_iota, "iota_dimension")
    out["stablehlo.broadcast_in_dim"] = _entry(_broadcast_in_dim, "broadcast_dimensions")
    out["stablehlo.broadcast"] = _entry(_broadcast, "broadcast_sizes")
    out["stablehlo.reshape"] = _entry(_reshape)
    out["stablehlo.transpose"] = _entry(_transpose, "permutation")
    out["stablehlo.reverse"] = _entry(_reverse, "dimensions")
    out["stablehlo.slice"] = _entry(_slice, "start_indices", "limit_indices", "strides")
    out["stablehlo.dynamic_slice"] = _entry(_dynamic_slice, "slice_sizes")
    out["stablehlo.dynamic_update_slice"] = _entry(_dynamic_update_slice)
    out["stablehlo.concatenate"] = _entry(_concatenate, "dimension")
    out["stablehlo.pad"] = _entry(_pad, "edge_padding_low", "edge_padding_high", "interior_padding")
    out["stablehlo.convert"] = _entry(_convert)
    out["stablehlo.bitcast_convert"] = _entry(_bitcast_convert)
    out["stablehlo.reduce_precision"] = _entry(_reduce_precision, "exponent_bits", "mantissa_bits")
    out["stablehlo.get_dimension_size"] = _entry(_get_dimension_size, "dimension")
    out["stablehlo.partition_id"] = _entry(_device_id)
    out["stablehlo.replica_id"] = _entry(_device_id)
    out["stablehlo.tuple"] = _entry(_tuple)
    out["stablehlo.get_tuple_element"] = _entry(_get_tuple_element, "index")
    out["stablehlo.optimization_barrier"] = _entry(_optimization_barrier)
    out["chlo.top_k"] = _entry(_top_k, "k")
    out["stablehlo.dot_general"] = _entry(_dot_general, "dot_dimension_numbers", "precision_config", "algorithm")
    out["stablehlo.dot"] = _entry(_dot, "precision_config")
    out["stablehlo.convolution"] = _entry(_convolution, "window_strides", "padding", "lhs_dilation", "rhs_dilation",
                                          "window_reversal", "dimension_numbers", "feature_group_count",
                                          "batch_group_count", "precision_config")
    out["stablehlo.gather"] = _entry(_gather, "dimension_numbers", "slice_sizes", "indices_are_sorted")
    out["chlo.ragged_dot"] = _entry(_ragged_dot, "ragged_dot_dimension_numbers", "precision_config")
    return out
