"""One meaning for every command (issue 33): the same checker report and the same worker reply,
put through check, fix, optimize, search, tune and eval, give the same compiled / correct / not verified
words (tune's test is the judge's, answered by the same reply), because each command reads them into the one
Verdict (analysis/verdict.py). The engine and
the worker are stand-ins answering the given report and reply; the phases are the commands' own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pallasite.analysis.types import FileReport, KernelVerdict, Span
from pallasite.analysis.verdict import Verdict
from pallasite.engine.workers.backend import Reply
from pallasite.engine.checker import CheckOptions
from pallasite.wire.messages import TimeResult, Trick

DATA = Path(__file__).parent / "data"
TASK = DATA / "eval" / "add_tuned"


def _report(tier2: str) -> FileReport:
    return FileReport(str(TASK / "optimized.py"), (), (KernelVerdict("add_kernel", Span.point(1),
                                                                     ((0, "ok"), (1, "ok"), (2, tier2))),))


SKIPPED = _report("skipped: libtpu not installed")
COMPILED = _report("ok")
CRASHED = Reply("crashed", message="the worker went over its memory limit of 8192 MiB and was stopped")
REJECTED = Reply("ok", TimeResult("rejected", rejections=(Trick("wrong_result", "max abs error 1.0 > atol 1e-2"),)))
PASSED = Reply("ok", TimeResult("ok", checks={"inputs": [[[8, 128], "float32"]]}, provenance="interpret"))

CASES = {  # (checker report, test reply) -> the one status every command must say
    "tier 2 skipped": (SKIPPED, PASSED, "not compiled for the chip"),
    "could not run": (COMPILED, CRASHED, "compiled, not verified"),
    "wrong": (COMPILED, REJECTED, "compiled, wrong"),
    "correct": (COMPILED, PASSED, "compiled, correct"),
}


class Worker:
    """Answers every test request with ``reply`` and every estimate with a failure (no figure)."""

    def __init__(self, reply):
        self.reply = reply

    async def request(self, params, **kw):
        if type(params).__name__ == "EstimateParams":
            return Reply("crashed", message="no estimate here")
        return self.reply

    async def close(self):
        return None


class Engine:
    def __init__(self, report, reply):
        self.report, self.worker = report, Worker(reply)

    async def check(self, path, options, text=None, **kw):
        return self.report

    def backend(self, options, untrusted=False):
        return self.worker


def _optimize(report, reply) -> Verdict:
    from judging import file_evaluator

    text = (TASK / "optimized.py").read_text()
    ev = file_evaluator(Engine(report, reply), str(TASK / "optimized.py"), text, CheckOptions(target="v5e"), chip="v5e")

    async def go():
        compiled = await ev.compile(text)
        tested = await ev.test(text)
        return Verdict(compiled.compile, tested.test)

    return asyncio.run(go())


def _search_node(report, reply):
    """A search of one node (one optimize iteration from the root): the node as the search made it."""
    from judging import file_evaluator
    from pallasite.agents.llm.providers import ProviderConfig
    from pallasite.agents.llm.providers_scripted import ScriptedProvider
    from pallasite.agents.search import SearchOptions, search
    from pallasite.agents.search_iterate import IterateNodes

    text = (TASK / "optimized.py").read_text()
    ev = file_evaluator(Engine(report, reply), str(TASK / "optimized.py"), text, CheckOptions(target="v5e"), chip="v5e")
    provider = ScriptedProvider(ProviderConfig(name="scripted"), ["Plan: same\nKeep it.", f"```python\n{text}```"])
    nodes = IterateNodes(provider, ev, str(TASK / "optimized.py"), "v5e")
    options = SearchOptions(algo="parallel", trajectories=1, iterations=1, max_nodes=1)
    graph = asyncio.run(search(text, options, None, nodes.evaluate_root, provenance=ev.method, attempt=nodes.attempt))
    return graph.nodes[1]


def _search(report, reply) -> Verdict:
    node = _search_node(report, reply)
    assert node.status == node.verdict.status()  # the node's status is its Verdict's, in the one vocabulary
    return node.verdict


def _eval(report, reply) -> Verdict:
    from pallasite.engine.eval_tasks import discover
    from pallasite.engine.judge import Judge, Trusted

    (task,) = [t for t in discover(str(DATA / "eval")) if t.name == "add_tuned"]
    judge = Judge(Engine(report, reply), CheckOptions(target="v5e"), Trusted.of_task(task))
    text = (TASK / "optimized.py").read_text()
    return Verdict(asyncio.run(judge.compile(text)), asyncio.run(judge.test(text)))


def _tune(report, reply) -> Verdict:
    """Tune's verdict on the first configuration it walks to: the walk's compile (tier 2, ``Judge.compile``) and the
    judge's test (``Judge.test``: the same time reply), as the tune loop makes them."""
    from pallasite.analysis.types import CostEstimate
    from pallasite.analysis.verdict import COST_MODEL
    from pallasite.engine.judge import Judge, Trusted
    from pallasite.engine.tuning.tune import TuneOptions, tune
    from pallasite.runner.tune_ops import chip_spec
    from pallasite.wire.messages import EstimateResult

    path = str(TASK / "optimized.py")
    text = (TASK / "optimized.py").read_text()
    judge = Judge(Engine(report, reply), CheckOptions(target="v5e"), Trusted.of_file(path, text), confined=False)

    async def estimator(configs, kinds):  # the judge's figure of the file as it is (no tunables)
        return EstimateResult("workload", chip_spec("v5e", probe=False), tuple(
            CostEstimate(chip="v5e", config=(), status="ok", seconds=1e-6, bound="memory", model=COST_MODEL)
            for _ in configs or [{}]), judged_by="the judge")

    tuned = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=1), estimator, compiler=judge.compile,
                             tester=judge.test))
    return tuned.verdict(tuned.walk.steps[0].config)


def _tune_compile(report) -> object:
    from pallasite.engine.judge import Judge, Trusted

    path = str(TASK / "optimized.py")
    judge = Judge(Engine(report, None), CheckOptions(target="v5e"), Trusted(path, "text"), confined=False)
    return asyncio.run(judge.compile("text"))  # what tune's compiler is: the run's judge


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_report_and_reply_say_the_same_words_in_every_command(case):
    from pallasite.agents.eval_metrics import CaseOutcome, TaskOutcome, summarize
    from pallasite.agents.fixer import _label

    report, reply, status = CASES[case]
    verdicts = {"optimize": _optimize(report, reply), "search": _search(report, reply), "eval": _eval(report, reply),
                "tune": _tune(report, reply)}
    assert {name: v.status() for name, v in verdicts.items()} == dict.fromkeys(verdicts, status)
    assert len({(v.compiled, v.correct) for v in verdicts.values()}) == 1
    # tune and fix read the same report into the same compile result
    compiled = verdicts["eval"].compile
    assert _tune_compile(report).ok is compiled.ok and _tune_compile(report).text() == compiled.text()
    assert _label(report, (0, 1, 2), "v5e", True).startswith(compiled.text())
    # check reads the same report into the same compile result, and prints it in the same words
    from pallasite.server.reports import report_format

    assert report_format.compiled_for(report, (0, 1, 2), "v5e") == compiled
    line = report_format.file_lines(report, tiers=(0, 1, 2), target="v5e", verbose=True)[-1]
    if compiled.ok:
        assert line.endswith(": compiled for v5e (tiers 0,1,2)")
    else:
        assert f": not compiled for v5e: {compiled.why}" in line
    # eval's row and HTML cell say the verdict's own words
    v = verdicts["eval"]
    row = summarize("files", [TaskOutcome("add_tuned", (CaseOutcome(v, 1.0 if v.passed else None),))],
                    provenance="estimate (v5e)").per_task[0]
    assert row["status"] == status


def test_could_not_run_is_never_wrong_in_optimize_and_search():
    """Optimize and search called a candidate whose test run crashed "incorrect"; eval "not verified"."""
    for verdict in (_optimize(COMPILED, CRASHED), _search(COMPILED, CRASHED)):
        assert verdict.correct is None and "memory limit" in verdict.text()


def test_a_skipped_tier_2_is_not_compiled_in_optimize_and_search():
    """Optimize and search passed a candidate whose tier 2 was skipped as "no errors (tiers 0,1,2)"."""
    for verdict in (_optimize(SKIPPED, PASSED), _search(SKIPPED, PASSED)):
        assert verdict.compiled is None and not verdict.passed
        assert verdict.text().startswith("not compiled for the chip: tier 2 skipped: libtpu not installed")


def test_timing_for_names_chip_7x_as_the_chip_not_the_model():
    from pallasite.agents.optimize import timing_for
    from pallasite.analysis.verdict import COST_MODEL

    t = timing_for(1e-3, f"estimate ({COST_MODEL}, 7x)")
    assert t.device_kind == "7x" and t.model == COST_MODEL
    assert timing_for(1e-3, "estimate (7x)").device_kind == "7x"


def test_a_search_node_of_the_older_form_is_read_into_its_verdict():
    """Stored nodes kept compiled / correct / time_s beside their Verdict (``result``) and the loop's
    word under ``verdict``; the root was stored compiled and correct though never judged."""
    from pallasite.agents.search_graph import SearchNode
    from pallasite.analysis.verdict import COST_MODEL

    common = {"parents": ["root"], "depth": 1, "op": "optimize", "strategy": "s", "source": "x", "plan": "",
              "provenance": f"estimate ({COST_MODEL}, v5e)", "phases": [], "tokens": 3}
    crashed = SearchNode.from_json({**common, "id": "b1.0.0", "compiled": True, "correct": None, "speedup": None,
                                    "error": "crashed", "verdict": "compiled, not verified", "time_s": None,
                                    "status": "not verified",
                                    "result": Verdict.of(True, None, evidence="the worker crashed").to_json()})
    assert crashed.status == "compiled, not verified" and crashed.loop_word == "compiled, not verified"
    wrong = SearchNode.from_json({**common, "id": "b1.0.1", "compiled": True, "correct": False, "speedup": None,
                                  "error": "max abs error 1.0", "verdict": "incorrect", "time_s": None})
    assert wrong.status == "compiled, wrong" and "max abs error" in wrong.text()
    root = SearchNode.from_json({**common, "id": "root", "parents": [], "depth": 0, "op": "root", "compiled": True,
                                 "correct": True, "speedup": 1.0, "time_s": 1e-3, "verdict": ""})
    assert root.compiled is None and root.correct is None and root.status == "root"
    assert root.verdict.timing.seconds == 1e-3 and root.verdict.timing.device_kind == "v5e"
    for node in (crashed, wrong, root):  # the new form serialises the Verdict once and reads back the same
        assert SearchNode.from_json(node.to_json()) == node


def test_a_method_that_raises_is_its_task_s_verdict_not_a_crashed_eval():
    """The eval built ``Verdict(False, False, None, why)`` for a method that raised (a Verdict's parts are
    typed results, not booleans), so reading its status crashed the whole evaluation."""
    from pallasite.agents.eval_job import EvalJob, run_eval
    from pallasite.engine.eval_tasks import discover

    (task,) = [t for t in discover(str(DATA / "eval")) if t.name == "add_tuned"]

    def broken(task):
        raise RuntimeError("the model client broke")

    (summary,) = asyncio.run(run_eval(EvalJob([task], {"broken": broken}, chip="v5e")))
    row = summary["per_task"][0]
    # nothing was checked: "not checked", and correct is not shown (None), never False (issue 42)
    assert row["status"] == "not checked" and row["correct"] is None
    assert "RuntimeError: the model client broke" in row["verdict"]["text"]


def test_an_optimize_snapshot_of_the_older_form_is_read_into_its_verdicts():
    """Snapshots kept ``valid`` / ``time_s`` / ``label`` beside (or instead of) each iteration's Verdict; they
    are read into the Verdict, which is then the only carrier, and the new form round-trips."""
    from pallasite.agents.optimize import state_from_json, state_json
    from pallasite.analysis.verdict import COST_MODEL

    label = f"estimate ({COST_MODEL}, v5e)"
    old = {"run_id": "r1", "path": "k.py", "original": "x", "method": label, "baseline_s": 2e-3, "baseline_label": label,
           "context": {"chip": "v5e"},
           "iterations": [{"index": 1, "source": "a", "verdict": "valid", "valid": True, "time_s": 1e-3, "label": label},
                          {"index": 2, "source": "b", "verdict": "incorrect", "valid": False, "time_s": None,
                           "label": "", "evidence": "max abs error 1.0",
                           "phases": [{"phase": "compile", "ok": True, "summary": "ok"}]},
                          {"index": 3, "source": "c", "verdict": "valid", "valid": True, "time_s": 5e-4, "label": label,
                           "result": Verdict.of(True, True).to_json()}]}
    state = state_from_json(old)
    first, second, third = state.iterations
    assert first.valid and first.result.timing.seconds == 1e-3 and first.result.timing.device_kind == "v5e"
    assert not second.valid and state.verdict(second).status() == "compiled, wrong"
    # their verdicts are read, but nobody is known to have judged them: they never rank (analysis/verdict.rank)
    assert third.valid and third.time_s == 5e-4 and state.winner is None
    again = state_from_json(state_json(state))
    assert [it.result for it in again.iterations] == [it.result for it in state.iterations]
    assert "valid" not in state_json(state)["iterations"][0]  # the Verdict is serialised once


def test_check_prints_the_file_s_compile_verdict(capsys):
    """`pallasite check` said which tiers ran but never whether the file compiled for the chip."""
    from pallasite.server.cli import main

    clean = str(DATA / "tier0" / "pls005_kernel_params_ok.py")
    assert main(["check", "--no-cache", clean, "--tiers", "0", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert f"{clean}: not compiled for v6e: tier 2 was not run (tier 0 passed)" in out, out
    assert main(["check", "--no-cache", clean, "--tiers", "0", "--format", "json"]) == 0
    import json

    (entry,) = json.loads(capsys.readouterr().out)["files"]
    assert entry["compile"]["ok"] is None and entry["compile_text"].startswith("not compiled for v6e: tier 2")


class _Recording(Engine):
    """The stand-in engine, noting the tiers each check was asked for."""

    def __init__(self, report, reply):
        super().__init__(report, reply)
        self.tiers = []

    async def check(self, path, options, text=None, **kw):
        self.tiers.append(tuple(options.tiers))
        return self.report


def test_the_search_compiles_for_the_chip_whatever_tiers_the_settings_ask_for():
    """The search compiled its nodes with tiers 0-1 only, so none could be compiled for the chip."""
    from judging import file_evaluator
    from pallasite.agents.llm.providers import ProviderConfig
    from pallasite.agents.llm.providers_scripted import ScriptedProvider
    from pallasite.agents.search import SearchOptions, search
    from pallasite.agents.search_iterate import IterateNodes

    text = (TASK / "optimized.py").read_text()
    engine = _Recording(COMPILED, PASSED)
    ev = file_evaluator(engine, str(TASK / "optimized.py"), text, CheckOptions(target="v5e", tiers=(0, 1)), chip="v5e")
    provider = ScriptedProvider(ProviderConfig(name="scripted"), ["Plan: same\nKeep it.", f"```python\n{text}```"])
    nodes = IterateNodes(provider, ev, str(TASK / "optimized.py"), "v5e")
    graph = asyncio.run(search(text, SearchOptions(algo="parallel", trajectories=1, iterations=1, max_nodes=1), None,
                               nodes.evaluate_root, provenance=ev.method, attempt=nodes.attempt))
    assert engine.tiers and all(2 in tiers for tiers in engine.tiers), engine.tiers
    assert graph.nodes[1].verdict.compile.ok is True and graph.nodes[1].verdict.compile.tiers_run == (0, 1, 2)


def test_a_node_timed_by_another_method_than_the_root_has_no_speedup():
    """The search divided root_seconds / time_s without comparing how either was timed."""
    from pallasite.agents.evaluator import BaseEvaluator, PhaseResult
    from pallasite.agents.llm.providers import ProviderConfig
    from pallasite.agents.llm.providers_scripted import ScriptedProvider
    from pallasite.agents.search import SearchOptions, search
    from pallasite.agents.search_iterate import IterateNodes
    from pallasite.analysis.verdict import COST_MODEL, CompileResult, TestResult, Timing

    root_text, node_text = "ROOT = 1\n", "NODE = 2\n"

    class Mixed(BaseEvaluator):
        method = "estimate (v5e)"

        async def compile(self, source):
            return PhaseResult(True, "ok", compile=CompileResult.passed("v5e"))

        async def test(self, source):
            return PhaseResult(True, "ok", test=TestResult.ok(), judged_by="the judge")

        async def measure(self, source):
            timing = (Timing(2e-3, "estimate", "v5e", COST_MODEL) if source == root_text else
                      Timing(1e-3, "device", "TPU v5 lite"))
            return PhaseResult(True, "timed", timing=timing)

    provider = ScriptedProvider(ProviderConfig(name="scripted"), ["Plan: other\nGo.", f"```python\n{node_text}```"])
    nodes = IterateNodes(provider, Mixed(), "k.py", "v5e")
    graph = asyncio.run(search(root_text, SearchOptions(algo="parallel", trajectories=1, iterations=1, max_nodes=1),
                               None, nodes.evaluate_root, provenance="estimate (v5e)", attempt=nodes.attempt))
    node = graph.nodes[1]
    assert node.status == "compiled, correct" and node.speedup is None and not node.ok
    assert "different methods" in node.error and graph.best().id == "root"


def test_the_optimize_loop_never_reads_a_timing_from_a_label():
    """The loop parsed the measure phase's label back into a Timing (and for chip 7x named the model "7x");
    now a measure without its Timing is "not measured" and nothing is divided."""
    from pallasite.agents.evaluator import BaseEvaluator, PhaseResult
    from pallasite.agents.optimize import Budgets, new_run, optimize
    from pallasite.agents.llm.providers import ProviderConfig
    from pallasite.agents.llm.providers_scripted import ScriptedProvider
    from pallasite.analysis.verdict import CompileResult, TestResult

    class NoTiming(BaseEvaluator):
        method = "estimate (7x)"

        async def compile(self, source):
            return PhaseResult(True, "ok", compile=CompileResult.passed("7x"))

        async def test(self, source):
            return PhaseResult(True, "ok", test=TestResult.ok(), judged_by="the judge")

        async def measure(self, source):
            return PhaseResult(True, "1.0 us (estimate (7x))")  # a figure in words, no Timing

    provider = ScriptedProvider(ProviderConfig(name="scripted"), ["Plan: x\nGo.", "```python\nX = 2\n```"])
    state = asyncio.run(optimize(new_run("k.py", "X = 1\n"), provider, NoTiming(), Budgets(iterations=1, fix_rounds=0)))
    (it,) = state.iterations
    assert it.verdict == "not measured" and "no Timing" in it.evidence and state.baseline is None
    assert state.verdict(it).status() == "compiled, correct" and state.verdict(it).timing is None
    assert state.winner is None and "the original file was not timed" in state.outcome().why


def _cli(folder: Path, *args: str) -> str:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=folder)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return done.stdout


@pytest.mark.pipeline
def test_the_project_s_settings_give_one_verdict_in_every_command(tmp_path):
    """`pallasite search` and `pallasite eval` rebuilt their check options and dropped the project's
    settings, so with `severity = { PLS016 = "error" }` check said "not compiled" while search and eval
    compiled the same file. Now every command judges with the run setup's options: the same words."""
    import json
    import shutil

    shutil.copytree(DATA / "one_verdict" / "colmax", tmp_path / "bench" / "colmax")
    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v5p"\nseverity = { PLS016 = "error" }\n')
    kernel = "bench/colmax/optimized.py"
    text = (tmp_path / kernel).read_text()
    (tmp_path / "same.json").write_text(json.dumps(["Same\nKeep it.", f"```python\n{text}```"]))
    scripted = ("--provider", "scripted", "--scripted-file", str(tmp_path / "same.json"))
    (checked,) = json.loads(_cli(tmp_path, "check", kernel, "--no-store", "--format", "json"))["files"]
    assert checked["compile"]["ok"] is False and checked["compile"]["why"] == "1 error(s): PLS016"
    words = {"check": (checked["compile"]["ok"], checked["compile"]["why"])}
    _cli(tmp_path, "search", kernel, "--algo", "parallel", "--trajectories", "1", "--max-iterations", "1",
         "--jobs", "1", *scripted)
    (graph,) = (tmp_path / ".pallasite" / "search").glob("*.json")
    node = json.loads(graph.read_text())["nodes"][1]["verdict"]
    words["search"] = (node["compile"]["ok"], node["compile"]["why"])
    (task,) = json.loads(_cli(tmp_path, "eval", "bench", "--format", "json"))["methods"][0]["per_task"]
    words["eval"] = (task["verdict"]["compile"]["ok"], task["verdict"]["compile"]["why"])
    (row,) = json.loads(_cli(tmp_path, "optimize", kernel, "--max-iterations", "1", "--format", "json",
                             *scripted))["table"]
    words["optimize"] = (row["verdict"]["compile"]["ok"], row["verdict"]["compile"]["why"])
    tuned = json.loads(_cli(tmp_path, "tune", kernel, "--no-store", "--format", "json"))["current_verdict"]
    words["tune"] = (tuned["compile"]["ok"], tuned["compile"]["why"])
    assert words == dict.fromkeys(words, (False, "1 error(s): PLS016")), words
    assert {node["status"], task["status"], row["status"], tuned["status"]} == {"not compiled"}


def test_optimize_never_makes_up_a_result_a_phase_did_not_give():
    """A compile phase that answered a bare ok became "compiled for the chip (tiers 0,1,2)" and a bare test
    ok became a passed test: now a phase without its typed result checked nothing ("not checked")."""
    from pallasite.agents.evaluator import BaseEvaluator, PhaseResult
    from pallasite.agents.optimize import Budgets, new_run, optimize
    from pallasite.agents.llm.providers import ProviderConfig
    from pallasite.agents.llm.providers_scripted import ScriptedProvider
    from pallasite.analysis.verdict import CompileResult

    class Bare(BaseEvaluator):
        method = "estimate (v5e)"

        def __init__(self, compile_typed):
            self.compile_typed = compile_typed

        async def compile(self, source):
            return PhaseResult(True, "ok", compile=CompileResult.passed("v5e") if self.compile_typed else None)

        async def test(self, source):
            return PhaseResult(True, "ok")  # no TestResult

        async def measure(self, source):
            return PhaseResult(False, "not estimated")

    for typed in (False, True):
        provider = ScriptedProvider(ProviderConfig(name="scripted"), ["Plan: x\nGo.", "```python\nX = 2\n```"])
        state = asyncio.run(optimize(new_run("k.py", "X = 1\n"), provider, Bare(typed), Budgets(iterations=1,
                                                                                                fix_rounds=0)))
        verdict = state.verdict(state.iterations[0])
        if typed:  # compiled for the chip, and the test phase gave no result: not verified, never correct
            assert verdict.status() == "compiled, not verified" and "not checked" in verdict.test.why
        else:
            assert verdict.compiled is None and "not checked" in verdict.text()
        assert not verdict.passed


SELF = "the candidate"


def test_a_verdict_judged_by_the_candidate_s_own_process_never_wins():
    """A candidate that judged and timed itself ranked like one judged outside (the rule compared the reply's
    free text). Now ``judged_by`` is a JudgedBy the judge sets, carried in the verdict's JSON, and the one
    ranking (analysis/verdict.rank) lets only the judge's verdicts win, in optimize and in search."""
    from pallasite.agents.llm.providers import ProviderConfig
    from pallasite.agents.llm.providers_scripted import ScriptedProvider
    from pallasite.agents.search import SearchOptions, search
    from pallasite.agents.search_iterate import IterateNodes
    from pallasite.analysis.verdict import (COST_MODEL, CompileResult, JudgedBy, TestResult, Timing, pick_winner,
                                            rank)
    from pallasite.agents.evaluator import BaseEvaluator, PhaseResult
    from pallasite.runner.judging import judge

    assert judge.JUDGE == JudgedBy.JUDGE.value  # the worker's word is the type's
    base, fast = Timing(2e-3, "estimate", "v5e", COST_MODEL), Timing(1e-3, "estimate", "v5e", COST_MODEL)
    outside = Verdict(CompileResult.passed("v5e"), TestResult.ok(), fast, judged_by=JudgedBy.JUDGE)
    own = Verdict(CompileResult.passed("v5e"), TestResult.ok(), Timing(5e-4, "estimate", "v5e", COST_MODEL),
                  judged_by=SELF)
    free_text = Verdict(CompileResult.passed("v5e"), TestResult.ok(), fast, judged_by="a process that never ran it")
    assert pick_winner(base, [(1, outside)]).name == 1
    refused = pick_winner(base, [(1, own), (2, free_text)])
    assert refused.name is None and "not judged by the judge" in refused.why
    assert free_text.judged_by is JudgedBy.UNKNOWN and own.judged_by is JudgedBy.CANDIDATE
    ranking = rank(base, [(1, own), (2, outside)])
    assert ranking.order == (2, 1) and ranking.winner.name == 2 and ranking.not_judged == (1,)
    assert Verdict.from_json(own.to_json()).judged_by is JudgedBy.CANDIDATE and own.to_json()["judged_by"] == SELF

    root_text, node_text = "ROOT = 1\n", "NODE = 2\n"

    class SelfJudged(BaseEvaluator):  # the worker's reply said the candidate judged itself
        method = "estimate (v5e)"

        async def compile(self, source):
            return PhaseResult(True, "ok", compile=CompileResult.passed("v5e"))

        async def test(self, source):
            return PhaseResult(True, "ok", test=TestResult.ok(), judged_by=SELF)

        async def measure(self, source):
            return PhaseResult(True, "timed", timing=base if source == root_text else fast, judged_by=SELF)

    provider = ScriptedProvider(ProviderConfig(name="scripted"), ["Plan: other\nGo.", f"```python\n{node_text}```"])
    nodes = IterateNodes(provider, SelfJudged(), "k.py", "v5e")
    graph = asyncio.run(search(root_text, SearchOptions(algo="parallel", trajectories=1, iterations=1, max_nodes=1),
                               None, nodes.evaluate_root, provenance="estimate (v5e)", attempt=nodes.attempt))
    node = graph.nodes[1]
    assert node.verdict.judged_by is JudgedBy.CANDIDATE and node.to_json()["verdict"]["judged_by"] == SELF
    assert node.speedup == 2.0 and not node.ok and graph.best().id == "root"


def test_who_judged_is_shown_in_the_optimize_table_hover_and_eval_summary():
    """Nothing read ``judged_by``: the tables, the editor's optimize hover and eval's summary now say it."""
    from pallasite.agents.eval_metrics import CaseOutcome, TaskOutcome, summarize
    from pallasite.agents.optimize import state_from_json
    from pallasite.analysis.verdict import COST_MODEL, CompileResult, TestResult, Timing
    from pallasite.server.commands.cmd_eval import format_summary
    from pallasite.server.commands.cmd_optimize import table_text
    from pallasite.server.editor.optimize_lsp import table_markdown

    own = Verdict(CompileResult.passed("v5e"), TestResult.ok(), Timing(1e-3, "estimate", "v5e", COST_MODEL),
                  judged_by=SELF)
    state = state_from_json({"run_id": "r", "path": "k.py", "original": "x", "method": "estimate (v5e)",
                             "context": {"chip": "v5e"}, "baseline": Timing(2e-3, "estimate", "v5e", COST_MODEL).to_json(),
                             "iterations": [{"index": 1, "source": "a", "verdict": "valid", "result": own.to_json()}]})
    assert f"| {SELF} |" in table_markdown(state)
    text = table_text(state)
    assert "judged by the candidate's own process (never ranks): iteration 1" in text and "no winner" in text
    summary = summarize("files", [TaskOutcome("t", (CaseOutcome(own, 2.0),))], provenance="estimate (v5e)").to_json()
    summary["per_task"][0]["verdict"], summary["wall_s"] = own.to_json(), 1.0  # as run_eval adds them
    assert "judged by the candidate's own process (never ranks): task t" in format_summary(summary)


# the worker requests that estimate, test or time a kernel's figures; only the judge sends them for a candidate
_JUDGING_CALLS = {"worker_estimator", "worker_timer", "time_request", "EstimateParams", "estimate_pair",
                  "TimeParams", "ProfileParams"}
# where they are defined (the seams the judge calls), and the two commands that time the user's own file as
# written, never a candidate (`pallasite time`/`profile` and the editor's "Time on ..." code lens)
_SEAMS = {"engine/judge.py", "engine/tuning/judge_tune.py", "engine/tuning/tune_workers.py", "engine/estimates.py", "engine/timing.py"}
_THE_USER_S_OWN = {"server/commands/cmd_time.py", "server/editor/timing_lsp.py"}


def test_only_the_judge_sends_a_candidate_to_be_estimated_tested_or_timed():
    """Issue 42: one Judge; no command builds its own estimate, verify or time request for a candidate (tune's
    configurations went to the worker directly from cmd_tune and the editor's tune before)."""
    import ast

    root = Path(__file__).parent.parent
    found = []
    for layer in ("server", "agents", "engine"):
        for path in sorted((root / layer).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in _SEAMS:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name in _JUDGING_CALLS:
                        found.append((rel, node.lineno, name))
    assert {rel for rel, _, _ in found} <= _THE_USER_S_OWN, found
    assert found, "the scan found nothing at all: it no longer reads the commands"
