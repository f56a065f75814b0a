"""Kernel files read as source: pallas_call sites, BlockSpecs, tunables, tier-0 rules, edits.

Never imports JAX (it runs inside the language server, which must stay small and quick).
"""
