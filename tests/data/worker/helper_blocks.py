"""The user's sibling module: block sizes shared by their kernels."""

BLOCK_ROWS = 256
