"""Protocol v2: every op's params and result round-trip through the wire, a worker of another
version is refused with a clear message, a reply missing a field is a ProtocolError (not a
KeyError), requests carry the file and its local modules (no path must exist on the worker)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import traceback

import pytest

from pallasite.analysis.types import BlockCost, CallCost, ChipSpec, CostEstimate, Measurement, Provenance, to_json
from pallasite.engine.findings import reply_failures
from pallasite.engine.workers.client import WorkerClient, WorkerConfig
from pallasite.engine.sources import sources_for
from pallasite.runner import loader
from pallasite.wire import messages, protocol
from pallasite.wire.messages import (
    CheckEntry,
    CheckParams,
    CheckResult,
    ChipsParams,
    ChipsResult,
    ErrorRecord,
    Frame,
    FunctionInfo,
    ImportParams,
    ImportResult,
    InputSig,
    Mention,
    PingParams,
    PingResult,
    Progress,
    Ref,
    SourceFile,
    Sources,
    Stage,
    Tier3Info,
    TierOutcome,
    TierState,
    Versions,
    VersionsParams,
    VmemFigures,
)

SOURCES = Sources(file=SourceFile("/home/u/k.py", "import helpers\nX = 'é'\n"),
                  modules=(SourceFile("/home/u/helpers.py", "ROWS = 8\n", module="helpers"),), root="/home/u")
RECORD = ErrorRecord(stage="tier 2", type="MosaicError", sentence="unsupported shape cast", message="cast (8,128)->(32,32)",
                     frames=(Frame(file="/home/u/k.py", line=12, function="kernel", column=4, end_line=12, end_column=30),),
                     mentions=(Mention(line=12, column=5),), refs=(Ref(kind="args", index=0),),
                     vmem=VmemFigures(requested=2**27, limit=2**24), mosaic_codes=("E2002",), tier=2)
ENTRY = CheckEntry(name="matmul", line=10, format="native", has_reference=True, tolerance={"atol": 1e-2},
                   tunables={"block": [128, 256]},
                   tiers=(TierOutcome(1, TierState.OK), TierOutcome(2, TierState.ERROR),
                          TierOutcome(3, TierState.SKIPPED, "tier 2 failed")),
                   errors=(RECORD,), memory={"peak_memory_in_bytes": 1024}, mosaic_calls=1, lowered_hash="lowered:ab",
                   inputs=(InputSig((128, 256), "float32"),), timings_s={"1": 0.03, "2": 0.08}, notes=("a note",),
                   tier3=Tier3Info(seconds=1.5, shapes="(8, 128)", shrunk=True),
                   measurements=(Measurement(status="ok", provenance=Provenance.INTERPRET, device_kind="cpu",
                                             method="tier 3 wall clock", samples_ns=(1.5e9,), median_ns=1.5e9),))
CHIP = ChipSpec(name="v5e", device_kind="TPU v5 lite", topology="v5e:2x2", generation=5, cores_per_chip=1,
                device_cores=1, megacore=False, bf16_flops=1.97e14, int8_ops=3.94e14, fp8_ops=0.0,
                hbm_bytes=16 * 2**30, hbm_bytes_per_s=8.2e11, vmem_bytes=128 * 2**20, smem_bytes=2**20, mxu_size=128,
                num_mxus=4, lanes=128, sublanes=8, scoped_vmem_limit_bytes=16 * 2**20,
                scoped_vmem_source="libtpu 0.0.42.1 probe", source="jax 0.10.2")

OPS = [  # the check op last: the tests below take it as OPS[-1]
    (PingParams(), PingResult(pong=True, pid=7)),
    (VersionsParams(), Versions(python="3.11", pallasite="0.1", jax="0.10.2", jaxlib="0.10.2", libtpu=None,
                                platform="cpu", devices=("cpu",))),
    (ChipsParams(probe=False), ChipsResult(chips=(CHIP,), versions={"jax": "0.10.2", "libtpu": None})),
    (ImportParams(source=SOURCES), ImportResult(module="m", path="/home/u/k.py",
                                                functions=(FunctionInfo("f", 3),), constants={"ROWS": 8})),
    (messages.EstimateParams(source=SOURCES, chip="v5e", entry="matmul", configs=({"bm": 128}, {"bm": 256}),
                             kinds={"bm": "keyword"}, reference=True, probe=False),
     messages.EstimateResult(entry="matmul", spec=CHIP, estimates=(
         CostEstimate(chip="v5e", config=(("bm", 128),), status="ok", calls=(CallCost(
             kernel="mm", grid=(8, 1), steps=8, blocks=(BlockCost("in", 0, "args[0]", (1024, 128), (128, None),
                                                                  "bfloat16", "vmem", 2, 8, 262144),),
             scratch_bytes=0, vmem_bytes=65536, vmem_limit_bytes=None, hbm_bytes=262144, flops=10, mxu_flops=8,
             transcendentals=0, mxu_efficiency=1.0, dimension_semantics=("parallel", "arbitrary"), notes=("n",)),),
             seconds=1e-6, compute_s=1e-7, memory_s=3e-7, overhead_s=7e-7, bound="overhead", program_hash="ab",
             assumptions=("a",)),
         CostEstimate(chip="v5e", config=(("bm", 256),), status="trace_error", error="ZeroDivisionError")),
         reference={"flops": 1.0, "source": "XLA"}, inputs=(InputSig((1024, 128), "bfloat16"),), jax="0.10.2")),
    (messages.LocateParams(source=SOURCES, chip="v6e", entries=("matmul",), budget_s=30.0, fresh_sets=2),
     messages.LocateResult(entries=(
         messages.LocatedEntry("matmul", "fixed", kernel="k", verified_sets=2, shapes="float32[256, 128]",
                               fix=messages.SourceEdit(19, 28, 19, 39, "rows >= cols", "rows > cols", "`>` -> `>=`",
                                                       "comparison"), tried_count=1, seconds=3.5),
         messages.LocatedEntry("other", "not_found", "none works", tried=(messages.SourceEdit(1, 0, 1, 1, "a", "b", "w"),),
                               suspect=messages.SourceEdit(2, 0, 2, 1, "c", "d", "w")),
         messages.LocatedEntry("third", "skipped", "no task")))),
    (messages.TimeParams(source=SOURCES, reference=SOURCES, entry="matmul", config={"bm": 128}, runs=5, seed=3),
     messages.TimeResult(verdict="ok", entry="matmul", config={"bm": 128}, checks={"seed": 3, "pallas_calls": 1},
                         flags=(messages.Trick("implausible_speedup", "25x", {"value": 25.0}),),
                         candidate=Measurement(status="ok", provenance=Provenance.DEVICE, device_kind="TPU v6 lite",
                                               method="device time", samples_ns=(1.0, 2.0), median_ns=1.5),
                         speedup={"value": 25.0, "baseline": "XLA"})),
    (messages.ProfileParams(source=SOURCES, chip="v5e", trace_dir="/tmp/t"),
     messages.TimeResult(verdict="rejected", rejections=(messages.Trick("partial_write", "half", {"unwritten": 8}),),
                         profile={"bound": "memory"}, trace="/tmp/t/x.xplane.pb")),
    (CheckParams(source=SOURCES, chip="v5e", tiers=(1, 2, 3), time_limit_s=30.0, entries=("matmul",),
                 tier2_known={"add": "ok"}),
     CheckResult(chip="v5e", tiers=(1, 2, 3), tasks_found=1, versions=Versions(jax="0.10.2"),
                 errors=(RECORD,), unavailable={"2": "libtpu is not installed"}, entries=(ENTRY,))),
]


def _wire(message: dict) -> dict:
    return protocol.decode(protocol.encode(message))


@pytest.mark.parametrize("params, result", OPS, ids=[type(p).OP for p, _ in OPS])
def test_every_ops_params_and_result_round_trip(params, result):
    sent = _wire(protocol.request("1-1", params, deadline_s=5))
    assert sent["op"] == type(params).OP
    assert protocol.read_params(sent["op"], sent["params"]) == params
    answered = _wire(protocol.result_ok("1-1", result))
    assert protocol.read_result(type(params).OP, answered["result"]) == result


def test_every_op_is_covered_by_the_round_trip():
    assert {type(p).OP for p, _ in OPS} == set(messages.PARAMS) == set(messages.RESULTS)


def chip_fields() -> dict[str, str]:
    """Every field of a wire message that names a chip by another word than ``chip`` (issue 61: ``target``,
    ``estimate_chip``), as {"Message.field": type}."""
    import dataclasses
    import inspect

    odd = {}
    for name, cls in inspect.getmembers(messages, dataclasses.is_dataclass):
        if cls.__module__ != messages.__name__:
            continue
        for f in dataclasses.fields(cls):
            if f.name != "chip" and (f.name == "target" or f.name.endswith("_chip")):
                odd[f"{name}.{f.name}"] = str(f.type)
            if f.name == "chip" and "ChipSpec" in str(f.type):
                odd[f"{name}.{f.name}"] = str(f.type)  # a chip is a name on the wire; a spec is a ``spec``
    return odd


def test_every_wire_message_names_its_chip_chip():
    assert chip_fields() == {}


def test_progress_is_structured_and_round_trips():
    report = Progress(stage=Stage.TIER, message="tier 2: matmul (libtpu compile for v5e)", tier=2, entry="matmul",
                      line=14, fraction=0.5)
    back = protocol.read_progress(_wire(protocol.progress("1", report)))
    assert back == report
    assert reply_failures.stage_of(back) == {"tier": 2, "entry": "matmul", "line": 14}
    # the client decides on fields, never on words: the same step with any wording
    reworded = Progress(stage=Stage.TIER, message="étape 2", tier=2, entry="matmul")
    assert reply_failures.stage_of(reworded) == {"tier": 2, "entry": "matmul"}
    assert reply_failures.stage_of(Progress(stage=Stage.IMPORT, message="")) == {"stage": "import"}


def test_tier_states_read_from_the_workers_spelling_and_display_as_before():
    assert TierOutcome.of(3, "skipped: tier 1 failed") == TierOutcome(3, TierState.SKIPPED, "tier 1 failed")
    assert TierOutcome.of(2, "not run").display() == "not run"
    assert TierOutcome(2, TierState.NOT_CHECKED, "ran past 60 s").display() == "not checked: ran past 60 s"
    with pytest.raises(protocol.ProtocolError, match="unknown state 'fine'"):
        TierOutcome.of(1, "fine")


@pytest.mark.parametrize("drop, words", [
    (("entries", 0, "name"), "result.entries[0]: the field 'name' is missing"),
    (("entries", 0, "tiers", 1, "state"), "result.entries[0].tiers[1]: the field 'state' is missing"),
    (("entries", 0, "errors", 0, "sentence"), "result.entries[0].errors[0]: the field 'sentence' is missing"),
    (("chip",), "check result: the field 'chip' is missing"),
])
def test_a_reply_missing_a_field_is_a_protocol_error_naming_it(drop, words):
    plain = json.loads(json.dumps(to_json(OPS[-1][1])))
    holder = plain
    for key in drop[:-1]:
        holder = holder[key]
    del holder[drop[-1]]
    with pytest.raises(protocol.ProtocolError) as info:
        protocol.read_result("check", plain)
    assert words.replace("result.", "check result.", 1) in str(info.value) or words in str(info.value)


def test_a_mistyped_field_and_an_unknown_state_are_protocol_errors():
    plain = to_json(OPS[-1][1])
    plain["entries"][0]["tiers"][0]["state"] = "great"
    with pytest.raises(protocol.ProtocolError, match="'great' is not one of ok, error"):
        protocol.read_result("check", plain)
    with pytest.raises(protocol.ProtocolError, match="tasks_found: expected an integer"):
        protocol.read_result("check", dict(to_json(OPS[-1][1]), tasks_found="one"))
    with pytest.raises(protocol.ProtocolError, match="an ok result needs its 'result'"):
        protocol.decode(b'{"kind": "result", "id": "1", "ok": true}')


def test_a_worker_of_another_version_is_refused_with_what_to_do():
    hello = protocol.Handshake.from_message({"kind": "handshake", "protocol": 1, "pid": 42, "pallasite": "0.0.9",
                                             "devices": "not even a list"})  # v1's fields are not read
    with pytest.raises(protocol.ProtocolError) as info:
        protocol.check_handshake(hello)
    said = str(info.value)
    assert "pid 42" in said and "pallasite 0.0.9" in said and "protocol 1" in said
    assert f"speaks protocol {protocol.PROTOCOL_VERSION}" in said and "pip install" in said


def test_a_client_refuses_a_real_process_speaking_another_version(tmp_path):
    fake = tmp_path / "old_worker.py"
    fake.write_text(textwrap.dedent("""
        import json, sys, time
        sys.stdout.write(json.dumps({"kind": "handshake", "protocol": 1, "pid": 1, "pallasite": "0.0.1"}) + "\\n")
        sys.stdout.flush()
        time.sleep(30)
    """))

    class OldWorker(WorkerConfig):
        def argv(self):
            return [sys.executable, str(fake)]

    async def go():
        client = WorkerClient(OldWorker(startup_timeout_s=20))
        try:
            return await client.request(PingParams())
        finally:
            await client.close()

    reply = asyncio.run(go())
    assert reply.status == "not_started" and reply.start_problem == "version_mismatch"
    assert "speaks worker protocol 1" in reply.message and "pallasite 0.0.1" in reply.message


def test_bad_params_are_refused_by_the_worker_loop_with_the_field():
    from pallasite.runner.worker import Worker

    sent: list[dict] = []
    worker = Worker(out_fd=-1)
    worker.send = sent.append  # type: ignore[method-assign]
    worker.handle({"kind": "request", "id": "9", "op": "check", "params": {"chip": "v5e"}})
    [reply] = sent
    assert reply["ok"] is False and reply["error"]["type"] == protocol.ERROR_BAD_REQUEST
    assert "check params: the field 'source' is missing" in reply["error"]["message"]


# --------------------------------------------------------------------------- what a request carries


def test_sources_carry_the_local_modules_a_file_imports(tmp_path):
    (tmp_path / "helpers.py").write_text("from tiles import ROWS\nBLOCK = ROWS * 2\n")
    (tmp_path / "tiles.py").write_text("ROWS = 8\n")
    (tmp_path / "unused.py").write_text("raise SystemExit\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "util.py").write_text("SCALE = 3\n")
    kernel = tmp_path / "kernel.py"
    kernel.write_text("import numpy\nimport helpers\nfrom pkg.util import SCALE\nX = helpers.BLOCK * SCALE\n")
    source = sources_for(str(kernel), "import helpers\nfrom pkg import util\nX = helpers.BLOCK * util.SCALE\n")
    names = {m.module: m.path for m in source.modules}
    assert names == {"helpers": str(tmp_path / "helpers.py"), "tiles": str(tmp_path / "tiles.py"),
                     "pkg": str(pkg / "__init__.py"), "pkg.util": str(pkg / "util.py")}
    assert source.text.startswith("import helpers")  # the buffer, not the saved file


def test_the_worker_needs_no_copy_of_the_users_folder(tmp_path):
    """What a remote worker sees: paths that do not exist there, and the text sent with them."""
    folder = tmp_path / "on_the_laptop"
    kernel, helper = str(folder / "kernel.py"), str(folder / "helpers.py")
    modules = [("helpers", helper, "ROWS = 8\n\ndef boom():\n    raise ValueError('from the helper')\n")]
    text = "import helpers\nX = helpers.ROWS * 2\n"
    assert not folder.exists()
    with loader.user_module(kernel, text, modules) as module:
        assert module.X == 16 and module.__file__ == kernel
        with pytest.raises(ValueError) as info:
            module.helpers.boom()
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert frame.filename == helper and frame.lineno == 4 and "from the helper" in frame.line
    assert "helpers" not in sys.modules


def test_a_sent_module_never_replaces_one_the_worker_already_has(tmp_path):
    import json as real_json

    with loader.user_module(str(tmp_path / "k.py"), "import json\nJ = json\n",
                            [("json", str(tmp_path / "json.py"), "FAKE = 1\n")]) as module:
        assert module.J is real_json
    assert sys.modules["json"] is real_json
