"""The docs' install lines, executed as written: pallasite is on no package index, so every place that
tells a user how to install it must build it from the checkout (a wheel, a path, an editable install).

Each markdown page's install lines (in its code blocks: `python3 -m venv`, `pip install`, `pip wheel`,
the `scp` of a wheel) are taken from the page, so a changed page is what is tested, and run in order
in a fresh venv, in a copy of the checkout, with HOME a fresh folder. Dependencies come from the
project's own venv (its site-packages, less pallasite itself and pip, on PYTHONPATH) so jax is not
downloaded again; pallasite itself comes from the wheel or path the page names. Then `pallasite
--help` and `pallasite check examples/add.py` must run from that venv, importing pallasite from it.
Marked slow (about a minute and a half): `.ci/run` runs the slow tests."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
         *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "editor_clients").glob("*/README.md"))]
CHECKOUT_PLACEHOLDER = "/path/to/pallasite"

_FENCE = re.compile(r"^\s*```")
_INSTALL = re.compile(r"(^|\s)(pip|python3? -m pip|\S*/bin/pip|\S*/bin/python3? -m pip) (install|wheel)\b")
_VENV = re.compile(r"(^|\s)python3? -m venv\b")
_SCP = re.compile(r"\bscp\b.*\.whl")


def _code_lines(text: str) -> list[str]:
    """The lines of the page's fenced code blocks, in order."""
    lines, inside = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
        elif inside:
            lines.append(line.strip())
    return lines


def install_steps(text: str) -> list[str]:
    """The install commands of a page's code blocks: each `&&` part that makes a venv, runs pip
    install/wheel or copies a wheel; comments dropped."""
    steps = []
    for line in _code_lines(text):
        line = re.split(r"\s+#\s", " " + line, maxsplit=1)[0].strip()
        for part in (p.strip() for p in line.split("&&")):
            if _INSTALL.search(part) or _VENV.search(part) or _SCP.search(part):
                steps.append(part)
    return steps


def _index_installs(text: str) -> list[str]:
    """`pip install` commands anywhere on the page (code blocks and inline code) that ask an index
    for pallasite: a requirement named pallasite that is not a path, a wheel or the checkout."""
    found = []
    for match in re.finditer(r"pip install ([^`\n]*)", text):
        for word in match.group(1).split(" #")[0].split():
            if re.fullmatch(r"pallasite(\[[\w,]*\])?([=<>~!].*)?", word.strip("'\"")):
                found.append(match.group(0))
    return found


@pytest.mark.parametrize("page", PAGES)
def test_no_page_installs_pallasite_from_an_index(page):
    assert not _index_installs((ROOT / page).read_text(encoding="utf-8")), \
        f"{page}: pallasite is on no package index; install it from the checkout, a path or its wheel"


def test_the_index_check_catches_the_old_lines():
    assert _index_installs("python -m pip install pallasite            # or")
    assert _index_installs("~/venv/bin/pip install 'pallasite[tpu]'")
    assert _index_installs("`pip install 'pallasite[agents]'`")
    assert not _index_installs("pip install -e '.[agents]' and pip install '/path/to/pallasite[tpu]'")


def test_install_steps_are_read_from_the_page():
    page = "```bash\n.venv/bin/pip wheel --no-deps --wheel-dir dist .   # a wheel\n" \
           "python3 -m venv ~/venv && ~/venv/bin/pip install \"$HOME/x.whl[tpu]\"\nls\n```\n`pip install x` inline\n"
    assert install_steps(page) == [".venv/bin/pip wheel --no-deps --wheel-dir dist .", "python3 -m venv ~/venv",
                                   '~/venv/bin/pip install "$HOME/x.whl[tpu]"']


# --- executing them --------------------------------------------------------------------------------

def _base_python() -> str:
    return getattr(sys, "_base_executable", None) or sys.executable


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A copy of the checkout (tracked and new files), and an overlay of the project venv's packages
    without pallasite and pip (the dependencies, so nothing large is downloaded)."""
    top = tmp_path_factory.mktemp("install")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    checkout = top / "pallasite"
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, checkout / name)
    overlay = top / "deps"
    overlay.mkdir()
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p, "jax").exists()))
    skip = re.compile(r"(pallasite|__editable__|pip|_distutils_hack|distutils-precedence|setuptools|pkg_resources)\b")
    for entry in site.iterdir():
        if not skip.match(entry.name):
            (overlay / entry.name).symlink_to(entry)
    shims = top / "shims"  # `python3`/`python` name the interpreter the project venv was made from
    shims.mkdir()
    for name in ("python3", "python"):
        (shims / name).symlink_to(_base_python())
    return top, checkout, overlay, shims


def _run_page(page: str, sandbox) -> tuple[Path, Path]:
    top, checkout, overlay, shims = sandbox
    steps = install_steps((ROOT / page).read_text(encoding="utf-8"))
    home = top / f"home-{Path(page).parent.name or 'root'}-{Path(page).stem}"
    venv = home / "venv"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(overlay), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PATH": f"{venv / 'bin'}:{shims}:{os.environ.get('PATH', '')}"}
    env.pop("VIRTUAL_ENV", None)
    # the environment a page installs into before it makes one: "the Python environment of your project",
    # the laptop's checkout venv (.venv) a wheel is built with
    subprocess.run([_base_python(), "-m", "venv", str(venv)], check=True, env=env)
    for step in steps:
        command = step.replace(CHECKOUT_PLACEHOLDER, str(checkout))
        command = re.sub(r"~/venv\b|(?<![\w/])\.venv\b", str(venv), command)
        if _SCP.search(command):  # the copy to the TPU host: the host is this HOME
            wheels = [w for w in shlex.split(command) if w.endswith(".whl")]
            command = f"cp {' '.join(wheels)} \"$HOME/\""
        elif re.match(r"pip ", command):
            command = f"{venv}/bin/{command}"
        done = subprocess.run(["bash", "-c", command], cwd=checkout, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{page}: `{step}` failed ({command}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return venv, checkout


PAGES_WITH_STEPS = [p for p in PAGES if any(_INSTALL.search(s) for s in install_steps((ROOT / p).read_text()))]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_STEPS)
def test_the_page_installs_a_working_pallasite(page, sandbox):
    venv, checkout = _run_page(page, sandbox)
    env = {**os.environ, "PYTHONPATH": str(sandbox[2])}
    env.pop("VIRTUAL_ENV", None)
    where = subprocess.run([venv / "bin/python", "-c", "import pallasite; print(pallasite.__file__)"],
                           capture_output=True, text=True, env=env, cwd=sandbox[0])
    assert where.returncode == 0, where.stderr
    assert not where.stdout.startswith(str(ROOT)), f"{page}: pallasite was imported from the checkout under test"
    assert where.stdout.startswith((str(venv), str(checkout))), where.stdout
    helped = subprocess.run([venv / "bin/pallasite", "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "check" in helped.stdout, helped.stderr
    checked = subprocess.run([venv / "bin/pallasite", "check", "examples/add.py"], cwd=checkout,
                             capture_output=True, text=True, env=env, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_page_that_installs_pallasite_is_executed():
    assert {"README.md", "docs/tpu.md", "docs/agents.md", "editor_clients/vscode/README.md",
            "editor_clients/neovim/README.md"} <= set(PAGES_WITH_STEPS), PAGES_WITH_STEPS


def test_no_message_of_the_package_installs_pallasite_from_an_index():
    """What pallasite itself tells a user (a missing SDK, libtpu, Ray, a worker elsewhere) installs what
    exists: jax's tpu extra, ray, the SDKs, pallasite from a checkout or its wheel."""
    said = []
    for folder in ("agents", "analysis", "engine", "knowledge", "runner", "server", "wire", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found = _index_installs(path.read_text(encoding="utf-8"))
            said += [f"{path.relative_to(ROOT)}: {f}" for f in found]
    assert not said, "\n".join(said)


def test_the_editor_clients_never_install_pallasite_from_an_index():
    """The VS Code client's install message and Neovim's :checkhealth advice name the checkout's path (they said
    `python -m pip install pallasite` and `pip install -U pallasite`, which install nothing)."""
    said = []
    for path in sorted((ROOT / "editor_clients").glob("vscode/src/*.ts")) + \
            sorted((ROOT / "editor_clients").glob("neovim/lua/**/*.lua")):
        text = path.read_text(encoding="utf-8")
        for pattern in (r"pip install (-U )?'?pallasite\b(?![/\w-])", r"\$\{pip\} pallasite\b",
                        r"pip install '?pallasite\[", r"-m pip install (-U )?'?pallasite\b(?![/\w-])"):
            said += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in re.finditer(pattern, text)]
    assert not said, "\n".join(said)
