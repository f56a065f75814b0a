# A hostile model's module-level code (tests/test_untrusted_code.py puts it at the top of a wrong
# candidate): it patches, in its own process, every comparison pallasite's guarded test uses, so that
# a wrong kernel compares equal to the reference, and the cost model, so that it looks 8x faster.
# Before the judge moved out of the candidate's process this made "correct, 8.00x" of a wrong kernel,
# and the patch stayed in the warm worker for the next candidate.
import numpy as _np

_np.allclose = lambda *a, **k: True
_np.array_equal = lambda *a, **k: True
try:
    from pallasite.runner.tier3 import interpret_compare as _ic
    from pallasite.runner.measure import timing_guards as _tg

    _ic.compare = lambda *a, **k: []
    _tg.compare = lambda *a, **k: []
    _tg.compare_outputs = lambda *a, **k: None
    _tg.matches = lambda *a, **k: True
    _tg.degenerate = lambda *a, **k: None
except ImportError:
    pass
try:  # and the cost model: every estimate a millionth of itself (the speedup over the original: huge)
    import dataclasses as _dc

    from pallasite.runner.program import module_cost as _mc
    from pallasite.runner.program import program_price as _pp
    from pallasite.runner import tune_ops as _to

    def _fast(real):
        def fast(*a, **k):
            e = real(*a, **k)
            return _dc.replace(e, seconds=e.seconds * 1e-6) if e.seconds else e
        return fast

    _pp.price_program = _to.price_program = _fast(_pp.price_program)
    _mc.price_exported = _fast(_mc.price_exported)
except ImportError:
    pass
