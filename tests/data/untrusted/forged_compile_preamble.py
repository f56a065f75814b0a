# A hostile model's module-level code (tests/test_untrusted_code.py puts it at the top of a kernel that
# the TPU compiler rejects): it patches pallasite's tier-2 compile, in its own process, into a no-op,
# so that a block the compiler rejects "compiles for v6e (tiers 0, 1, 2)". Before tier 2 moved out of
# the candidate's process, it did.
try:
    from pallasite.runner import tiers as _tiers

    _tiers.compile_for_tpu = lambda *a, **k: {}
    _tiers.compile_exported = lambda *a, **k: {}
    _tiers.compile_lowered = lambda *a, **k: {}
    _tiers.tier2_unavailable = lambda *a, **k: None
except ImportError:
    pass
