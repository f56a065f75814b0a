"""jax's own TPU kernels compile clean through pallasite's compiler tiers.

Flash attention, the blocked matmul, paged attention and megablox gmm from the installed
jax.experimental.pallas.ops.tpu are driven through small native-convention task files in
tests/data/real/ and checked for v5e and v6e. Tier 1 (lowering) needs only CPU jaxlib; tier 2
(the real libtpu compiler) is marked ``tpu_compiler`` and skipped without libtpu.
"""

from __future__ import annotations

import asyncio
import glob
import importlib.util
import os

import pytest

from pallasite.analysis import tier0
from pallasite.engine.findings import locate
from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.workers.client import WorkerClient, WorkerConfig
from pallasite.engine.sources import sources_for
from pallasite.wire.messages import CheckParams

REAL = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "data", "real", "*.py")))
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
TARGETS = ("v5e", "v6e")


@pytest.fixture(scope="module")
def worker():
    """request(path, target, tiers): a check through one warm worker for the whole module."""
    loop = asyncio.new_event_loop()
    client = WorkerClient(WorkerConfig(timeout_s=300.0))

    def request(path, target, tiers):
        params = CheckParams(source=sources_for(path), chip=target, tiers=tiers)
        return loop.run_until_complete(client.request(params, timeout_s=300.0))

    yield request
    loop.run_until_complete(client.close())
    loop.close()


def _params(tiers):
    marks = [pytest.mark.tpu_compiler, pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")] if 2 in tiers else []
    return [pytest.param(path, target, marks=marks, id=f"{os.path.basename(path)[:-3]}-{target}")
            for path in REAL for target in TARGETS]


def test_there_are_four_real_kernels():
    assert {os.path.basename(p) for p in REAL} >= {
        "flash_attention_causal.py", "matmul_blocked.py", "paged_attention_decode.py", "megablox_gmm.py"}


@pytest.mark.parametrize(("path", "target"), _params((1,)))
def test_real_kernel_lowers_to_mosaic(worker, path, target):
    reply = worker(path, target, (1,))
    assert reply.status == "ok", reply.message
    [entry] = reply.result.entries
    assert entry.states() == {"1": "ok"}, entry.errors
    assert entry.mosaic_calls >= 1  # the Pallas kernel really went through the TPU lowering


@pytest.mark.parametrize(("path", "target"), _params((1, 2)))
def test_real_kernel_compiles_with_libtpu_without_findings(worker, path, target):
    reply = worker(path, target, (1, 2))
    assert reply.status == "ok", reply.message
    [entry] = reply.result.entries
    assert entry.states() == {"1": "ok", "2": "ok"}, entry.errors
    assert entry.memory["argument_size_in_bytes"] > 0
    with open(path, encoding="utf-8") as f:
        text = f.read()
    located = locate.locate_result(reply.result, text, tier0.analyze(text, path, target=target), target)
    assert located.findings == ()


def test_checker_gives_an_ok_verdict_per_real_kernel_entry():
    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(0, 1)))
        try:
            return [await checker.check(p) for p in REAL]
        finally:
            await checker.close()

    for path, report in zip(REAL, asyncio.run(run())):
        assert [f for f in report.findings if f.severity == "error"] == [], path
        assert report.kernels, path  # a verdict even though the pallas_call lives inside jax
        assert all(dict(k.tiers)[1] == "ok" for k in report.kernels), report.kernels


@pytest.mark.tpu_compiler
@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_tier2_memory_figures_reach_the_report_with_their_provenance():
    path = next(p for p in REAL if p.endswith("matmul_blocked.py"))

    async def run():
        checker = Checker(CheckOptions(target="v6e", tiers=(1, 2)))
        try:
            return await checker.check(path)
        finally:
            await checker.close()

    report = asyncio.run(run())
    [note] = [n for n in report.notes if n.startswith("tier 2 memory for matmul on v6e")]
    # (1024x2048 + 2048x512) bf16 arguments = 6 MiB, 1024x512 bf16 output = 1 MiB
    assert "arguments 6.0 MiB" in note and "outputs 1.0 MiB" in note
    assert "libtpu compiler's memory_analysis" in note
