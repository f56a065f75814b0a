"""The README's commands, run as a newcomer runs them (issue 52): every command of its ``bash`` blocks,
verbatim and in order, in a fresh copy of the checkout with a fresh venv. Before, the README's
`pallasite fix ...` line failed with "pallasite: command not found" after a first command that
had used `.venv/bin/pallasite`; nothing ran the README, so nothing said so.

How it runs (the slow test):

- the checkout is copied as a clone has it (tracked and new files, nothing git ignores), and each
  command runs there with ``bash -c``, with HOME a fresh folder and PATH without the project's venv:
  a command that needs something the README's earlier commands did not make fails here as it
  fails for a newcomer;
- ``python3`` is the interpreter the project's venv was made from. The heavy dependencies (jax,
  libtpu, ...) are the project venv's own, seen through PYTHONPATH, so pip finds them installed
  and copies nothing large; what the README's commands need as programs (pytest's script) and the
  build's own tools are installed by pip from its usual sources, its cache first (no network
  where the cache or a local wheelhouse has them), as .ci/run installs them;
- the test command (`.venv/bin/pytest -n 2 ...`) runs verbatim with ``PYTEST_ADDOPTS=--collect-only``:
  every test module is imported from the fresh venv, and the suite itself is .ci/run's own step;
- `# on the TPU VM:` and `# from the laptop:` comments in a block say where its next commands run:
  the TPU VM is a second fresh HOME on this machine, reached by an ``ssh`` and ``scp`` on PATH that
  run the remote command there (so `pallasite time ... --backend ssh --host me@my-tpu-vm` really
  starts `~/venv/bin/pallasite worker` from the wheel the block built and copied);
- a command that needs hardware this machine lacks is listed in ``NEEDS`` with why; its arguments
  are parsed by the command's own parser instead (a renamed or removed flag still fails the test).

The fast tests check what needs no install: every `pallasite` command of the README starts with a
path the README's earlier commands made (`.venv/bin/pallasite`, `~/venv/bin/pallasite`) and parses,
and the README's `[tool.pallasite]` example is a valid configuration."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# commands that need what this machine lacks: run elsewhere, their arguments parsed here
NEEDS = {"--backend ray": "a Ray cluster whose nodes hold TPU chips (--ray-resources TPU=1 --devices 8)"}


@dataclass(frozen=True)
class Command:
    """One command of a README ``bash`` block and where it runs (the laptop, or the TPU VM)."""

    text: str
    where: str = "laptop"


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """The README's fenced code blocks: (language, lines). As Markdown reads them: a block closes only
    at a fence line of backticks alone (a "``` text" line inside a block is text, and the block runs on)."""
    found, lang, lines = [], None, []
    for line in text.splitlines():
        if lang is None:
            opening = re.match(r"^\s*```\s*(\S*)", line)
            if opening:
                lang, lines = opening.group(1), []
        elif re.match(r"^\s*```\s*$", line):
            found.append((lang, lines))
            lang = None
        else:
            lines.append(line)
    assert lang is None, f"a code block that never closes: ```{lang} {lines[:3]}"
    return found


def commands(text: str) -> list[Command]:
    """Every command of the ``bash`` blocks, in order; a comment line `# on the TPU VM...` or `# on the
    laptop...`/`# from the laptop...` says where the next ones run (the laptop at each block's start)."""
    out = []
    for lang, lines in blocks(text):
        if lang != "bash":
            continue
        where = "laptop"
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("#"):
                where = "vm" if re.match(r"#\s*on the TPU VM", stripped) else \
                    "laptop" if re.match(r"#\s*(on|from) the laptop", stripped) else where
            elif stripped:
                out.append(Command(stripped, where))
    return out


def pallasite_calls(command: str) -> list[list[str]]:
    """The argv of each `pallasite` program a command line runs (its `&&` parts; a trailing comment off)."""
    calls = []
    for part in re.split(r"&&|;", command):
        words = shlex.split(part, comments=True)
        if words and os.path.basename(words[0]) == "pallasite":
            calls.append(words)
    return calls


@functools.cache
def _parsers() -> dict:
    from pallasite.server.commands import flags

    return flags.command_parsers()


def _parsed(argv: list[str]) -> None:
    """``argv`` (a `pallasite` command line) through its command's own parser, old spellings translated."""
    from pallasite.server.commands import flags

    name = argv[1]
    assert name in _parsers(), f"`{' '.join(argv)}`: pallasite has no command {name!r}"
    parser = _parsers()[name]
    try:
        parser.parse_args(flags.translate(name, argv[2:]))
    except SystemExit as exit_:
        raise AssertionError(f"`{' '.join(argv)}` does not parse (exit {exit_.code})") from None


# --- without an install ------------------------------------------------------------------------------


def test_a_fence_with_text_after_it_does_not_close_a_block():
    """The README's pre-commit block ended "``` Every error message ...", which closes nothing: the yaml
    block ran on over the next paragraph and the toml block."""
    assert blocks("```yaml\na: 1\n```\ntext\n```toml\nb = 2\n```\n") == [("yaml", ["a: 1"]), ("toml", ["b = 2"])]
    assert blocks("```yaml\na: 1\n``` text\nb\n```\n") == [("yaml", ["a: 1", "``` text", "b"])]
    assert all(not any(line.lstrip().startswith("```") for line in lines)
               for _, lines in blocks(README.read_text(encoding="utf-8")))


def test_commands_are_read_with_where_they_run():
    page = ("```bash\n# on the laptop\n.venv/bin/pip wheel .\nscp x.whl me@vm:\n# on the TPU VM: set up\npython3 -m "
            "venv ~/venv\n# from the laptop:\n.venv/bin/pallasite time k.py  # a comment\n```\n```toml\nx = 1\n```\n")
    assert commands(page) == [Command(".venv/bin/pip wheel ."), Command("scp x.whl me@vm:"),
                              Command("python3 -m venv ~/venv", "vm"), Command(".venv/bin/pallasite time k.py  # a comment")]
    assert pallasite_calls("a && .venv/bin/pallasite check examples/ # x") == [[".venv/bin/pallasite", "check", "examples/"]]


def test_every_pallasite_command_starts_with_a_path_the_readme_made_and_parses():
    """The newcomer's first command installs into `.venv` and calls `.venv/bin/pallasite`; a later bare
    `pallasite` is "command not found" on their machine (the README's `pallasite fix` line was)."""
    calls = [argv for c in commands(README.read_text(encoding="utf-8")) for argv in pallasite_calls(c.text)]
    assert len(calls) >= 4, calls
    bare = [" ".join(argv) for argv in calls if argv[0] not in (".venv/bin/pallasite", "~/venv/bin/pallasite")]
    assert not bare, f"these README commands call a `pallasite` no earlier command put on PATH: {bare}"
    for argv in calls:
        _parsed(argv)


def test_a_bare_pallasite_or_an_unknown_flag_is_caught():
    assert [a[0] for a in pallasite_calls("pallasite fix k.py")] == ["pallasite"]
    with pytest.raises(AssertionError, match="does not parse"):
        _parsed(["pallasite", "check", "--chip", "v5e", "k.py"])


def test_the_readme_configuration_is_a_valid_one(tmp_path):
    """The `[tool.pallasite]` example: a bad key in it would now stop every command (exit 2)."""
    from pallasite.server.settings import read_project

    (toml,) = [lines for lang, lines in blocks(README.read_text(encoding="utf-8")) if lang == "toml"]
    (tmp_path / "pyproject.toml").write_text("\n".join(toml) + "\n")
    read = read_project(tmp_path)
    assert read.source is not None and read.problems == () and read.settings.target != "", read.problems


# --- the commands, run ---------------------------------------------------------------------------------


def _copy_checkout(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def _overlay(top: Path) -> Path:
    """The project venv's packages, less pallasite, pip, pytest (whose script the README calls) and the
    build's tools: what PYTHONPATH shows the fresh venvs. Hard links in a folder named site-packages,
    so a confined worker's sandbox (runner/isolation/sandbox.readable_paths) binds it and finds real files there;
    made beside the venv's own when this folder is on another file system."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p, "jax").exists()))
    # "__editable__" alone: its finder "__editable___pallasite_0_1_0_finder.py" has no word boundary there, and
    # linked into PYTHONPATH it shadowed the fresh venv's own finder (the copy ran this checkout's code)
    skip = re.compile(r"__editable__|(pallasite|pip|_distutils_hack|distutils-precedence|setuptools|pkg_resources|"
                      r"wheel)\b|(pytest|_pytest|py\.py)$|pytest-\d", re.IGNORECASE)  # pytest's plugins stay
    if os.stat(top).st_dev != os.stat(site).st_dev:
        top = Path(tempfile.mkdtemp(prefix="newcomer-deps-", dir=site.parent))
    dest = top / "deps" / "site-packages"
    dest.mkdir(parents=True)
    for entry in site.iterdir():
        if skip.match(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, dest / entry.name, copy_function=os.link, symlinks=True)
        else:
            os.link(entry, dest / entry.name, follow_symlinks=False)
    return dest


STAND_INS = {
    # the TPU VM, reached by ssh: the remote command runs in the VM's HOME on this machine
    "ssh": """#!/bin/bash
while [[ $# -gt 0 && $1 == -* ]]; do case $1 in -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2;; *) shift;; esac; done
shift  # the host
cd "$NEWCOMER_VM_HOME" && HOME="$NEWCOMER_VM_HOME" exec bash -c "$*"
""",
    # scp FILE... host:[DEST]: into the VM's HOME
    "scp": """#!/bin/bash
args=("$@"); dest=${args[-1]#*:}; unset 'args[-1]'
cp "${args[@]}" "$NEWCOMER_VM_HOME/$dest"
""",
}


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    top = tmp_path_factory.mktemp("newcomer")
    checkout, laptop, vm, shims = top / "pallasite", top / "laptop-home", top / "vm-home", top / "bin"
    for folder in (checkout, laptop, vm, shims):
        folder.mkdir()
    _copy_checkout(checkout)
    deps = _overlay(top)
    python = getattr(sys, "_base_executable", None) or sys.executable
    for name in ("python3", "python"):
        (shims / name).symlink_to(python)
    for name, script in STAND_INS.items():
        (shims / name).write_text(script)
        (shims / name).chmod((shims / name).stat().st_mode | stat.S_IXUSR)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT))]
    env = {**os.environ, "PATH": os.pathsep.join([str(shims), *path]), "PYTHONPATH": str(deps),
           "NEWCOMER_VM_HOME": str(vm), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PYTEST_ADDOPTS": "--collect-only -q -p no:cacheprovider"}
    for name in ("VIRTUAL_ENV", "PYTHONHOME", "PALLASITE_CHECKOUT"):
        env.pop(name, None)
    yield checkout, laptop, vm, env
    if not deps.is_relative_to(top):  # made beside the project's venv: removed
        shutil.rmtree(deps.parent.parent, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # two installs, the suite's collection, a fix, a wheel, a VM's install, a timing over ssh
def test_every_readme_command_runs_verbatim_in_order(newcomer):
    checkout, laptop, vm, env = newcomer
    ran = []
    for command in commands(README.read_text(encoding="utf-8")):
        need = next((why for word, why in NEEDS.items() if word in command.text), None)
        if need is not None:  # elsewhere: its arguments, parsed
            for argv in pallasite_calls(command.text):
                _parsed(argv)
            ran.append(f"parsed only (needs {need}): {command.text}")
            print(f"parsed only (it needs {need}): {command.text}", flush=True)
            continue
        home = vm if command.where == "vm" else laptop
        started = time.monotonic()
        done = subprocess.run(["bash", "-c", command.text], cwd=vm if command.where == "vm" else checkout,
                              env={**env, "HOME": str(home)}, capture_output=True, text=True, timeout=900)
        expected = _expected(command.text)
        assert done.returncode == expected[0] and expected[1] in done.stdout, (
            f"README command exited {done.returncode} on the {command.where} (expected {expected[0]}): "
            f"{command.text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        ran.append(command.text)
        print(f"{time.monotonic() - started:6.1f} s  on the {command.where}: {command.text}", flush=True)
    assert any("pytest" in r for r in ran) and any("--backend ssh" in r for r in ran), ran


def _expected(command: str) -> tuple[int, str]:
    """The exit status the README says the command gives, and a text its output must hold: `check
    examples/` exits 1 (its examples hold deliberate mistakes: an exit 1 of the install before it
    would not print the check's summary); every other command 0."""
    if re.search(r"pallasite check examples/?$", command):
        return 1, "file(s) checked for"
    return 0, ""
