# Module-level code that prices itself (tests/test_tune_judged.py puts it at the top of a kernel file with a
# keyword tunable `block_rows`): in whatever process imports the file, every cost-model estimate is divided by 3
# and the estimate of its default configuration (block_rows=8) by 30 (above the floor of writing its outputs
# once at the chip's HBM bandwidth), so that the default looks the fastest.
# Before tune's configurations were priced by the judge from their exported programs, the `estimate` op priced
# them in the process that imported the file, and this file's own figures ranked it.
import dataclasses as _dc

try:
    from pallasite.runner.program import module_cost as _mc
    from pallasite.runner.program import program_price as _pp
    from pallasite.runner import tune_ops as _to

    def _forged(real):
        def forged(*args, **kwargs):
            est = real(*args, **kwargs)
            if getattr(est, "status", None) != "ok" or not est.seconds:
                return est
            cut = 30.0 if dict(est.config).get("block_rows") == 8 else 3.0
            return _dc.replace(est, seconds=est.seconds / cut)
        return forged

    _pp.price_program = _to.price_program = _forged(_pp.price_program)
    _mc.price_exported = _forged(_mc.price_exported)
except ImportError:
    pass
