"""Self-contained HTML reports of a search or an evaluation: one file, no server, no network.

Plots are drawn by matplotlib and inlined as SVG (glyphs as paths), so the file opens anywhere,
offline. A search report shows the graph (nodes coloured by status, the best path highlighted),
the speedup over iterations and a table of nodes; an evaluation report shows each method's
metrics, the fast_p curve and a table per task. Every number says where it came from (the
provenance string of the search or evaluation: "estimate (v5e)", "device (TPU v5 lite)").
"""

from __future__ import annotations

import html
import io
from typing import Any, Sequence

# a node's colour: the root, an improved node (compiled, correct and faster than the root), else its
# Verdict's status (analysis/verdict.STATUSES), as the node JSON carries them
STATUS_COLOURS = {"root": "#4c72b0", "improved": "#2ca02c", "compiled, correct": "#8c8c8c",
                  "compiled, not verified": "#bcbd22", "compiled, wrong": "#ff7f0e",
                  "not compiled for the chip": "#9467bd", "not checked": "#17becf", "not compiled": "#d62728",
                  "no candidate": "#7f7f7f"}
BEST = "#e6b000"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3}.prov{color:#555;font-size:12px}.figure svg{max-width:100%;height:auto}
.status-not-compiled,.status-no-candidate{color:#d62728}.status-improved{color:#2ca02c}.status-compiled-wrong{color:#ff7f0e}
.status-compiled-not-verified,.status-not-compiled-for-the-chip,.status-not-checked{color:#8a8a00}
"""


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["svg.hashsalt"] = "pallasite"  # stable ids: the same data gives the same file
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: Any, kind: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    _plt().close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    return f'<div class="figure" data-plot="{kind}">{text}</div>'


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def _fmt(x: float | None, suffix: str = "x") -> str:
    return "-" if x is None else f"{x:.2f}{suffix}"


# ---------------------------------------------------------------------- search


def _layout(nodes: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """x = depth, y = position among the nodes of that depth (in schedule order)."""
    rows: dict[int, int] = {}
    pos = {}
    for n in nodes:
        d = int(n["depth"])
        pos[n["id"]] = (float(d), -float(rows.get(d, 0)))
        rows[d] = rows.get(d, 0) + 1
    return pos


def _key(node: dict) -> str:
    """The node's colour key: "root", "improved", or its Verdict's status."""
    return "root" if node["op"] == "root" else "improved" if node.get("improved") else node["status"]


def graph_svg(graph: dict) -> str:
    plt = _plt()
    nodes = graph["nodes"]
    pos = _layout(nodes)
    best = set(graph["best_path"])
    width = 2 + 1.6 * (max(p[0] for p in pos.values()) + 1)
    height = 1.5 + 0.45 * max(1, max(-p[1] for p in pos.values()) + 1)
    fig, ax = plt.subplots(figsize=(min(width, 16), min(height, 14)))
    for n in nodes:
        for k, parent in enumerate(n["parents"]):
            on_best = n["id"] in best and parent in best and k == 0
            (x0, y0), (x1, y1) = pos[parent], pos[n["id"]]
            ax.plot([x0, x1], [y0, y1], color=BEST if on_best else "#bbbbbb", lw=3 if on_best else 1,
                    ls="--" if k else "-", zorder=1)
    for key, colour in STATUS_COLOURS.items():
        pts = [pos[n["id"]] for n in nodes if _key(n) == key]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=160, c=colour, label=key, zorder=2,
                       edgecolors=[BEST if n["id"] in best else "white" for n in nodes if _key(n) == key],
                       linewidths=2)
    for n in nodes:
        x, y = pos[n["id"]]
        ax.annotate(f'{n["id"]}\n{_fmt(n["speedup"])}', (x, y), xytext=(9, -4), textcoords="offset points",
                    fontsize=7)
    ax.set_xlabel("depth")
    deepest = max(p[0] for p in pos.values())
    ax.set_xlim(-0.3, deepest + 0.7)  # room for the labels right of the deepest nodes, clear of the legend
    ax.set_xticks(range(int(deepest) + 1))
    ax.set_yticks([])
    ax.set_title(f'search graph ({graph["algo"]}); speedups: {graph["provenance"]}; gold: best path', fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, "graph")


def progress_svg(graph: dict) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    xs, best, ys_ok = [], [], []
    running = 1.0
    for i, n in enumerate(graph["nodes"]):
        verdict = n.get("verdict") if isinstance(n.get("verdict"), dict) else {}
        if n["speedup"] is not None and n["op"] != "root" and verdict.get("correct") is True:
            running = max(running, n["speedup"])
            ys_ok.append((i, n["speedup"]))
        xs.append(i)
        best.append(running)
    ax.step(xs, best, where="post", color=BEST, label="best so far")
    if ys_ok:
        ax.scatter([p[0] for p in ys_ok], [p[1] for p in ys_ok], s=14, color="#4c72b0", label="correct node")
    ax.axhline(1.0, color="#999", lw=0.8, ls=":")
    ax.set_xlabel("nodes evaluated")
    ax.set_ylabel(f'speedup vs the starting kernel (root)\n({graph["provenance"]})', fontsize=8)
    ax.legend(fontsize=7)
    return _svg(fig, "progress")


def _judged(row: dict) -> str:
    """Who compared and timed a node's or task's candidate (its verdict's ``judged_by``), or "-"."""
    return (row.get("verdict") if isinstance(row.get("verdict"), dict) else {}).get("judged_by") or "-"


def search_html(graph: dict, title: str = "pallasite search") -> str:
    """The report of one search (``graph``: SearchGraph.to_json())."""
    prov = html.escape(graph["provenance"])
    best = next(n for n in graph["nodes"] if n["id"] == graph["best"])
    head = (f'<p>algorithm <b>{html.escape(graph["algo"])}</b>, seed {graph["seed"]}, parameters '
            f'<code>{html.escape(str(graph["params"]))}</code>; {len(graph["nodes"])} nodes; stopped: '
            f'{html.escape(graph["stopped"] or "-")}.</p>'
            f'<p>best node <b>{html.escape(best["id"])}</b>: {_fmt(best["speedup"])} against the starting kernel (root) '
            f'<span class="prov">({html.escape(best["provenance"])})</span>; path '
            f'{" &rarr; ".join(html.escape(i) for i in graph["best_path"])}.</p>'
            f'<p class="prov">Every speedup is the root\'s time over the node\'s, both by the same method on the '
            f'file\'s example inputs (the root is 1.0x); source of the numbers: {prov}. CPU timings never rank.</p>')
    rows = "".join(
        f'<tr><td>{html.escape(n["id"])}</td><td>{html.escape(", ".join(n["parents"]))}</td>'
        f'<td>{html.escape(n["op"])}</td><td>{html.escape(n["strategy"] or "")}</td>'
        f'<td class="status-{_key(n).replace(",", "").replace(" ", "-")}">{html.escape(n["text"])}</td>'
        f'<td>{html.escape(n.get("loop_word") or "")}</td><td>{_fmt(n["speedup"])}</td>'
        f'<td class="prov">{html.escape(n["provenance"])}</td><td>{html.escape(_judged(n))}</td>'
        f'<td>{html.escape((n.get("error") or "")[:160])}</td></tr>'
        for n in graph["nodes"])
    table = ("<table><tr><th>node</th><th>parents</th><th>op</th><th>strategy</th><th>status</th>"
             f"<th>loop's word</th><th>speedup</th><th>provenance</th><th>judged by</th><th>error</th></tr>{rows}</table>")
    body = (head + "<h2>Search graph</h2>" + graph_svg(graph) + "<h2>Speedup over iterations</h2>"
            + progress_svg(graph) + "<h2>Nodes</h2>" + table)
    return _page(title, body)


# ---------------------------------------------------------------------- evaluation


def fast_p_svg(summaries: Sequence[dict]) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for s in summaries:
        if not s["fast_p"]:  # no speedups (refused): nothing to plot for this method
            continue
        ps = [p for p, _ in s["fast_p"]]
        ax.plot(ps, [v for _, v in s["fast_p"]], marker=".", label=f'{s["method"]} ({s["provenance"]})')
    ax.set_xlabel("p (speedup threshold vs the reference)")
    ax.set_ylabel("fast_p: share of tasks\ncorrect and > p", fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    if any(s["fast_p"] for s in summaries):
        ax.legend(fontsize=7)
    else:
        ax.set_title("no speedups: see each method's reason above", fontsize=8)
    return _svg(fig, "fast_p")


def eval_html(summaries: Sequence[dict], title: str = "pallasite eval") -> str:
    """The report of one evaluation (``summaries``: Summary.to_json() per method)."""
    head = ("<table><tr><th>method</th><th>tasks</th><th>with a candidate</th><th>compiled</th><th>correct</th>"
            "<th>geomean speedup vs the reference (floored at 1.0x)</th><th>improved (&gt;1.05x)</th><th>wall time</th>"
            "<th>provenance</th></tr>" + "".join(
                f'<tr><td>{html.escape(s["method"])}</td><td>{s["tasks"]}</td><td>{s.get("with_candidate", "-")}</td>'
                f'<td>{s["compile_rate"]:.0%}</td><td>{s["correct_rate"]:.0%}</td>'
                f'<td>{format(s["geomean_speedup"], ".3f") + "x" if s["geomean_speedup"] is not None else html.escape(s.get("speedup_refused") or "-")}</td>'
                f'<td>{"-" if s["improved_share"] is None else format(s["improved_share"], ".0%")}</td>'
                f'<td>{_fmt(s.get("wall_s"), " s")}</td>'
                f'<td class="prov">{html.escape(s["provenance"])}</td></tr>' for s in summaries) + "</table>")
    tables = ""
    for s in summaries:
        rows = "".join(
            f'<tr><td>{html.escape(t["task"])}</td><td>{html.escape(t.get("status", ""))}</td>'
            f'<td>{_answer(t, "compiled")}</td>'
            f'<td>{_answer(t, "correct")}</td><td>{_fmt(t["speedup"])}</td><td>{t["scored"]:.2f}x</td>'
            f'<td class="prov">{html.escape(t["provenance"])}</td><td>{html.escape(_judged(t))}</td>'
            f'<td>{html.escape("; ".join(t["errors"])[:200])}</td>'
            f'<td>{html.escape(_plan_line(t))}</td></tr>' for t in s["per_task"])
        tables += (f'<h2>Tasks: {html.escape(s["method"])}</h2><table><tr><th>task</th><th>verdict</th><th>compiled</th>'
                   f'<th>correct</th><th>speedup</th><th>scored</th><th>provenance</th><th>judged by</th><th>errors</th>'
                   f'<th>winner\'s plan (agent methods)</th></tr>'
                   f'{rows}</table>')
    note = ('<p class="prov">Speedups are against each task\'s reference on its listed inputs. A task counts as '
            'compiled/correct only if every input case did; a task without a candidate is failed; failed and slower '
            'tasks count 1.0x in the geomean. A speedup divides two timings of one method (README "What the numbers '
            'mean").</p>')
    return _page(title, "<h2>Summary</h2>" + head + note + "<h2>fast_p</h2>" + fast_p_svg(summaries)
                 + side_by_side_html(summaries) + cost_html(summaries) + tables)


def _plan_line(t: dict) -> str:
    agent = t.get("agent") or {}
    plan = (agent.get("plan") or "").strip().splitlines()
    return (plan[0][:160] + f" ({agent.get('candidates', 0)} candidates)") if plan else ""


# what a compiled / correct cell says for None (not shown, never a pass), by the task's status
NOT_SHOWN = {"compiled, not verified": "not verified", "not compiled for the chip": "not for the chip",
             "not checked": "not checked"}


def _answer(t: dict, what: str) -> str:
    """The row's tri-state answer: True "yes", False "no", None (not shown) what the task's status says
    ("not verified", "not for the chip", "not checked"; analysis/verdict.STATUSES), never "no"."""
    value = t.get(what)
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return NOT_SHOWN.get(t.get("status", ""), "not shown")


def _cell(t: dict) -> str:
    if t["speedup"] is not None:
        return f"{t['speedup']:.2f}x"
    # the verdict's own words (analysis/verdict.STATUSES): "compiled, not verified" is not "compiled, wrong"
    return html.escape(t.get("status") or (t.get("verdict") or {}).get("status") or "-")


def side_by_side_html(summaries: Sequence[dict]) -> str:
    """Each task's speedup (or verdict) per method, one column per method (two or more methods)."""
    if len(summaries) < 2:
        return ""
    heads = "".join(f"<th>{html.escape(s.get('label') or s['method'])}</th>" for s in summaries)
    rows = ""
    for i, t in enumerate(summaries[0]["per_task"]):
        cells = "".join(f'<td>{_cell(s["per_task"][i])}</td>' if i < len(s["per_task"]) else "<td>-</td>"
                        for s in summaries)
        rows += f"<tr><td>{html.escape(t['task'])}</td>{cells}</tr>"
    return (f'<h2>Per task, side by side</h2><table data-table="side-by-side"><tr><th>task</th>{heads}</tr>{rows}'
            "</table>")


def cost_html(summaries: Sequence[dict]) -> str:
    """What each agent method spent: tokens, model calls, cost (when prices are set), candidates, agent time."""
    agents = [s for s in summaries if s.get("agent_usage")]
    if not agents:
        return ""
    rows = ""
    for s in agents:
        u = s["agent_usage"]
        cost = "-" if u.get("cost_usd") is None else f"${u['cost_usd']:.2f}"
        params = ", ".join(f"{k}={v}" for k, v in (s.get("params") or {}).items())
        rows += (f"<tr><td>{html.escape(s.get('label') or s['method'])}</td><td>{u['total_tokens']}</td>"
                 f"<td>{u['calls']}</td><td>{cost}</td><td>{u['candidates']}</td><td>{u['agent_seconds']:.1f} s</td>"
                 f'<td class="prov">{html.escape(params)}</td></tr>')
    return ('<h2>Cost per method</h2><table data-table="cost"><tr><th>method</th><th>tokens</th><th>model calls</th>'
            "<th>cost (configured prices)</th><th>candidates</th><th>agent time</th><th>knobs</th></tr>"
            f"{rows}</table>")
