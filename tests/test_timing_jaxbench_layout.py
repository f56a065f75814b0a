"""Timing integrity on JAXBench's own layout (tests/data/timing/jaxbench_global/: small task files
written the way JAXBench writes them, ``create_inputs(dtype=...)`` and ``workload`` reading the
global ``CONFIG``), through a real worker's `time` op in TPU interpret mode on CPU:

- the second shape comes from CONFIG as the module reads it (its size values doubled while the
  inputs are made and both sides run), so a kernel specialised to CONFIG's sizes is rejected as
  ``shape_specialised`` (before: no second shape, "create_inputs takes no int CONFIG value");
- a candidate caching its result per shape in a module dict cannot reach the judge: the judge runs the
  program the candidate's process exported, where that Python never runs (it is the honest kernel there;
  before issue 49 the judge called the candidate's Python and rejected it as ``cached_result``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.analysis.types import to_json
from pallasite.engine.workers.client import WorkerConfig, run_requests_sync
from pallasite.engine.timing import task_files, time_request

pytestmark = pytest.mark.pipeline  # a whole command end to end per test: .ci/run's pipeline step (issue 58)

TASK = Path(__file__).parent / "data" / "timing" / "jaxbench_global"


@pytest.fixture(scope="module")
def results():
    names = ("optimized", "specialised", "cached")
    requests = [time_request(task_files(str(TASK / f"{name}.py")), "time", runs=2, warmup=1) for name in names]
    replies = run_requests_sync(WorkerConfig(timeout_s=240), requests)
    for reply in replies:
        assert reply.ok, reply.message
    return {name: to_json(reply.result) for name, reply in zip(names, replies)}


def test_the_honest_kernel_passes_at_a_second_shape_made_from_config(results):
    result = results["optimized"]
    assert result["verdict"] == "ok", result["rejections"]
    extra = result["checks"]["extra_shape"]
    assert extra["checked"] and extra["how"] == "CONFIG with cols=256, rows=512"
    assert extra["inputs"] == [[[512, 256], "float32"], [[512, 256], "float32"]]


def test_a_kernel_specialised_to_configs_sizes_is_rejected_by_name(results):
    result = results["specialised"]
    assert result["verdict"] == "rejected"
    assert [r["trick"] for r in result["rejections"]] == ["shape_specialised"]
    assert "CONFIG with cols=256, rows=512" in result["rejections"][0]["message"]


def test_a_cache_of_results_cannot_reach_the_exported_program(results):
    result = results["cached"]
    assert result["verdict"] == "ok" and result["rejections"] == [], result["rejections"]
    assert result["checks"]["module"]["kernels"] == 1 and result["checks"]["extra_shape"]["checked"]
