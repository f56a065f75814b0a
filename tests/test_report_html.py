"""The HTML reports: self-contained, with the graph and plots, rendered by headless Chromium without
console errors (skipped with a reason where Debian's `chromium` is not installed)."""

import asyncio
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pallasite.agents.eval_metrics import TaskOutcome, summarize
from pallasite.agents.search import SearchOptions, search
from pallasite.server.reports.report_html import eval_html, search_html

from eval_cases import case
from test_search import ROOT, STRATS, Landscape

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def graph():
    land = Landscape()
    g = asyncio.run(search(ROOT, SearchOptions(algo="beam", width=2, depth=2, branches=3, strategies=STRATS, seed=3),
                           land.propose, land.evaluate, provenance="device (fake TPU)"))
    return g.to_json()


@pytest.fixture(scope="module")
def summaries():
    tasks = [TaskOutcome("matmul", (case(True, True, 2.5),)), TaskOutcome("softmax", (case(True, True, 0.8),)),
             TaskOutcome("conv", (case(False, False, None, "E2003 unaligned"),))]
    return [summarize("hand-tuned", tasks, provenance="estimate (v5e)").to_json()]


def _self_contained(page: str) -> None:
    assert "<script" not in page and "<link" not in page
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page), "the report must not fetch anything"


def test_search_report_has_graph_progress_and_provenance(graph):
    page = search_html(graph)
    _self_contained(page)
    assert page.count("<svg") == 2 and 'data-plot="graph"' in page and 'data-plot="progress"' in page
    assert "device (fake TPU)" in page and "best path" in page
    for node in graph["nodes"]:
        assert f"<td>{node['id']}</td>" in page
    # failed nodes appear with their status, the best node is named
    assert 'class="status-not-compiled"' in page and f"best node <b>{graph['best']}</b>" in page


def test_eval_report_has_fast_p_and_task_tables(summaries):
    page = eval_html(summaries)
    _self_contained(page)
    assert 'data-plot="fast_p"' in page and "estimate (v5e)" in page
    assert "<td>softmax</td>" in page and "E2003 unaligned" in page
    assert "<td>1.357x</td>" in page  # geomean of 2.5, 1.0 (0.8 floored), 1.0


def _chromium(args, tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def console_errors(stderr: str) -> list[str]:
    return [l for l in stderr.splitlines() if ":CONSOLE" in l]


@pytest.mark.skipif(not CHROMIUM, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_console_errors_are_detected(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFn();</script></body></html>")
    out = _chromium(["--dump-dom", bad.as_uri()], tmp_path)
    assert console_errors(out.stderr), "the console check would not see an error"


@pytest.mark.skipif(not CHROMIUM, reason="Debian's chromium is not installed (apt-get install -y chromium)")
@pytest.mark.parametrize("kind", ["search", "eval"])
def test_report_renders_in_headless_chromium(kind, graph, summaries, tmp_path):
    page = search_html(graph) if kind == "search" else eval_html(summaries)
    path = tmp_path / f"{kind}.html"
    path.write_text(page)
    shot = tmp_path / f"{kind}.png"
    out = _chromium([f"--screenshot={shot}", "--window-size=1280,1600", path.as_uri()], tmp_path)
    assert shot.exists() and shot.stat().st_size > 10_000, out.stderr[-2000:]
    assert not console_errors(out.stderr)
    dom = _chromium(["--dump-dom", path.as_uri()], tmp_path)
    assert not console_errors(dom.stderr)
    plots = re.findall(r'data-plot="(\w+)"', dom.stdout)
    assert plots == (["graph", "progress"] if kind == "search" else ["fast_p"])
    assert dom.stdout.count("<svg") == len(plots)
    keep = os.environ.get("PALLASITE_REPORT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


@pytest.fixture(scope="module")
def comparison():
    """Two agent methods over the same three tasks, as `pallasite eval --method zero-shot --method beam` writes them."""
    zero = [TaskOutcome("matmul", (case(True, False, None, "wrong_result"),)),
            TaskOutcome("softmax", (case(False, False, None, "E2002 misaligned"),)),
            TaskOutcome("conv", (case(False, False, None, candidate=False),))]
    beam = [TaskOutcome("matmul", (case(True, True, 2.5),)), TaskOutcome("softmax", (case(True, True, 1.2),)),
            TaskOutcome("conv", (case(True, False, None, "wrong_result"),))]
    out = []
    for name, label, tasks, usage in (("zero-shot", "zero-shot best-of-100", zero, (120_000, 100, 0.31)),
                                      ("beam", "beam width 3 depth 3 branches 2", beam, (410_000, 28, None))):
        s = summarize(name, tasks, provenance="estimate (v5e)").to_json()
        s.update(label=label, params={"knob": 1}, agent_usage={"total_tokens": usage[0], "calls": usage[1],
                                                               "cost_usd": usage[2], "candidates": usage[1],
                                                               "agent_seconds": 12.0})
        out.append(s)
    return out


def test_comparison_report_puts_methods_side_by_side_with_their_cost(comparison):
    page = eval_html(comparison)
    _self_contained(page)
    side = page[page.index('data-table="side-by-side"'):page.index('data-table="cost"')]
    assert "<th>zero-shot best-of-100</th><th>beam width 3 depth 3 branches 2</th>" in side
    assert "<tr><td>matmul</td><td>compiled, wrong</td><td>2.50x</td></tr>" in side
    assert "<tr><td>conv</td><td>no candidate</td><td>compiled, wrong</td></tr>" in side
    cost = page[page.index('data-table="cost"'):]
    assert "<td>120000</td><td>100</td><td>$0.31</td>" in cost and "<td>410000</td><td>28</td><td>-</td>" in cost
    # the fast_p curves of both methods are overlaid in the one plot (a legend entry each)
    assert page.count('data-plot="fast_p"') == 1 and "zero-shot (estimate (v5e))" in page and "beam (estimate" in page


@pytest.mark.skipif(not CHROMIUM, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_comparison_report_renders_in_headless_chromium(comparison, tmp_path):
    path = tmp_path / "compare.html"
    path.write_text(eval_html(comparison, title="pallasite eval: zero-shot vs beam"))
    shot = tmp_path / "compare.png"
    out = _chromium([f"--screenshot={shot}", "--window-size=1280,2000", path.as_uri()], tmp_path)
    assert shot.exists() and shot.stat().st_size > 10_000, out.stderr[-2000:]
    assert not console_errors(out.stderr)
    dom = _chromium(["--dump-dom", path.as_uri()], tmp_path)
    assert not console_errors(dom.stderr)
    assert re.findall(r'data-table="([\w-]+)"', dom.stdout) == ["side-by-side", "cost"]


def test_side_by_side_says_not_verified_rather_than_incorrect(comparison):
    """A candidate whose guarded test could not finish is "compiled, not verified", never "compiled, wrong"
    (the per-task table's correct column said "no" for it)."""
    from pallasite.server.commands.cmd_eval import side_by_side

    rows = [summarize("beam", [TaskOutcome("conv", (case(True, False, None, "worker crashed", verified=False),))],
                      provenance="estimate (v5e)").to_json()] * 2
    page = eval_html(rows)
    assert "<tr><td>conv</td><td>compiled, not verified</td><td>compiled, not verified</td></tr>" in page
    assert "<td>compiled, not verified</td><td>yes</td><td>not verified</td>" in page
    text = side_by_side(rows)
    assert "not verified" in text.splitlines()[-1] and "wrong" not in text.splitlines()[-1]
