"""Allocates memory in 64 MiB steps (touching every page) up to 16 GiB."""

import time

import numpy as np

chunks = []
for _ in range(256):
    chunks.append(np.ones(64 * 2**20, dtype=np.uint8))
    time.sleep(0.02)
