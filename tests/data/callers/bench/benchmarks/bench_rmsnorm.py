"""Times the kernel at the model's size (run as a script: `python benchmarks/bench_rmsnorm.py`)."""

import time

import jax.numpy as jnp

from kernels.rmsnorm import rmsnorm


def main():
    x = jnp.ones((512, 1024), jnp.bfloat16)
    started = time.perf_counter()
    rmsnorm(x, block_rows=32).block_until_ready()
    print(f"{time.perf_counter() - started:.4f} s")


if __name__ == "__main__":
    main()
