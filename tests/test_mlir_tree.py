"""runner/program/mlir_tree.py's reading of MLIR types."""

from pallasite.runner.program.mlir_tree import parse_type


def test_shaped_types():
    t = parse_type("tensor<?x128xbf16>")
    assert (t.kind, t.shape, t.dtype) == ("tensor", (None, 128), "bfloat16")
    t = parse_type("memref<2xi32, #tpu.memory_space<smem>>")
    assert (t.kind, t.shape, t.dtype, t.space) == ("memref", (2,), "int32", "smem")


def test_complex_element_types_keep_their_shape():
    """"complex" holds an "x": it was split as a dimension (shape (16, 128, None), no dtype)."""
    t = parse_type("tensor<16x128xcomplex<f32>>")
    assert (t.shape, t.dtype) == ((16, 128), "complex64")
    assert parse_type("tensor<complex<f64>>").shape == ()
    assert parse_type("tensor<complex<f64>>").dtype == "complex128"
