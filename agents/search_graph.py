"""The search graph: every node is one optimize attempt with what it produced and how it measured.

A node holds the source it proposes, the plan behind it, the strategy applied (or "crossover"),
its parents, whether it compiled and passed the frozen tests, its speedup against the root (the
starting kernel, timed by the same method; ``None`` when it failed or has no timing), and where
that number came from (``provenance``: "device (TPU v5 lite)" or "estimate (v5e)" — never CPU
timings). When the node was an optimize iteration it also keeps the loop's verdict and phases.
The root is the starting kernel itself at 1.0x.

Nodes have deterministic ids (``t2.d3`` for a trajectory step, ``b1.3`` for a beam child, ``g2.4``
for an evolutionary child), so a search replayed with the same seed asks for the same nodes in the
same order; that is what makes a search resumable (finished nodes are read back, the rest are run).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..analysis.verdict import Verdict

NODE_STATUSES = ("root", "improved", "correct", "unmeasured", "wrong", "not verified", "failed")


@dataclass(frozen=True)
class SearchNode:
    id: str
    parents: tuple[str, ...]
    depth: int
    op: str  # "root" | "optimize" | "mutate" | "crossover"
    strategy: str | None
    source: str
    plan: str
    compiled: bool | None  # None: not checked (the root of an iterate search is only measured)
    correct: bool | None
    speedup: float | None  # against the root (the starting kernel); None when not correct or not measured
    provenance: str  # "device (<chip>)" | "estimate (<chip>)" | "reference"
    error: str | None = None
    trajectory: int | None = None
    order: int = 0  # position in the search's deterministic schedule
    # when the node was an optimize iteration (agents/search_iterate.py): what the loop recorded
    verdict: str = ""  # the loop's word: "valid", a Verdict status, "not measured", "no candidate", "model error"
    phases: tuple[dict, ...] = ()  # {"phase", "ok", "summary"} per phase run
    time_s: float | None = None  # the time behind ``speedup`` (device median or estimate; see provenance)
    tokens: int = 0
    result: Verdict | None = None  # the node's verdict as its phases made it (the root: its timing only)

    @property
    def ok(self) -> bool:
        """Usable as a parent: correct (the root: the starting kernel, never compiled or tested by the
        search, is the baseline), with a measured (or estimated) speedup."""
        return bool(self.correct or self.op == "root") and self.speedup is not None

    @property
    def status(self) -> str:
        if self.op == "root":
            return "root"
        if not self.compiled:
            return "failed"
        if self.correct and self.speedup is None:
            return "unmeasured"  # passed the tests but has no usable timing: it never ranks
        if not self.ok:
            return "not verified" if self.result is not None and self.result.correct is None else "wrong"
        return "improved" if self.speedup > 1.0 else "correct"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["parents"] = list(self.parents)
        data["status"] = self.status
        data["result"] = self.result.to_json() if self.result else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SearchNode":
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["parents"] = tuple(fields.get("parents") or ())
        fields["phases"] = tuple(fields.get("phases") or ())
        fields["result"] = Verdict.from_json(fields["result"]) if fields.get("result") else None
        return cls(**fields)


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
        """The fastest correct node (the root when nothing beat it); ties go to the earlier node."""
        good = [n for n in self.nodes if n.ok]
        return max(good, key=lambda n: (n.speedup, -n.order)) if good else self.root

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
        return [(n.id, n.parents, n.strategy, n.source, n.correct, n.speedup) for n in self.nodes]

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

