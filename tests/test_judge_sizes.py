"""The judge's sizes from a candidate's proposal (runner/judging/sizes.from_proposal), on JAXBench 8p's GEMM
shape (tests/data/timing/ladder/gemm/baseline.py with 8p's CONFIG): the values are checked against the trusted
CONFIG, and the second size is one doubled value that fits the check's memory budget (it doubled every value,
and 8p's judge went over its worker's 4096 MiB)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import jax
import pytest

BASELINE = Path(__file__).parent / "data" / "timing" / "ladder" / "gemm" / "baseline.py"


@pytest.fixture
def prep(monkeypatch):
    spec = importlib.util.spec_from_file_location("gemm_baseline_8p", BASELINE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.CONFIG.update(M=8192, K=8192, N=28672)  # JAXBench 8p's GEMM
    from pallasite.runner import memory_guard

    monkeypatch.setattr(memory_guard, "limit_mb", lambda: 4096)  # the worker's default limit
    task = SimpleNamespace(config=module.CONFIG, entry=module.workload, inputs=module.create_inputs,
                           abstract_args=lambda: tuple(jax.eval_shape(module.create_inputs)), format="jaxbench")
    return SimpleNamespace(task=task, reference=module.workload, module=module)


def test_the_second_size_doubles_one_value_and_fits_the_budget(prep, monkeypatch):
    from pallasite.runner import memory_guard
    from pallasite.runner.measure import timing_ladder
    from pallasite.runner.judging.sizes import from_proposal

    proposal = {"config": {"M": 2048, "K": 2048, "N": 14336}}  # what 8p's candidate proposed (its blocks' size)
    sizes = from_proposal(prep, proposal)
    assert [tuple(s.shape) for s in sizes.main] == [(2048, 2048), (2048, 14336)]
    # at the worker's default 4096 MiB no doubled size fits a third of it: none, and said so
    assert sizes.extra is None and sizes.extra_how == "no second reduced size"
    monkeypatch.setattr(memory_guard, "limit_mb", lambda: 16384)
    sizes = from_proposal(prep, proposal)
    assert sizes.extra is not None, sizes.extra_how
    moved = {k for k, v in sizes.extra_config.items() if v != sizes.main_config[k]}
    assert len(moved) == 1, sizes.extra_config  # one value doubled back, as the ladder does
    assert timing_ladder.peak_bytes(prep.reference, sizes.extra) <= timing_ladder.budget_bytes()


def test_a_proposal_outside_the_trusted_config_is_refused(prep):
    from pallasite.runner.judging.sizes import from_proposal

    assert "not a CONFIG size" in from_proposal(prep, {"config": {"M": 16384}})  # larger than the task's
    # a name only the candidate's file spells: its arguments differ from the task's, so no verdict
    why = from_proposal(prep, {"config": {"M": 2048, "batch": 2048}})
    assert isinstance(why, str) and why.startswith("not verified: its arguments differ from the task's"), why
    # its word that the reference takes other arguments is not read (issue 56: the own-inputs path is gone; the
    # judge makes the task's inputs and maps them itself): the same sizes as without it
    worded = from_proposal(prep, {"config": {"M": 2048}, "own": True})
    assert worded == from_proposal(prep, {"config": {"M": 2048}}) and worded.verified_at == "M 2048 of 8192"


def test_fresh_integers_keep_their_relations_beside_floats_and_are_permuted_alone():
    """JAXBench 7p (ragged paged attention) left 7,168 output rows unwritten when its per-sequence kv lengths
    were permuted away from its query offsets (a false partial_write); a task of integers alone is permuted."""
    import numpy as np

    from pallasite.runner.measure.timing_inputs import fresh_inputs

    lens = np.array([5, 1, 9, 3, 7, 2], np.int32)
    q = np.zeros((6, 4), np.float32)
    shapes = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (q, lens))
    got_q, got_lens = fresh_inputs(shapes, seed=7, template=(q, lens))
    assert np.array_equal(np.asarray(got_lens), lens) and not np.array_equal(np.asarray(got_q), q)
    (alone,) = fresh_inputs(shapes[1:], seed=7, template=(lens,))
    assert sorted(np.asarray(alone).tolist()) == sorted(lens.tolist()) and not np.array_equal(np.asarray(alone), lens)


def test_no_reduced_size_that_fits_is_said_not_run_whole(prep):
    """JAXBench 2p at the default 4096 MiB: the candidate's ladder found no size within a third of it, sent no
    proposal, and the judge took that as "fits whole": its full-size run was killed at the memory limit (18 s
    and a worker restart). The proposal now says why not, and the judge says so with the way out."""
    from pallasite.runner.judging.sizes import from_proposal

    why = from_proposal(prep, {"config": None, "own": False, "why_not": "the interpreter would need about 1752 MiB"})
    assert isinstance(why, str) and why.startswith("not checked in interpret mode") and "1752 MiB" in why
    assert "--memory-mb" in why
    whole = from_proposal(prep, {"config": None, "own": False, "why_not": None})
    assert not isinstance(whole, str) and whole.main == whole.full  # a program that fits runs at the task's size


PREFIX = Path(__file__).parent / "data" / "timing" / "prefix_task"


@pytest.mark.pipeline
@pytest.mark.parametrize("name, verdict", [("optimized", "ok"), ("wrong", "rejected"), ("other_layout", "error")])
def test_the_judge_maps_the_tasks_first_inputs_onto_a_candidate_that_takes_fewer(name, verdict):
    """JAXBench 11p's shape: the baseline also passes a static size (a Python int its reference reads as one).
    The judge gives a kernel that takes fewer inputs the task's first ones (its own mapping; a candidate never says
    which inputs it is compared on): the right one is correct, the wrong one is wrong, one in another layout is
    'not verified: its arguments differ'. Before, the static size reached the reference traced and the judge
    refused the task."""
    from pallasite.runner.judging.judge import judged_time

    result = judged_time({"path": str(PREFIX / f"{name}.py"), "reference_path": str(PREFIX / "baseline.py"),
                          "runs": 1, "warmup": 0, "shrink": True, "extra_shape": True})
    assert result["verdict"] == verdict, (result.get("error"), result["rejections"])
    if verdict == "ok":
        assert any("first 2 of its 3 inputs" in n for n in result["notes"]), result["notes"]
    if verdict == "rejected":
        assert [r["trick"] for r in result["rejections"]] == ["wrong_result"]
    if verdict == "error":
        assert result["error"].startswith("not verified: its arguments differ from the task's"), result["error"]


def test_a_python_scalar_among_the_tasks_inputs_reaches_the_reference_as_itself():
    import numpy as np

    from pallasite.runner.measure.timing_inputs import concrete_template, static_leaves, with_static_inputs

    spec = importlib.util.spec_from_file_location("prefix_baseline", PREFIX / "baseline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert static_leaves(module.create_inputs) == {2: 64}
    reference = with_static_inputs(module.workload, module.create_inputs)
    x, y, _ = module.create_inputs()
    traced = jax.jit(reference)(x, y, np.asarray(7))  # the drawn value is replaced by the task's own 64
    assert np.allclose(traced, x + y)
    module.CONFIG["groups"] = 8  # a reduced size changes it, read at the call
    assert static_leaves(module.create_inputs) == {2: 32}
    template = concrete_template(module.create_inputs)
    assert template is not None and np.asarray(template[2]).shape == () and int(template[2]) == 32
