"""The model side of a search node: one optimize iteration asked of an LLM provider.

``provider_proposer(provider, chip)`` returns the ``propose`` seam of agents/search.py: for a mutation
it sends the parent's code and plan with the strategy to apply; for a crossover, both parents'
plans and code, asking for one kernel that combines their ideas. The reply is JSON
``{"plan": "...", "source": "<the whole new file>"}`` (structured output is requested). The file's
text is the only thing from the machine that is sent; ``keys.redact`` is applied before sending.
When eng-18's optimize loop lands, its one-iteration function can stand in for this one: the
seam is the same (parents + strategy in, source + plan out).
"""

from __future__ import annotations

import json
from typing import Any

from . import keys
from .providers import ModelRequest
from .search import Proposal, ProposeRequest

SYSTEM = """\
You optimize JAX Pallas kernels for Google TPUs. You are given a kernel file (with its reference() \
and example_inputs()) and a strategy. Return the whole new file, computing exactly what the reference \
computes, faster on the target TPU. Keep example_inputs(), reference() and the entry function's name \
and signature; use pallas_call for the work; never call the reference from the kernel.
Answer with JSON only: {"plan": "<the optimization plan, a few sentences>", "source": "<the whole file>"}."""

SCHEMA = {"type": "object", "properties": {"plan": {"type": "string"}, "source": {"type": "string"}},
          "required": ["plan", "source"]}


def prompt(req: ProposeRequest, chip: str) -> str:
    if req.op == "crossover":
        a, b = req.parents
        parts = [f"Target chip: TPU {chip}. Combine the ideas of two kernels that both pass; keep what makes "
                 f"each fast.", f"Kernel A ({a.speedup:.2f}x), plan: {a.plan}\n```python\n{a.source}\n```",
                 f"Kernel B ({b.speedup:.2f}x), plan: {b.plan}\n```python\n{b.source}\n```"]
    else:
        p = req.parents[0]
        speed = f"{p.speedup:.2f}x the reference ({p.provenance})" if p.speedup is not None else "not measured"
        parts = [f"Target chip: TPU {chip}. Strategy to apply: {req.strategy}",
                 f"Current kernel ({speed}), plan so far: {p.plan}\n```python\n{p.source}\n```"]
    return keys.redact("\n\n".join(parts))


def parse(text: str) -> Proposal:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return Proposal("", "", f"the model's reply is not JSON ({exc.msg} at {exc.pos})")
    if not isinstance(data, dict) or not isinstance(data.get("source"), str):
        return Proposal("", "", "the model's reply has no 'source' string")
    return Proposal(data["source"], str(data.get("plan", "")))


def provider_proposer(provider: Any, chip: str, *, timeout_s: float = 300.0, on_call: Any = None):
    async def propose(req: ProposeRequest) -> Proposal:
        request = ModelRequest(system=SYSTEM, prompt=prompt(req, chip), schema=SCHEMA, schema_name="kernel",
                               timeout_s=timeout_s)
        reply = await provider.complete(request)
        if on_call:
            on_call(req, request, reply)
        return parse(reply.text)

    return propose
