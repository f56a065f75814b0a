"""The search graph: every node is one optimize attempt with what it produced and how it measured.

A node holds the source it proposes, the plan behind it, the strategy applied (or "crossover"),
its parents, its ``Verdict`` as the phases made it (analysis/verdict.py: compiled, correct / wrong /
not verified, the timing: the node's status is the verdict's, in the one vocabulary), its speedup
against the root (the starting kernel, timed by the same method; ``None`` when it failed or has no
timing), and the method (``provenance``: "device (TPU v5 lite)" or "estimate (<model>, v5e)" —
never CPU timings). When the node was an optimize iteration it also keeps the loop's word and
phases. The root is the starting kernel itself at 1.0x: timed, never compiled or tested by the
search, so it is the baseline rather than a judged candidate.

Nodes have deterministic ids (``t2.d3`` for a trajectory step, ``b1.3`` for a beam child, ``g2.4``
for an evolutionary child), so a search replayed with the same seed asks for the same nodes in the
same order; that is what makes a search resumable (finished nodes are read back, the rest are run).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..analysis.verdict import Verdict, rank, self_judged

ROOT_STATUS = "root"  # the starting kernel: the baseline, timed but never compiled or tested by the search
ROOT_TEXT = "root: the starting kernel, the baseline (timed, never judged)"


@dataclass(frozen=True)
class SearchNode:
    """One node. ``verdict`` (analysis/verdict.Verdict) is the only carrier of compiled / correct / not
    verified / timing; ``compiled``, ``correct``, ``time_s`` and ``status`` read it. ``speedup`` is
    ``speedup(root timing, node timing)``; ``loop_word`` is the optimize loop's own word for how the
    iteration ended ("valid", "not measured", "model error", "no candidate"), shown beside the status."""

    id: str
    parents: tuple[str, ...]
    depth: int
    op: str  # "root" | "optimize" | "mutate" | "crossover"
    strategy: str | None
    source: str
    plan: str
    verdict: Verdict  # the root: its timing only (never compiled or tested by the search)
    speedup: float | None  # against the root (the starting kernel); None when not correct or not measured
    provenance: str  # the method: "device (<chip>)" | "estimate (<model>, <chip>)"
    error: str | None = None
    trajectory: int | None = None
    order: int = 0  # position in the search's deterministic schedule
    loop_word: str = ""  # the optimize iteration's end ("valid", "not measured", "model error", ...)
    phases: tuple[dict, ...] = ()  # {"phase", "ok", "summary"} per phase run
    tokens: int = 0

    @property
    def compiled(self) -> bool | None:
        return None if self.op == "root" else self.verdict.compiled

    @property
    def correct(self) -> bool | None:
        return None if self.op == "root" else self.verdict.correct

    @property
    def time_s(self) -> float | None:
        """The time behind ``speedup`` (the verdict's timing)."""
        return self.verdict.timing.seconds if self.verdict.timing is not None else None

    @property
    def ok(self) -> bool:
        """Usable as a parent: compiled and correct (the root: the starting kernel, never compiled or tested
        by the search, is the baseline), with a speedup by the run's method; a node judged by its own process
        (analysis/verdict.self_judged) never ranks."""
        if self.op != "root" and (not self.verdict.passed or self_judged(self.verdict)):
            return False
        return self.speedup is not None

    @property
    def improved(self) -> bool:
        """Compiled, correct and faster than the root by the same method."""
        return self.op != "root" and self.ok and self.speedup > 1.0

    @property
    def status(self) -> str:
        """The one vocabulary (analysis/verdict.STATUSES); the root is the baseline, not judged."""
        return ROOT_STATUS if self.op == "root" else self.verdict.status()

    def speed_text(self) -> str:
        """The node's speed against the root, named: "1.30x vs the starting kernel (improved)", or why none."""
        if self.speedup is not None:
            what = "the baseline" if self.op == "root" else "improved" if self.improved else "not faster"
            return f"{self.speedup:.2f}x vs the starting kernel ({what})"
        if self.op != "root" and self.verdict.passed:
            return "not timed" + (f": {self.error}" if self.error else "")
        return "-"

    def text(self) -> str:
        """The status with its why, then the speed: what a table row and the HTML report say."""
        head = ROOT_TEXT if self.op == "root" else self.verdict.text()
        return f"{head}; {self.speed_text()}" if self.speed_text() != "-" else head

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["parents"] = list(self.parents)
        data["verdict"] = self.verdict.to_json()  # the verdict once; the keys below are its rendering
        data["status"], data["improved"], data["text"] = self.status, self.improved, self.text()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SearchNode":
        """A node as stored; a node of the older form (``compiled``, ``correct``, ``time_s`` beside a
        ``result`` Verdict, the loop word under ``verdict``) is read into the Verdict."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["parents"] = tuple(fields.get("parents") or ())
        fields["phases"] = tuple(fields.get("phases") or ())
        fields["verdict"] = _stored_verdict(data)
        if "loop_word" not in data and isinstance(data.get("verdict"), str):
            fields["loop_word"] = data["verdict"]
        return cls(**fields)


def _stored_verdict(data: dict[str, Any]) -> Verdict:
    if isinstance(data.get("verdict"), dict):
        return Verdict.from_json(data["verdict"])
    from .optimize import timing_for  # an older node kept its time and method label beside the answers

    timing = timing_for(data.get("time_s"), data.get("provenance") or "")
    old = data.get("result")
    if isinstance(old, dict):
        v = Verdict.from_json(old)
        return v if v.timing is not None or timing is None else Verdict(v.compile, v.test, timing, v.candidate,
                                                                         v.no_candidate_why)
    if data.get("op") == "root":  # stored compiled and correct though never judged: only its timing is kept
        return Verdict(timing=timing)
    return Verdict.of(data.get("compiled"), data.get("correct"), timing, data.get("error") or "")


@dataclass
class SearchGraph:
    """The nodes of one search in schedule order, plus what the search was asked to do."""

    algo: str
    seed: int
    params: dict[str, Any]
    provenance: str
    nodes: list[SearchNode] = field(default_factory=list)
    stopped: str = ""  # why the search ended: "depth", "budget", "target", "no_survivor", "generations"

    def add(self, node: SearchNode) -> None:
        self.nodes.append(node)

    def node(self, node_id: str) -> SearchNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    @property
    def root(self) -> SearchNode:
        return self.nodes[0]

    def best(self) -> SearchNode:
        """The first node in the one ranking (analysis/verdict.rank) against the root when it beats the root,
        else the root; ties go to the earlier node."""
        nodes = sorted((n for n in self.nodes if n.op != "root"), key=lambda n: n.order)
        ranking = rank(self.root.verdict.timing, [(n.id, n.verdict) for n in nodes], baseline_name="the root",
                       given={n.id: n.speedup for n in nodes}, method=self.provenance)
        return self.node(ranking.winner.name) if ranking.winner.name is not None else self.root

    def best_path(self) -> list[str]:
        """Root .. best, following each node's first parent."""
        path, node = [], self.best()
        while True:
            path.append(node.id)
            if not node.parents:
                break
            node = self.node(node.parents[0])
        return path[::-1]

    def signature(self) -> list[tuple]:
        """What 'the same graph' means: ids, parents, strategies, sources and results, in order."""
        return [(n.id, n.parents, n.strategy, n.source, n.status, n.speedup) for n in self.nodes]

    def to_json(self) -> dict[str, Any]:
        return {"algo": self.algo, "seed": self.seed, "params": self.params, "provenance": self.provenance,
                "stopped": self.stopped, "best": self.best().id, "best_path": self.best_path(),
                "nodes": [n.to_json() for n in self.nodes]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SearchGraph":
        g = cls(data["algo"], int(data["seed"]), dict(data["params"]), data["provenance"])
        g.nodes = [SearchNode.from_json(n) for n in data["nodes"]]
        g.stopped = data.get("stopped", "")
        return g

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1)

