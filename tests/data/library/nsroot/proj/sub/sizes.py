"""Block sizes, imported by the kernel by the project's absolute name."""

BLOCK_ROWS = 8
