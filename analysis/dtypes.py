"""Element types as kernel source names them (``jnp.bfloat16``, ``np.int8``): bits per element and
the TPU row tiling each needs. One table for the tier-0 rules and the server's hovers.

Sub-byte types are packed (two int4 per byte), so a block's bytes are ``elements * bits / 8``.
Rows: the Pallas lowering checks (8, 128) for every type; the TPU compiler also needs the
second-to-last block dim to be a multiple of ``8 * 32 // bits`` for types under 16 bits (32 rows
for 8-bit, 64 for 4-bit, 128 for 2-bit), while 16- and 32-bit blocks of 8 rows compile. Seen with
jax 0.10.2 + libtpu 0.0.42.1 (8-bit on v4, v5e, v5p, v6e: tests/test_tier0_compiler.py; int4,
float4_e2m1fn and int2 on v5e by a deviceless compile of a copy kernel at 8-128 rows).
"""

from __future__ import annotations

LANES = 128  # the last block dim is a multiple of this (or the whole array dim)
SUBLANES = 8  # the second-to-last, for 16- to 64-bit types

# bits per element, by the names jnp / np use (every float8 variant jax 0.10.2 has, and the
# sub-byte integer and float types)
DTYPE_BITS: dict[str, int] = {
    "float64": 64, "int64": 64, "uint64": 64, "complex64": 64, "complex128": 128,
    "float32": 32, "int32": 32, "uint32": 32,
    "bfloat16": 16, "float16": 16, "int16": 16, "uint16": 16,
    "int8": 8, "uint8": 8, "bool_": 8,
    "float8_e4m3fn": 8, "float8_e5m2": 8, "float8_e4m3b11fnuz": 8, "float8_e4m3fnuz": 8,
    "float8_e5m2fnuz": 8, "float8_e4m3": 8, "float8_e8m0fnu": 8, "float8_e3m4": 8,
    "int4": 4, "uint4": 4, "float4_e2m1fn": 4,
    "int2": 2, "uint2": 2,
}

# the 8-bit number types (PLS010's subject; bool is left to the compiler)
EIGHT_BIT: tuple[str, ...] = tuple(name for name, bits in DTYPE_BITS.items() if bits == 8 and name != "bool_")


def sublane_rows(bits: int) -> int:
    """Rows a block's second-to-last dim must be a multiple of on TPU (unless it is the whole dim)."""
    return SUBLANES if bits >= 16 else SUBLANES * 32 // bits


def block_bytes(elements: int, bits: int) -> int:
    """Bytes of ``elements`` values of ``bits`` each (sub-byte types packed, rounded up)."""
    return (elements * bits + 7) // 8
