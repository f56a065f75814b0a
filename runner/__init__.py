"""The worker side: everything that runs inside ``pallasite worker`` and may import JAX (check
tiers 1-3, interpret runs, script mode, the chip probe) and the protocol the client shares.

What a TPU host runs. It imports only the standard library, numpy, jax, the user's kernel and
``analysis/types.py`` (tests/test_layers.py); the client side lives in ``engine/``.
"""
