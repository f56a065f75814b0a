"""Tune's configurations priced by the judge (issue 49): each configuration's exported program priced in the
judge's throwaway verifier (runner/judging/configs.py), never in a process that imported the file. A file whose
module-level code divides its own estimates (by 3, and its default configuration's by 30:
tests/data/untrusted/forged_estimates_preamble.py) is tuned to the same figures and the same best configuration
as the honest file, through `pallasite tune` (the user's own file) and through optimize's autotune phase (a model's
candidate, in confined workers). Before, the `estimate` op priced them in the process that imported the file, and
the forged figures ranked it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.engine.workers import spawn

DATA = Path(__file__).parent / "data"
HONEST = (DATA / "optimize" / "candidates" / "tunable_rows.py").read_text()
FORGING = (DATA / "untrusted" / "forged_estimates_preamble.py").read_text()
FORGED = HONEST.replace("\n\nimport jax\n", "\n\n" + FORGING + "\nimport jax\n", 1)

needs_namespaces = pytest.mark.skipif(spawn.confinement_problem(sys.executable) is not None,
                                      reason=f"no confined worker here: {spawn.confinement_problem(sys.executable)}")


@pytest.mark.pipeline
def test_a_candidate_that_divides_its_own_estimates_is_tuned_to_the_honest_figures(tmp_path):
    """The judge of tune's ``estimate`` request (runner/judging/configs.py, here in this process: it never imports
    the candidate), for a candidate that forges its estimates and for the honest one, each against the honest file
    as the trusted side (optimize's autotune phase: the user's original): the same figures, the same best."""
    import asyncio

    from pallasite.engine.sources import sources_for, trusted_sources
    from pallasite.engine.tuning.tune import TuneOptions, tune
    from pallasite.runner.judging.configs import judged_configs
    from pallasite.wire.messages import EstimateParams

    original = tmp_path / "kernel.py"
    original.write_text(HONEST)

    def tuned(text):
        async def estimator(configs, kinds):  # what engine/tuning/tune_workers.worker_estimator sends, answered here
            return judged_configs(EstimateParams(source=sources_for(str(original), text), chip="v5e",
                                                 configs=tuple(configs), kinds=dict(kinds), probe=False, judged=True,
                                                 trusted=trusted_sources(str(original), HONEST)))

        report = asyncio.run(tune(str(original), text, TuneOptions(chip="v5e", verify=0), estimator))
        return {o.config: o.estimate_s for o in report.outcomes}, report

    (honest, first), (forged, forging) = tuned(HONEST), tuned(FORGED)
    assert sum(s is not None for s in honest.values()) >= 3  # block_rows 8, 16, 32 export; 2 and 4 do not
    assert forged == honest  # every configuration's figure, to the last bit
    assert forging.best == first.best and dict(first.best)["block_rows"] != 8  # the default is not the fastest
    ranked = [o for o in forging.outcomes if o.verdict.timing is not None]
    assert ranked and all(o.verdict.judged_by.value == "the judge" for o in ranked)
    from pallasite.runner.program import module_cost, program_price

    # the candidate's module-level code never ran in the judge's process (this one)
    assert program_price.price_program.__name__ == "price_program" and module_cost.price_exported.__name__ == "price_exported"


@pytest.mark.slow
def test_a_file_that_divides_its_own_estimates_gets_the_honest_figures_from_the_estimate_op(tmp_path):
    """Tune's estimator as it reaches a worker (a judged ``estimate`` request of every configuration), in one warm
    worker: the honest file, then the forging one (whose import, in the worker that judges it, patches that
    process's cost model too), then the honest one again. Tune over each: the same figures, the same best."""
    import asyncio

    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.engine.sources import sources_for
    from pallasite.engine.tuning.tune import TuneOptions, tune
    from pallasite.wire.messages import EstimateParams

    async def tuned(worker, text):
        path = tmp_path / "kernel.py"
        path.write_text(text)
        asked = []

        async def estimator(configs, kinds):  # what engine/tuning/tune_workers.worker_estimator sends, in one request
            asked.append(len(configs))
            reply = await worker.request(EstimateParams(source=sources_for(str(path), text), chip="v5e",
                                                        configs=tuple(configs), kinds=dict(kinds), probe=False,
                                                        judged=True))
            assert reply.ok, reply.message
            return reply.result

        report = await tune(str(path), text, TuneOptions(chip="v5e", verify=0), estimator)
        assert asked == [5]
        return {o.config: o.estimate_s for o in report.outcomes}, report

    async def go():
        async with WorkerClient(WorkerConfig(timeout_s=240.0, memory_mb=4096)) as worker:
            return [await tuned(worker, text) for text in (HONEST, FORGED, HONEST)]

    (honest, first), (forged, forging), (again, _) = asyncio.run(go())
    assert sum(s is not None for s in honest.values()) >= 3  # block_rows 8, 16, 32 export; 2 and 4 do not
    assert forged == honest == again  # every configuration's figure, to the last bit
    assert forging.best == first.best and dict(first.best)["block_rows"] != 8  # the default is not the fastest
    ranked = [o for o in forging.outcomes if o.verdict.timing is not None]
    assert ranked and all(o.verdict.judged_by.value == "the judge" for o in ranked)


def _tuned(folder: Path, text: str, capsys) -> tuple[dict, list, dict]:
    from pallasite.server.cli import main

    path = folder / "kernel.py"
    path.write_text(text)
    assert main(["tune", str(path), "--target", "v5e", "--format", "json", "--verify", "0", "--no-store",
                 "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out[: out.index("\n}\n") + 2])
    figures = {tuple(map(tuple, o["config"])): o["estimate"]["seconds"] if o["estimate"] else None
               for o in report["outcomes"]}
    return figures, report["best"], report


@pytest.mark.slow
def test_pallasite_tune_of_a_file_that_divides_its_own_estimates_reports_the_honest_figures(tmp_path, capsys):
    assert FORGED != HONEST and "_forged" in FORGED
    (tmp_path / "honest").mkdir()
    (tmp_path / "forged").mkdir()
    honest, honest_best, report = _tuned(tmp_path / "honest", HONEST, capsys)
    forged, forged_best, forged_report = _tuned(tmp_path / "forged", FORGED, capsys)
    assert sum(s is not None for s in honest.values()) >= 3  # block_rows 8, 16, 32 export; 2 and 4 do not
    assert forged == honest  # every configuration's figure, to the last bit
    assert forged_best == honest_best and dict(honest_best)["block_rows"] != 8  # the default is not the fastest
    for r in (report, forged_report):
        ranked = [o for o in r["outcomes"] if o["verdict"]["timing"]]
        assert ranked and all(o["verdict"]["judged_by"] == "the judge" for o in ranked)
        assert all("priced by the judge" in o["verdict"]["timing"]["method"] for o in ranked)
    assert forged_report["speedup_vs_current"] == report["speedup_vs_current"]


def _optimize(folder: Path, candidate: str) -> tuple[str, str]:
    """`pallasite optimize add.py` with a scripted model proposing ``candidate``: (the autotune phase's line,
    the row block of the file it wrote, or "" when none)."""
    folder.mkdir()
    (folder / "add.py").write_text((DATA / "optimize" / "add.py").read_text())
    (folder / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    replies = folder / "replies.json"
    replies.write_text(json.dumps(["Tunable row blocks.\nbecause.", "```python\n" + candidate + "```"]))
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "optimize", "add.py", "--provider", "scripted",
                           "--scripted-file", str(replies), "--iterations", "1", "--format", "json"], cwd=folder,
                          capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode in (0, 1), done.stderr[-3000:]
    line = next((s for s in done.stderr.splitlines() if s.startswith("[1] autotune: ")
                 and s != "[1] autotune: tuning"), "")
    written = folder / "add.optimized.py"
    rows = ""
    if written.exists():
        rows = next((s for s in written.read_text().splitlines() if "block_rows: int =" in s), "")
    return line, rows


@pytest.mark.slow
@needs_namespaces
def test_optimize_s_autotune_of_a_candidate_that_divides_its_own_estimates_picks_the_honest_configuration(tmp_path):
    """A model's candidate with the same preamble, tuned in optimize's autotune phase (confined workers, the judge's
    estimates against the user's original): the phase says and picks what it says for the honest candidate."""
    honest = _optimize(tmp_path / "honest", HONEST)
    forged = _optimize(tmp_path / "forged", FORGED)
    assert honest[0].startswith("[1] autotune: ok") and "block_rows" in honest[0], honest
    assert forged == honest
