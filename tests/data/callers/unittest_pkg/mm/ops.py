"""The public op: picks the block sizes and calls the kernel module."""

from mm import kernel as backend


def matmul(x, y):
    return backend.matmul(x, y, bm=min(128, x.shape[0]), bn=min(128, y.shape[1]))
