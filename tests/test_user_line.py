"""The user's line: errors raised while tracing a kernel land on the kernel-body line that causes
them, with the pallas_call as a related place. Each fixture in tests/data/user_line/ marks its
expected line with ``# EXPECTED LINE`` (written before the checker was run on it); several come
from error classes users reported in public issue threads (named in their docstrings)."""

from __future__ import annotations

import asyncio
import importlib.util
import os

import pytest

from pallasite.engine.checker import Checker, CheckOptions

DATA = os.path.join(os.path.dirname(__file__), "data", "user_line")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
TIERS = (0, 1, 2) if HAS_LIBTPU else (0, 1)


def _expected(name: str) -> int:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return next(i + 1 for i, line in enumerate(f) if "# EXPECTED LINE" in line)


def _pallas_call_line(name: str) -> int:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return next(i + 1 for i, line in enumerate(f) if "pl.pallas_call(" in line)


@pytest.fixture(scope="module")
def check():
    loop = asyncio.new_event_loop()
    plain = Checker(CheckOptions(target="v5e", tiers=TIERS, time_limit_s=120.0))
    script = Checker(CheckOptions(target="v5e", tiers=TIERS, time_limit_s=120.0, script=True))
    yield lambda name, as_script=False: loop.run_until_complete(
        (script if as_script else plain).check(os.path.join(DATA, name)))
    loop.run_until_complete(plain.close())
    loop.run_until_complete(script.close())
    loop.close()


@pytest.mark.parametrize("name", ["dot_contracting_broken.py", "broadcast_shapes_broken.py",
                                  "reshape_size_broken.py", "program_id_axis_broken.py",
                                  "slice_in_when_broken.py"])
def test_a_tracing_error_lands_on_the_kernel_body_line_with_the_pallas_call_related(check, name):
    report = check(name)
    errors = [f for f in report.findings if f.severity == "error"]
    assert [f.span.line + 1 for f in errors] == [_expected(name)], errors
    assert _pallas_call_line(name) in [r.span.line + 1 for r in errors[0].related]


def test_an_issue_that_jax_fixed_is_not_reported(check):
    report = check("bool_not_ok.py")
    assert [f for f in report.findings if f.severity in ("error", "warning")] == []


def test_a_kernel_on_sharded_operands_without_shard_map_is_an_error_at_the_pallas_call(check):
    """The call is recorded and not run (its TPU path): the sharding is read from the operands, and the
    TPU's refusal is said as PLS115 (was PLS901, from the script's interpret-mode run)."""
    name = "unpartitioned_mesh_script.py"
    report = check(name, as_script=True)
    errors = [f for f in report.findings if f.severity == "error"]
    assert [(f.code, f.span.line + 1) for f in errors] == [("PLS115", _expected(name))]
    assert "shard_map" in errors[0].message
