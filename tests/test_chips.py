"""The chip table: jax's numbers carried faithfully (runner/chip_probe.py), names verified against
libtpu (analysis/types.py's CHIP_TARGETS), the scoped-VMEM probe checked against the compiler, and
the client side's cache (knowledge/chips.py, engine/chip_table.py) and command (server/commands/cmd_chips.py)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

for _name, _value in {"TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)  # before libtpu loads in this process

from pallasite.analysis.types import CHIP_TARGETS, chip_target, installed_versions  # noqa: E402
from pallasite.engine import chip_table  # noqa: E402
from pallasite.knowledge import chips  # noqa: E402
from pallasite.runner import chip_probe  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "worker")


def test_each_spec_carries_jaxs_own_numbers():
    from jax.experimental.pallas import tpu as pltpu

    specs = {s.name: s for s in (chip_probe.spec_from_jax(t) for t in CHIP_TARGETS) if s is not None}
    assert {"v4", "v5e", "v5p", "v6e"} <= set(specs)
    for spec in specs.values():
        info = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion(chip_target(spec.name).chip_version), 1)
        assert spec.bf16_flops == info.bf16_ops_per_second
        assert spec.hbm_bytes_per_s == info.mem_bw_bytes_per_second
        assert (spec.vmem_bytes, spec.smem_bytes, spec.mxu_size) == (
            info.vmem_capacity_bytes, info.smem_capacity_bytes, info.mxu_column_size)
        assert spec.chip_bf16_flops == spec.bf16_flops * spec.cores_per_chip
        assert spec.source.startswith("jax ")
    assert specs["v5p"].megacore and specs["v5p"].cores_per_chip == 2
    assert not specs["v5e"].megacore and specs["v5e"].cores_per_chip == 1


def test_tier1_device_kinds_are_the_ones_jax_maps_back_to_each_chip():
    from jax._src.pallas.mosaic.tpu_info import chip_version_from_device_kind

    for t in CHIP_TARGETS:
        version = chip_version_from_device_kind(t.device_kind)
        assert version is not None and version.value == t.chip_version, t


def test_target_lookup_by_name_kind_or_topology():
    assert chip_target("v5e") == chip_target("TPU v5 lite") == chip_target("v5e:2x2")
    with pytest.raises(ValueError, match="known: v4, v5e"):
        chip_target("v9z")


def test_limit_is_read_from_a_real_e1001_message():
    with open(os.path.join(DATA, "e1001_message.txt")) as f:
        assert chip_probe.limit_from_message(f.read()) == 16 * 2**20
    assert chip_probe.limit_from_message("RESOURCE_EXHAUSTED: something else") is None


def test_probe_bisects_when_the_message_names_no_limit():
    spec = chip_probe.spec_from_jax(chip_target("v5e"))
    limit = 24 * chips.MIB
    calls = []

    def fake_compiler(topology, window_bytes):  # a compiler whose messages carry no number
        calls.append(window_bytes)
        return "RESOURCE_EXHAUSTED: out of vmem" if 2 * window_bytes + 16 * 1024 > limit else None

    found, how = chip_probe.probe_scoped_vmem(spec, compile_block=fake_compiler)
    assert found == limit and "bisection" in how and len(calls) <= 10


def test_cache_round_trip_and_use(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    specs = [dataclasses.replace(s, scoped_vmem_limit_bytes=7 * chips.MIB, scoped_vmem_source="test probe")
             for s in (chip_probe.spec_from_jax(t) for t in CHIP_TARGETS) if s is not None]
    here = installed_versions()
    assert chip_table.remember(specs, here) is not None
    path = chips.cache_path(here)
    assert path.startswith(str(tmp_path / "pallasite")) and chips.read_cache(here) == specs
    assert chip_table.table_sync(probe=True) == (specs, None)  # served from the cache, no worker
    other = dict(here, libtpu="0.0.1")  # a table is valid for the versions it was measured under
    assert chips.read_cache(other) is None
    (tmp_path / "pallasite" / os.path.basename(path)).write_text("{broken")
    assert chips.read_cache(here) is None


def test_an_incomplete_table_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    specs = chip_probe.measure(probe=False)  # no scoped-VMEM limits
    assert specs and not chips.complete(specs)
    assert chip_table.remember(specs, installed_versions()) is None and chip_table.cached() is None


def test_a_worker_measures_the_table_and_says_which_versions_it_is_for(tmp_path, monkeypatch):
    import asyncio

    from pallasite.engine.workers.client import WorkerClient, WorkerConfig

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    async def ask():
        client = WorkerClient(WorkerConfig())
        try:
            return await chip_table.from_worker(client, probe=False, timeout_s=120)
        finally:
            await client.close()

    measured = asyncio.run(ask())
    assert measured.error is None and measured.versions["jax"] == installed_versions()["jax"]
    assert [s.name for s in measured.specs] == [s.name for s in chip_probe.measure(probe=False)]
    assert chip_table.remember(measured.specs, measured.versions) is None  # no limits measured: not cached


def test_the_engine_keeps_and_caches_what_its_worker_measured_and_says_why_not_once(tmp_path, monkeypatch):
    import asyncio

    from pallasite.engine.checker import CheckOptions
    from pallasite.engine.engine import Engine
    from fake_backend import FakeStep, fake_backend
    from pallasite.wire import messages

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    spec = dataclasses.replace(chip_probe.spec_from_jax(chip_target("v5e")), scoped_vmem_limit_bytes=16 * chips.MIB,
                               scoped_vmem_source="test probe")
    theirs = {"jax": "9.9.9", "libtpu": "1.2.3"}  # the worker's versions, not this process's
    answers = {"ok": FakeStep(result=messages.ChipsResult(chips=(spec,), versions=theirs)),
               "broken": FakeStep(error=messages.ErrorInfo("RuntimeError", "no jax here"))}

    async def fetch(answer):
        engine = Engine(backend_factory=lambda config, checks: fake_backend(lambda params, purpose: answers[answer]),
                        use_store=False)
        try:
            return await engine.fetch_chip_table(CheckOptions(target="v5e")), engine.chip_table
        finally:
            await engine.close()

    (specs, problem), kept = asyncio.run(fetch("ok"))
    assert specs == kept == [spec] and problem is None
    assert chips.read_cache(theirs) == [spec] and chip_table.cached() is None  # cached under the worker's versions
    (specs, problem), kept = asyncio.run(fetch("broken"))
    assert specs is None and kept is None
    assert problem == "the worker could not build the chip table: RuntimeError: no jax here"  # said once


def test_the_server_logs_why_the_worker_could_not_build_the_table_once():
    import asyncio

    from pallasite.engine.engine import Engine
    from fake_backend import FakeStep, fake_backend
    from pallasite.wire import messages
    from pallasite.server import checks
    from pallasite.server.session import Session

    class Client:
        def __init__(self):
            self.logged = []

        def window_log_message(self, params):
            self.logged.append(params.message)

    client = Client()
    session = Session(client)
    broken = FakeStep(error=messages.ErrorInfo("RuntimeError", "no jax here"))
    session.engine = Engine(backend_factory=lambda config, checks: fake_backend(lambda params, purpose: broken),
                            use_store=False)

    async def go():
        try:
            await checks.fetch_chip_table_now(session)
        finally:
            await session.engine.close()

    asyncio.run(go())
    [line] = client.logged
    assert line.count("could not build the chip table") == 1 and "RuntimeError: no jax here" in line, line
    assert "run `pallasite chips`" in line


def test_table_text_names_every_chip_and_its_sources():
    specs = chip_probe.measure(probe=False)
    text = chips.format_chip_table(specs)
    for spec in specs:
        assert spec.name in text and spec.topology in text
    assert "source: jax" in text and "scoped VMEM: not measured" in text
    assert "197 TFLOP/s" in text  # v5e's bf16 rate as jax states it, per core and per chip


@pytest.mark.tpu_compiler
def test_topologies_give_the_tier1_kind_and_core_count():
    pytest.importorskip("libtpu")
    from jax.experimental import topologies

    for t in CHIP_TARGETS:
        device = topologies.get_topology_desc(topology_name=t.topology, platform="tpu").devices[0]
        assert device.device_kind == t.device_kind and device.num_cores == t.device_cores, t


@pytest.mark.tpu_compiler
def test_probed_limit_is_where_the_compiler_starts_refusing():
    pytest.importorskip("libtpu")
    for name in ("v5e", "v4"):
        spec = chip_probe.spec_from_jax(chip_target(name))
        limit, how = chip_probe.probe_scoped_vmem(spec)
        assert limit is not None and "libtpu" in how
        assert chip_probe._compile_block(spec.topology, (limit - chips.MIB) // 2) is None
        refused = chip_probe._compile_block(spec.topology, (limit + chips.MIB) // 2)
        assert refused is not None and "RESOURCE_EXHAUSTED" in refused


def test_chips_command_prints_the_table_without_importing_jax_itself(tmp_path):
    import subprocess
    import sys

    code = (
        "import argparse, sys\n"
        "from pallasite.server.commands import cmd_chips\n"
        "parser = argparse.ArgumentParser(); cmd_chips.add_arguments(parser, 'chips')\n"
        "rc = cmd_chips.run(parser.parse_args(['--no-probe']))\n"
        "print('JAX IMPORTED' if 'jax' in sys.modules else 'JAX NOT IMPORTED', rc)\n"
    )
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "JAX NOT IMPORTED 0" in out.stdout, out.stderr
    assert "TPU v5 lite" in out.stdout and "v6e:2x2" in out.stdout


@pytest.mark.tpu_compiler
def test_7x_is_a_check_target_whose_tiers_1_and_2_run():
    pytest.importorskip("libtpu")
    from pallasite.engine.checker import TARGETS
    from pallasite.engine.sources import sources_for
    from pallasite.runner.checks import handle_check
    from pallasite.wire.messages import CheckParams

    assert "7x" in TARGETS
    corpus = os.path.join(os.path.dirname(__file__), "data", "compiler")
    states = {}
    for name in ("store_shape_fixed", "tiling_int8_rows_broken"):
        path = os.path.join(corpus, f"{name}.py")
        with open(path, encoding="utf-8") as f:
            params = CheckParams(source=sources_for(path, f.read()), chip="7x", tiers=(1, 2), time_limit_s=120)
        result = handle_check(params)
        assert result.unavailable == {}
        [entry] = result.entries
        states[name] = (entry.states(), [list(e.mosaic_codes) for e in entry.errors])
    assert states["store_shape_fixed"] == ({"1": "ok", "2": "ok"}, [])
    assert states["tiling_int8_rows_broken"] == ({"1": "ok", "2": "error"}, [["E2002"]])  # the compiler's tiling rule


def test_the_default_chip_is_named_once():
    """Product code names its default chip as ``analysis.types.DEFAULT_CHIP``: a ``"v6e"`` literal stands only in
    the chip table and that constant (and the candidate's process, which imports nothing of ours but its frames)."""
    import ast

    root = Path(__file__).resolve().parents[1]
    allowed = {"analysis/types.py", "runner/judging/candidate.py"}
    found = []
    for layer in ("runner", "engine", "agents", "server", "analysis", "knowledge", "wire"):
        for path in sorted((root / layer).rglob("*.py")):
            rel = str(path.relative_to(root))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value == "v6e" and rel not in allowed:
                    found.append(f"{rel}:{node.lineno}")
    assert not found, found
