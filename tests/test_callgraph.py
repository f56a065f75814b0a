"""The call-graph closure (analysis.types.reaching, shared by tier 0 and the worker) and the pallas_call graph
of a file (analysis/callgraph.py)."""

from __future__ import annotations

import pytest

from pallasite.analysis.callgraph import reaching


def test_closure_follows_callers_to_a_fixed_point():
    calls = {"entry": {"helper"}, "helper": {"pallas_call"}, "other": {"print"}, "outer": {"entry"}}
    assert reaching({"helper"}, calls) == {"helper", "entry", "outer"}
    assert reaching(set(), calls) == set()


def test_the_worker_and_tier0_share_the_one_closure():
    pytest.importorskip("jax")
    from pallasite.runner.tasks.tasks_runtime import functions_reaching

    assert functions_reaching is reaching  # one closure (analysis.types), no copy to drift


def test_pallas_call_graph_follows_helpers_and_functions_passed_as_arguments():
    from pallasite.analysis.callgraph import pallas_call_graph
    from pallasite.analysis.source import Source, module_functions

    source = Source(
        "import functools\nimport jax\nfrom jax.experimental import pallas as pl\n\n"
        "def _call(x):\n    return pl.pallas_call(k, out_shape=x)(x)\n\n"
        "def entry(x):\n    return jax.jit(functools.partial(_call))(x)\n\n"
        "def other(x):\n    return print(x)\n")
    reaching, calls = pallas_call_graph(source, module_functions(source))
    assert reaching == {"_call", "entry"}
    assert "_call" in calls["entry"] and calls["other"] == {"print", "x"}  # names, not resolved
