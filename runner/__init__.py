"""Everything that imports JAX: check tiers 1-3, the worker process and its protocol, backends.

Client-side modules (imported by the server and agents) never import JAX themselves; they talk to
a ``pallasite worker`` process. Worker-side modules import only the standard library, numpy, jax
and the user's kernel.
"""
