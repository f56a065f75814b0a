"""Correctness at a size that fits, said as such (issue 34): the ``time`` op without a device
reduces a JAXBench-layout task through its own ``CONFIG`` (runner/measure/timing_ladder.py) when the
interpreter's estimated peak or the grid is over budget, keeping block shapes, tiling and two or
more steps per blocked grid axis; the checks say the size ("seq_len 256 of 512"), and a planted
wrong kernel of each structure is caught as wrong there. Fixtures: tests/data/timing/ladder/
(attention with whole-sequence K/V blocks; RMSNorm reshaped to rows before its pallas_call, which
the BlockSpec rule could not reduce; a reference taking another argument than the kernel: not
verified, the judge compares only on the task's own inputs). The budgets are made tiny so the tasks are small.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jax")

import jax  # noqa: E402

from pallasite.runner.measure import timing, timing_ladder  # noqa: E402
from pallasite.runner.judging.judge import judged_time  # noqa: E402

DATA = Path(__file__).parent / "data" / "timing" / "ladder"


@pytest.fixture(autouse=True)
def tiny_budget(monkeypatch):
    monkeypatch.setattr(timing_ladder, "TARGET_BYTES", 1 << 20)
    monkeypatch.setattr(timing_ladder, "MAX_STEPS", 8)
    monkeypatch.setattr(timing_ladder, "DEFAULT_BUDGET", 64 << 20)
    from pallasite.runner import memory_guard

    monkeypatch.setattr(memory_guard, "LIMIT_MB", 0)


def check(task: str, name: str) -> dict:
    return judged_time({"path": str(DATA / task / f"{name}.py"), "shrink": True, "runs": 1, "warmup": 0,
                               "extra_shape": True, "seed": 3})


@pytest.mark.pipeline
def test_attention_is_checked_at_a_reduced_config_size_that_says_so():
    result = check("attention", "optimized")
    assert result["verdict"] == "ok", result.get("error") or result["rejections"]
    checks = result["checks"]
    assert "seq_len 256 of 512" in checks["verified_at"]  # 4 query blocks -> 2: still two steps on that axis
    assert checks["full_inputs"] == [[[2, 4, 512, 128], "float32"]] * 3
    assert checks["inputs"] != checks["full_inputs"]
    assert all(shape[3] == 128 for shape, _ in checks["inputs"])  # the lane dim kept
    assert checks["extra_shape"]["checked"]  # a second reduced size one rung up


def test_a_planted_wrong_attention_is_caught_at_the_reduced_size():
    result = check("attention", "wrong")
    assert result["verdict"] == "rejected"
    assert [r["trick"] for r in result["rejections"]] == ["wrong_result"]
    assert "seq_len 256 of 512" in result["checks"]["verified_at"]


@pytest.mark.pipeline
def test_rmsnorm_reshaped_to_rows_is_reduced_through_config_not_blockspecs():
    result = check("rmsnorm", "optimized")
    assert result["verdict"] == "ok", result.get("error") or result["rejections"]
    assert result["checks"]["verified_at"]
    wrong = check("rmsnorm", "wrong")
    assert wrong["verdict"] == "rejected" and wrong["rejections"][0]["trick"] == "wrong_result"


@pytest.mark.parametrize("name", ["optimized", "wrong"])
def test_a_candidate_whose_arguments_differ_from_the_tasks_is_not_verified(name):
    """The reference takes other arguments than the kernel (issue 56: the own-inputs path is gone): the
    judge gives a candidate only inputs it makes from the task's own file, so neither the right kernel
    nor the planted wrong one gets a verdict - each says why, and neither passes."""
    result = check("own_inputs", name)
    assert result["verdict"] == "error", result["rejections"]
    assert result["error"].startswith("not verified: its arguments differ from the task's")
    assert "own_inputs" not in result.get("checks", {})


def test_the_ladder_keeps_blocks_and_two_steps_per_blocked_axis():
    assert timing_ladder._smaller(512) == [64, 128, 256]
    assert timing_ladder._smaller(128) == [16, 32, 64]
    assert timing_ladder._smaller(7168) == [896, 1792, 3584]
    assert timing_ladder._lane_cut((jax.ShapeDtypeStruct((8, 128), "float32"),), (jax.ShapeDtypeStruct((8, 64), "float32"),))
    assert timing_ladder._smaller(4) == [1, 2]
    assert timing_ladder._smaller(4, 128) == [2]  # 128 experts keep two groups at least
    assert not timing_ladder._lane_cut((jax.ShapeDtypeStruct((128,), "int32"),), (jax.ShapeDtypeStruct((2,), "int32"),))


def standalone_kernel(tmp_path: Path) -> Path:
    """The attention kernel as a file of its own: a ``workload`` and nothing of the task's."""
    text = (DATA / "attention" / "optimized.py").read_text()
    start, end = text.index("CONFIG = {"), text.index("BLOCK_Q = 128")
    text = text[:start] + text[end:]
    start, end = text.index("def create_inputs"), text.index("def _kernel")
    path = tmp_path / "my_attention.py"
    path.write_text(text[:start] + text[end:])
    return path


@pytest.mark.pipeline
def test_any_kernel_file_is_scored_against_a_named_task(tmp_path):
    """``pallasite time TASK_DIR --kernel FILE``: the task's baseline.py gives the reference, the inputs
    and the CONFIG the ladder reduces (the message that named a nonexistent ``reference_path``
    option now names this)."""
    from pallasite.engine.timing import task_files, time_request  # noqa: F401 - the client side of the same

    kernel = standalone_kernel(tmp_path)
    files = task_files(str(kernel), str(DATA / "attention"))
    assert files.reference_path == str(DATA / "attention" / "baseline.py") and files.layout == "jaxbench"
    result = judged_time({"path": str(kernel), "reference_path": files.reference_path, "shrink": True,
                                 "runs": 1, "warmup": 0, "seed": 3})
    assert result["verdict"] == "ok", result.get("error") or result["rejections"]
    assert "seq_len 256 of 512" in result["checks"]["verified_at"]
    alone = judged_time({"path": str(kernel), "shrink": True, "runs": 1, "warmup": 0})
    assert "TASK_DIR --kernel FILE" in alone["error"]
    native = tmp_path / "native.py"  # a task of its own without a reference: the message names --kernel
    native.write_text(kernel.read_text() + "\n\ndef example_inputs():\n    return (jnp.zeros((1, 2, 256, 128)),) * 3\n")
    no_ref = judged_time({"path": str(native), "shrink": True, "runs": 1, "warmup": 0})
    assert "no reference" in no_ref["error"] and "reference_path" not in no_ref["error"]
    assert "pallasite time TASK_DIR --kernel FILE" in no_ref["error"]


def test_eval_kernel_replaces_the_one_tasks_candidate(tmp_path):
    from pallasite.engine.eval_tasks import discover, with_kernel

    kernel = standalone_kernel(tmp_path)
    [task] = with_kernel(discover(str(DATA / "attention")), str(kernel))
    assert task.reference_path.endswith("attention/baseline.py")
    # a file with only a workload, kept outside the task folder, is staged (engine/eval_tasks.
    # staged_beside_baseline): the candidate is a link to the kernel, under its own name, beside the
    # task's baseline.py, so every phase finds the task's inputs
    staged = Path(task.candidate_path)
    assert staged.name == kernel.name and staged.resolve() == kernel.resolve() and staged.parent != kernel.parent
    assert (staged.parent / "baseline.py").resolve() == Path(task.reference_path).resolve()
    native = tmp_path / "native.py"  # a file that states its own inputs is the candidate as it is
    native.write_text(kernel.read_text() + "\n\ndef example_inputs():\n    return ()\n")
    [task] = with_kernel(discover(str(DATA / "attention")), str(native))
    assert task.candidate_path == str(native)
    with pytest.raises(ValueError, match="exactly one task"):
        with_kernel(discover(str(DATA)), str(kernel))


def test_fresh_inputs_keep_the_scale_of_the_tasks_own_values():
    """4p (splash, bf16): at N(0, 1) q and k the bf16 reference's logits round to a quarter and it is
    itself off by 0.3, so the honest kernel was 'wrong'; fresh values now follow the task's scale."""
    import numpy as np

    from pallasite.runner.measure.timing_inputs import fresh_inputs

    own = (jax.numpy.full((64, 128), 0.5) + 0.02 * jax.random.normal(jax.random.key(0), (64, 128)),)
    [fresh] = fresh_inputs((jax.ShapeDtypeStruct((64, 128), "float32"),), seed=1, template=own)
    values = np.asarray(fresh)
    assert abs(values.std() - 0.02) < 0.005 and abs(values.mean() - 0.5) < 0.01
    assert not np.allclose(values, np.asarray(own[0]))  # fresh, not the task's own


@pytest.mark.parametrize("task", ["gemm", *(pytest.param(t, marks=pytest.mark.pipeline)  # one structure in the default run
                                   for t in ("paged", "gmm", "splash", "ragged_paged", "mla", "gqa"))])
def test_a_planted_wrong_kernel_of_each_structure_is_caught_at_the_reduced_size(task):
    """One per JAXBench hand-tuned structure. A K-accumulating GEMM that skips its last K block; a
    scalar-prefetch page gather reading the next page-table entry (the task's own page table made at
    the reduced size); Megablox GMM's (group sizes by scalar prefetch, each row tile's rhs index map
    walking them to its group; planted: a group's last tile multiplied by the next group's rhs);
    splash's (a block mask by scalar prefetch, masked blocks skipped; planted: the diagonal blocks
    taken as full); ragged paged attention's (cumulative query
    lengths too; planted: the causal mask one key late); MLA's (up-projections absorbed, the latent
    cache shared by the heads; planted: the output projected with the keys' weights); GQA's (query
    head h's K/V index map names kv head h // group, a group the ladder keeps; planted: h % kv_heads)."""
    right, wrong = check(task, "optimized"), check(task, "wrong")
    assert right["verdict"] == "ok", right.get("error") or right["rejections"]
    assert right["checks"]["verified_at"] and right["checks"]["inputs"] != right["checks"]["full_inputs"]
    assert wrong["verdict"] == "rejected", wrong.get("error")
    assert [r["trick"] for r in wrong["rejections"]] == ["wrong_result"]
    assert wrong["checks"]["verified_at"] == right["checks"]["verified_at"]


def test_a_reference_with_other_arguments_is_estimated_through_its_own_inputs():
    """Paged attention and megablox got no reference estimate ("the baseline takes other arguments")."""
    import importlib.util

    from pallasite.runner.tasks.tasks_runtime import own_inputs

    spec = importlib.util.spec_from_file_location("ladder_own_baseline", DATA / "own_inputs" / "baseline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel_args = (jax.ShapeDtypeStruct((512, 128), "float32"), jax.ShapeDtypeStruct((8, 128), "float32"))
    call, args, own = own_inputs(module.workload, kernel_args)
    assert own and [a.shape for a in args] == [(512, 128), (8, 128)]  # the static group size kept out
    assert jax.eval_shape(call, *args).shape == (512, 128)
    same, _, own = own_inputs(lambda x, s: x * 2, kernel_args)
    assert not own


def test_a_kernel_file_kept_apart_from_its_task_gets_an_estimate_pair(tmp_path):
    """``eval TASK --kernel FILE`` with FILE outside the task folder: the estimate op had no task (the
    file has no inputs) and no reference; the task's baseline.py now travels as ``reference_source``
    (as the time op's reference does), giving the inputs and the reference estimated by one model."""
    from pallasite.engine.estimates import pair_result
    from pallasite.engine.sources import sources_for
    from pallasite.runner import tune_ops
    from pallasite.wire.messages import EstimateParams

    kernel = standalone_kernel(tmp_path)
    result = tune_ops.handle_estimate(EstimateParams(source=sources_for(str(kernel)), chip="v5e", reference=True,
                                                     probe=False,
                                                     reference_source=sources_for(str(DATA / "attention" / "baseline.py"))))
    paired = pair_result(result)
    assert paired.kernel_s and paired.reference_s, paired.why
    assert [tuple(i.shape) for i in result.inputs] == [(2, 4, 512, 128)] * 3


def test_a_wrong_verdict_at_a_reduced_size_says_the_size():
    """6p was "compiled, wrong: ..." with no size although it was checked at batch 2 of 64."""
    from types import SimpleNamespace

    from pallasite.engine.judge_phase import test_result
    from pallasite.analysis.verdict import CompileResult, Verdict

    result = SimpleNamespace(verdict="rejected", error=None, checks={"verified_at": "batch 2 of 64"},
                             rejections=[SimpleNamespace(trick="wrong_result", message="max abs error 0.000267")])
    test = test_result(SimpleNamespace(ok=True, result=result))
    assert test.outcome == "wrong" and test.verified_at == "batch 2 of 64"
    assert test.text().startswith("wrong at batch 2 of 64: wrong_result")
    assert Verdict(CompileResult.passed("v6e"), test).text().endswith("(at batch 2 of 64)")


def test_how_grid_steps_share_an_inputs_blocks_is_read_from_its_index_map():
    """The ladder keeps a size only where each input's blocks are shared as at the full size: 8 query
    heads to 2 kv heads is "shared" along the heads axis, 2 to 2 is "own", 8 to 1 "fixed"."""
    gqa = lambda b, h, s: (b, h // 4, 0, 0)  # noqa: E731 - an index map
    assert timing_ladder._shared_along(gqa, (2, 8, 4)) == ("own", "shared", "fixed")
    assert timing_ladder._shared_along(lambda b, h, s: (b, h // 1, 0, 0), (2, 2, 4)) == ("own", "own", "fixed")
    assert timing_ladder._shared_along(lambda b, h, s: (b, h // 8, 0, 0), (2, 8, 4)) == ("own", "fixed", "fixed")
    assert timing_ladder._shared_along(lambda b, h, s, table: (table[b], 0), (2, 8, 4)) is None  # reads a table


def test_an_index_map_reading_scalar_prefetched_tables_is_compared_with_the_tables_at_zero():
    """A splash-like K index map, (h // group, table[h, i, j]): its head axis is read with all-zero tables."""
    import numpy as np

    kv = lambda h, i, j, table: (h // 2, table[h, i, j], 0)  # noqa: E731 - an index map
    table = np.zeros((8, 2, 2), np.int32)
    assert timing_ladder._shared_along(kv, (8, 2, 2), (table,)) == ("shared", "fixed", "fixed")


def constant_lengths(folder: Path) -> Path:
    """The ragged fixture with its query lengths a module constant (JAXBench 7p's layout): at a reduced
    num_seqs its offsets run past the query buffer, so no reduced size is an instance of the task."""
    made = {"    q_lens = jax.random.randint(k4, (b,), 1, mq + 1)\n": "    q_lens = jnp.array((1, 7, 8, 8), jnp.int32)\n",
            "jax.random.randint(k5, (b,), 1,": "jax.random.randint(k5, (4,), 1,"}
    folder.mkdir()
    for name in ("baseline", "optimized"):
        text = (DATA / "ragged_paged" / f"{name}.py").read_text()
        for old, new in made.items():
            assert old in text
            text = text.replace(old, new)
        (folder / f"{name}.py").write_text(text)
    return folder / "optimized.py"


@pytest.mark.pipeline
def test_a_reduced_size_whose_integers_do_not_follow_config_is_not_verified(tmp_path):
    """JAXBench 7p keeps its query lengths as module constants summing to 4096 tokens: at 128 tokens its
    offsets ran past the query buffer, the reference piled late sequences onto the last row, and the hand-tuned
    kernel was called wrong (85,434 of 131,072 outputs off). Here the same layout gave 'ok' at a size no
    instance of the task has; now neither way is a verdict (runner/judging/instance.py)."""
    path = constant_lengths(tmp_path / "ragged_constant")
    result = judged_time({"path": str(path), "shrink": True, "runs": 1, "warmup": 0, "extra_shape": True, "seed": 3})
    assert result["verdict"] == "error", result.get("rejections")
    assert "not an instance of the task" in result["error"] and "num_seqs 2 of 4" in result["error"]
    assert "integer input 5 reaches 24" in result["error"]  # cu_q_lens: 24 tokens, past a 2-row query buffer


def test_the_judge_s_not_verified_reaches_the_verdict_whole():
    """The judge's "not verified: why" was cut at 300 characters behind "the test could not finish" (7p's why
    ended at "(leng")."""
    from types import SimpleNamespace

    from pallasite.engine.judge_phase import test_result

    why = "not verified at the reduced size max_num_batched_tokens 128 of 4096: " + "x" * 400 + " an instance of the task"
    test = test_result(SimpleNamespace(ok=True, result=SimpleNamespace(verdict="error", error=why, checks={})))
    assert test.outcome == "not verified" and test.why == why
    crashed = test_result(SimpleNamespace(ok=True, result=SimpleNamespace(verdict="error", error="boom", checks={})))
    assert crashed.why == "the test could not finish: boom"


@pytest.mark.pipeline
def test_a_kernel_wrong_only_at_the_tasks_own_size_is_run_there_where_it_fits(monkeypatch):
    """Size honesty (issue 56): checked at a reduced CONFIG size, a program exported per size is priced from a
    module no check ran (the task's size). Where the task's size fits the check's memory the judge runs that
    module too: the kernel that skips its last K block only at the task's 8 K steps is wrong there; the honest
    kernel's verdict then names no reduced size (it was verified at the task's size as well)."""
    monkeypatch.setattr(timing_ladder, "DEFAULT_BUDGET", 512 << 20)  # the reduced size stays; the task's fits

    def judged(name: str) -> dict:
        return judged_time({"path": str(DATA / "gemm" / f"{name}.py"), "shrink": True, "runs": 1, "warmup": 0,
                            "extra_shape": True, "chip": "v6e"})

    wrong = judged("wrong_at_task_size")
    assert wrong["verdict"] == "rejected", (wrong.get("error"), wrong["checks"])
    assert [r["trick"] for r in wrong["rejections"]] == ["size_specialised"]
    assert "task's own size" in wrong["rejections"][0]["message"]
    assert wrong["checks"]["verified_at"]  # the checks ran reduced; the task's size caught it
    right = judged("optimized")
    assert right["verdict"] == "ok", (right.get("error"), right["rejections"])
    assert right["checks"]["task_size"]["checked"] and "not one the checks ran" in right["checks"]["task_size"]["why"]


def test_a_size_dependent_program_too_big_at_the_tasks_size_says_it_was_verified_at_the_reduced_size_only(
        monkeypatch):
    """Where the task's own size does not fit the check's memory, the verdict says the sizes it verified and
    why no more: "verified at ... only: the module priced at the task's size is not one the checks ran"."""
    from types import SimpleNamespace

    from pallasite.engine.judge_phase import test_result
    from pallasite.runner.judging import correct

    monkeypatch.setattr(correct, "TASK_SIZE_STEPS", 0)  # nothing fits: the judge does not run the task's size
    result = judged_time({"path": str(DATA / "gemm" / "wrong_at_task_size.py"), "shrink": True, "runs": 1,
                          "warmup": 0, "extra_shape": True, "chip": "v6e"})
    assert result["verdict"] == "ok", (result.get("error"), result["rejections"])  # right at every size it ran
    assert "does not fit" in result["checks"]["size_dependent"]
    test = test_result(SimpleNamespace(ok=True, result=SimpleNamespace(verdict="ok", checks=result["checks"],
                                                                        provenance="interpret", error=None)))
    assert test.verified_at.endswith("does not fit the check's memory or time")
    assert " only: the module priced at the task's size is not one the checks ran" in test.verified_at
