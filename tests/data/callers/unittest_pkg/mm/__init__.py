"""The package re-exports its op; the kernel module is imported only by ops.py."""

from mm.ops import matmul  # noqa: F401
