"""The one run setup (agents/run_setup.py) behind fix, optimize, search, eval and tune, from the CLI
and the editor: the same project gives the same chip, provider, check options, workspace and refusal
whichever front end asks; what is wrong is a ValueError said before any model is asked."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from pallasite.agents.run_setup import RunRequest, prepare
from pallasite.analysis.verdict import COMPILE_TIER
from pallasite.server.commands import flags
from pallasite.server import run_request as cli_setup
from pallasite.server.settings import load_project_settings

PROJECT = """[tool.pallasite]
target = "v5e"
tiers = [0, 1]
"""
# the provider and model are the user's choice, never the project's: they come from the flags / the editor
USER = ("--provider", "scripted", "--model", "the-users")


def _project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PROJECT)
    kernel = tmp_path / "k.py"
    kernel.write_text("import jax\n")
    return kernel


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    flags.add(parser, "--target", "optimize")
    flags.add_model(parser, "optimize")
    flags.add_backend(parser, "optimize")
    return parser.parse_args(list(argv))


def test_the_cli_and_the_editor_get_the_same_setup_from_the_same_project(tmp_path):
    kernel = _project(tmp_path)
    cli = prepare(cli_setup.run_request(_args(str(kernel), *USER), str(kernel)))
    settings, _ = load_project_settings(tmp_path)
    editor_settings = dataclasses.replace(settings, agent=dataclasses.replace(settings.agent, provider="scripted",
                                                                               model="the-users"))
    editor = prepare(RunRequest(path=str(kernel), settings=editor_settings, options=editor_settings.check_options(),
                                cwd=str(tmp_path)))
    for run in (cli, editor):
        assert run.chip == "v5e" and run.provider == "scripted" and run.agent.model == "the-users"
        assert run.options.target == "v5e" and run.workspace == tmp_path.resolve()
        # candidates are judged: compiled for the chip, so tier 2 joins the project's tiers 0 and 1
        assert run.tiers == (0, 1) and run.options.tiers == (0, 1, COMPILE_TIER)
        assert run.device is None and run.where() == "estimate"
    assert cli.options == editor.options


def test_flags_win_over_the_project_and_absent_flags_change_nothing(tmp_path):
    kernel = _project(tmp_path)
    run = prepare(cli_setup.run_request(_args(str(kernel), "--target", "v6e", "--model", "flagged"), str(kernel)))
    assert run.chip == "v6e" and run.options.target == "v6e" and run.agent.model == "flagged"
    assert run.provider == "" and run.provider_config().model == "flagged"
    assert run.provider_config().store_path.startswith(str(tmp_path.resolve()))  # a replay reads this store
    plain = prepare(cli_setup.run_request(_args(str(kernel)), str(kernel)))
    assert plain.chip == "v5e" and plain.agent == load_project_settings(tmp_path)[0].agent


def test_an_unknown_chip_is_refused_with_the_choices(tmp_path):
    kernel = _project(tmp_path)
    with pytest.raises(SystemExit):  # the command line's parser refuses it first (the flag's chip type)
        _args(str(kernel), "--target", "v9z")
    args = _args(str(kernel))
    args.target = "v9z"  # as the editor's settings can give it
    with pytest.raises(ValueError, match=r"--target 'v9z': unknown chip; choose one of .*v5e"):
        prepare(cli_setup.run_request(args, str(kernel)))


def test_model_code_without_a_confined_worker_is_refused_up_front(tmp_path):
    kernel = _project(tmp_path)
    with open(tmp_path / "pyproject.toml", "a") as f:  # no sandbox: no confined worker can be made
        f.write('\n[tool.pallasite.worker]\nsandbox = "off"\n')
    request = cli_setup.run_request(_args(str(kernel)), str(kernel))
    with pytest.raises(ValueError, match="runs only in a confined worker"):
        prepare(request)
    # the user's own kernel (tune) is not refused, and opting in is the user's call
    assert prepare(dataclasses.replace(request, runs_model_code=False)).chip == "v5e"
    opted = cli_setup.run_request(_args(str(kernel), "--allow-unconfined"), str(kernel))
    assert prepare(opted).options.allow_unconfined is True


def test_a_bad_backend_is_refused_before_anything_runs(tmp_path):
    kernel = _project(tmp_path)
    with pytest.raises(ValueError, match="needs a host"):
        cli_setup.run_request(_args(str(kernel), "--backend", "ssh"), str(kernel))
    run = prepare(cli_setup.run_request(_args(str(kernel), "--backend", "ssh", "--host", "tpu-vm",
                                              "--allow-unconfined"), str(kernel)))
    assert run.device.kind == "ssh" and run.where() == "ssh:tpu-vm"


def test_the_editor_s_interpreter_and_refusal_are_its_own(tmp_path):
    kernel = _project(tmp_path)
    settings, _ = load_project_settings(tmp_path)
    asked = []

    def refusal(options, device):
        asked.append(options.interpreter)
        return "no confined worker in this test"

    request = RunRequest(path=str(kernel), settings=settings, options=settings.check_options(),
                         interpreter="/usr/bin/python3")
    with pytest.raises(ValueError, match="no confined worker in this test"):
        prepare(request, refusal=refusal)
    assert asked == ["/usr/bin/python3"]


def test_a_store_that_cannot_open_is_told_and_the_run_goes_on(tmp_path):
    kernel = _project(tmp_path)
    (tmp_path / ".pallasite").write_text("a file where the store's folder should be")
    run = prepare(cli_setup.run_request(_args(str(kernel)), str(kernel)))
    told = []
    assert run.open_store(told.append) is None
    assert told and told[0].startswith("results are not recorded")
    with pytest.raises(Exception):
        run.open_store()


def settings_calls(root: Path) -> list[str]:
    """``file:line`` of every call of a method on a settings object in agents/ (``settings.check_options()``,
    ``run.settings.x()``): agents read the settings' data; converting them is the front end's."""
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                if name == "settings":
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_agents_never_call_back_into_the_settings(tmp_path):
    agents = Path(__file__).resolve().parents[1] / "agents"
    assert settings_calls(agents) == []
    (tmp_path / "x.py").write_text("def f(request):\n    return request.settings.check_options([1])\n")
    assert settings_calls(tmp_path) == ["x.py:2"]


def test_evals_judges_are_the_run_setups_one_judge(tmp_path):
    """eval's judge of each task is ``RunSetup.judge`` (the project's check options, chip, time limit, confined),
    as optimize's is; before, eval built its own Judge from copied fields."""
    import asyncio

    from pallasite.agents.eval_job import EvalJob, task_judge

    kernel = _project(tmp_path)
    settings, _ = load_project_settings(tmp_path)
    settings = dataclasses.replace(settings, check=dataclasses.replace(settings.check, timeLimitS=77.0))
    run = prepare(RunRequest(path=str(kernel), settings=settings, options=settings.check_options(), cwd=str(tmp_path)))
    from pallasite.engine.eval_tasks import discover

    task = discover(str(Path(__file__).parent / "data" / "eval_verdicts"))[0]
    job = EvalJob([task], {}, chip="v6e", timeout_s=5.0, run=run)
    judge = task_judge(object(), None, task, job, asyncio.Semaphore(1))
    assert judge.options == run.options and judge.chip == run.chip == "v5e"
    assert judge.timeout_s == 77.0 and judge.confined is True  # the run's limit, not the job's copied 5 s
