"""Script mode on the files kernel authors have: meshes over several devices, a file that sets its
own device count, code that asks for the chip, a script that never calls its kernel
(engine/workers/devices.py, runner/target_chip.py, runner/script_mode.py). Fixtures: tests/data/zero_config/.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os

import pytest

from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.workers.devices import file_device_count, xla_flags

DATA = os.path.join(os.path.dirname(__file__), "data", "zero_config")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
TIERS = (0, 1, 2) if HAS_LIBTPU else (0, 1)


def _line_of(name: str, needle: str) -> int:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return next(i + 1 for i, line in enumerate(f) if needle in line)


@pytest.fixture(scope="module")
def script_check():
    loop = asyncio.new_event_loop()
    checker = Checker(CheckOptions(target="v5e", tiers=TIERS, time_limit_s=120.0, script=True))
    yield lambda name: loop.run_until_complete(checker.check(os.path.join(DATA, name)))
    loop.run_until_complete(checker.close())
    loop.close()


def _serious(report):
    return [(f.code, f.span.line + 1) for f in report.findings if f.severity in ("error", "warning")]


def _compiler_tiers_ok(report):
    return all(dict(k.tiers)[t] == "ok" for k in report.kernels for t in TIERS if t) and report.kernels


@pytest.mark.pipeline
@pytest.mark.parametrize("name", ["mesh_shard_map.py", "xla_flags_main.py", "chip_info_script.py"])
def test_correct_scripts_check_clean(script_check, name):
    """A 4-device Mesh + shard_map, a file setting its own XLA_FLAGS device count, and a script
    that asks the chip for its VMEM size each ran in one CPU device's worker and failed before."""
    report = script_check(name)
    assert _serious(report) == [], report.findings
    assert _compiler_tiers_ok(report), report.kernels


def test_the_file_that_sets_its_device_count_gets_a_worker_with_it(script_check):
    report = script_check("xla_flags_main.py")
    assert any("started with 2 CPU device(s)" in n for n in report.notes), report.notes


def test_the_broken_mesh_twin_is_caught_once_at_the_kernel_body_line(script_check):
    report = script_check("mesh_shard_map_bad.py")
    line = _line_of("mesh_shard_map_bad.py", "o_ref[...] = jnp.sum(")
    assert _serious(report) == [("PLS104", line)]
    assert [dict(k.tiers)[1] for k in report.kernels] == ["error"]


def test_a_script_that_makes_no_pallas_call_is_a_warning_not_an_error(script_check):
    report = script_check("no_kernel_call_script.py")
    assert [(f.code, f.severity) for f in report.findings] == [("PLS907", "warning")]


def test_device_count_read_from_the_file():
    assert file_device_count('os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"\n') == 4
    assert file_device_count("import os\n# nothing about devices\n") is None
    assert xla_flags(8, "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=2").split() == [
        "--xla_dump_to=/tmp/x", "--xla_force_host_platform_device_count=8"]
