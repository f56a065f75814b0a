"""The chip table: jax's numbers carried faithfully, names verified against libtpu, the
scoped-VMEM probe checked against the compiler, and the cache."""

from __future__ import annotations

import dataclasses
import os

import pytest

for _name, _value in {"TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)  # before libtpu loads in this process

from pallasite.runner import chips  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "worker")


def test_each_spec_carries_jaxs_own_numbers():
    from jax.experimental.pallas import tpu as pltpu

    specs = {s.name: s for s in (chips.spec_from_jax(t) for t in chips.TARGETS) if s is not None}
    assert {"v4", "v5e", "v5p", "v6e"} <= set(specs)
    for spec in specs.values():
        info = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion(chips.target(spec.name).chip_version), 1)
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

    for t in chips.TARGETS:
        version = chip_version_from_device_kind(t.device_kind)
        assert version is not None and version.value == t.chip_version, t


def test_target_lookup_by_name_kind_or_topology():
    assert chips.target("v5e") == chips.target("TPU v5 lite") == chips.target("v5e:2x2")
    with pytest.raises(ValueError, match="known: v4, v5e"):
        chips.target("v9z")


def test_limit_is_read_from_a_real_e1001_message():
    with open(os.path.join(DATA, "e1001_message.txt")) as f:
        assert chips.limit_from_message(f.read()) == 16 * 2**20
    assert chips.limit_from_message("RESOURCE_EXHAUSTED: something else") is None


def test_probe_bisects_when_the_message_names_no_limit():
    spec = chips.spec_from_jax(chips.target("v5e"))
    limit = 24 * chips.MIB
    calls = []

    def fake_compiler(topology, window_bytes):  # a compiler whose messages carry no number
        calls.append(window_bytes)
        return "RESOURCE_EXHAUSTED: out of vmem" if 2 * window_bytes + 16 * 1024 > limit else None

    found, how = chips.probe_scoped_vmem(spec, compile_block=fake_compiler)
    assert found == limit and "bisection" in how and len(calls) <= 10


def test_cache_round_trip_and_use(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    specs = [dataclasses.replace(s, scoped_vmem_limit_bytes=7 * chips.MIB, scoped_vmem_source="test probe")
             for s in (chips.spec_from_jax(t) for t in chips.TARGETS) if s is not None]
    path = chips.write_cache(specs)
    assert path.startswith(str(tmp_path / "pallasite")) and chips.read_cache() == specs
    assert chips.chip_table(probe=True) == specs  # served from the cache, no probe
    (tmp_path / "pallasite" / os.path.basename(path)).write_text("{broken")
    assert chips.read_cache() is None


def test_table_text_names_every_chip_and_its_sources():
    specs = chips.chip_table(probe=False, use_cache=False)
    text = chips.format_chip_table(specs)
    for spec in specs:
        assert spec.name in text and spec.topology in text
    assert "source: jax" in text and "scoped VMEM: not measured" in text
    assert "197 TFLOP/s" in text  # v5e's bf16 rate as jax states it, per core and per chip


@pytest.mark.tpu_compiler
def test_topologies_give_the_tier1_kind_and_core_count():
    pytest.importorskip("libtpu")
    from jax.experimental import topologies

    for t in chips.TARGETS:
        device = topologies.get_topology_desc(topology_name=t.topology, platform="tpu").devices[0]
        assert device.device_kind == t.device_kind and device.num_cores == t.device_cores, t


@pytest.mark.tpu_compiler
def test_probed_limit_is_where_the_compiler_starts_refusing():
    pytest.importorskip("libtpu")
    for name in ("v5e", "v4"):
        spec = chips.spec_from_jax(chips.target(name))
        limit, how = chips.probe_scoped_vmem(spec)
        assert limit is not None and "libtpu" in how
        assert chips._compile_block(spec.topology, (limit - chips.MIB) // 2) is None
        refused = chips._compile_block(spec.topology, (limit + chips.MIB) // 2)
        assert refused is not None and "RESOURCE_EXHAUSTED" in refused


def test_chips_command_prints_the_table_without_importing_jax_itself(tmp_path):
    import subprocess
    import sys

    code = (
        "import argparse, sys\n"
        "from pallasite.runner import chips\n"
        "parser = argparse.ArgumentParser(); chips.add_arguments(parser, 'chips')\n"
        "rc = chips.run(parser.parse_args(['--no-probe']))\n"
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
    from pallasite.runner.messages import CheckParams

    assert "7x" in TARGETS
    corpus = os.path.join(os.path.dirname(__file__), "data", "compiler")
    states = {}
    for name in ("store_shape_fixed", "tiling_int8_rows_broken"):
        path = os.path.join(corpus, f"{name}.py")
        with open(path, encoding="utf-8") as f:
            params = CheckParams(source=sources_for(path, f.read()), target="7x", tiers=(1, 2), time_limit_s=120)
        result = handle_check(params)
        assert result.unavailable == {}
        [entry] = result.entries
        states[name] = (entry.states(), [list(e.mosaic_codes) for e in entry.errors])
    assert states["store_shape_fixed"] == ({"1": "ok", "2": "ok"}, [])
    assert states["tiling_int8_rows_broken"] == ({"1": "ok", "2": "error"}, [["E2002"]])  # the compiler's tiling rule
