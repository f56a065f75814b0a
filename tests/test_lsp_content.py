"""Plain functions behind hovers, lenses and code actions (no server): the numbers and the words."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
from lsprotocol import types as lsp

from pallasite.analysis.tier0 import analyze
from pallasite.analysis.types import BlockSpecInfo, Finding, Fix, KernelSite, KernelVerdict, ScratchInfo, Span, TextEdit
from pallasite.server.editor import actions, hover, lenses
from pallasite.server.lsp_convert import text_lines
from pallasite.server.session import with_site_context

DATA = Path(__file__).parent / "data" / "lsp"
MIB = 1 << 20


def spec(shape, role="in", position=0, memory_space=None, line=1):
    return BlockSpecInfo(span=Span(line, 0, line, 30), block_shape=shape, role=role, position=position,
                         memory_space=memory_space, index_map_arity=1, index_map_results=len(shape))


def site(**kw):
    base = dict(kernel_name="k", span=Span(0, 0, 9, 1), call_span=Span(0, 0, 0, 14), enclosing_function="f",
                kernel_def_span=Span(20, 0, 20, 10), grid=(8, 4), grid_span=Span(2, 5, 2, 11),
                in_specs=(spec((512, 1024)),), out_specs=(spec((512, 1024), "out"),))
    base.update(kw)
    return KernelSite(**base)


def test_site_hover_compares_the_footprint_with_the_scoped_limit():
    s = site(scratch_shapes=(ScratchInfo(Span(3, 0, 3, 9), "VMEM", (512, 1024), "jnp.float32"),))
    chip = hover.ChipLimits("v5e", scoped_vmem_bytes=16 * MIB, source="libtpu 0.0.42.1 probe")
    text = hover.site_hover(s, chip, "float32", "from example_inputs()")
    assert "10.00 MiB of 16.00 MiB scoped VMEM on v5e (62%; limit from libtpu 0.0.42.1 probe)" in text
    assert "- grid (8, 4): 32 steps" in text
    small = hover.ChipLimits("v5e", scoped_vmem_bytes=8 * MIB, source="probe")
    assert "over the limit: expect a VMEM OOM (PLS201)" in hover.site_hover(s, small, "float32")


def test_unknown_dtype_shows_sizes_per_element_size_and_unknown_limit():
    text = hover.site_hover(site(), None, None)
    assert "Element type not known from the source" in text
    assert "2.00 MiB at 4 B/elem, 1.00 MiB at 2 B/elem, 512.0 KiB at 1 B/elem" in text
    assert "scoped VMEM limit for the target not known" in text


def test_blocks_outside_vmem_and_non_static_dims_are_said_so():
    s = site(in_specs=(spec((512, 1024), memory_space="ANY"), spec(("bm", 128), position=1)))
    text = hover.site_hover(s, None, "bfloat16")
    assert "memory space ANY, not a VMEM block" in text and "size not static" in text
    assert "at least" in text  # the footprint is a lower bound when a block is not static


def test_gpu_calls_get_no_tpu_numbers():
    text = hover.site_hover(site(backend="gpu"), hover.ChipLimits("v5e", 16 * MIB, source="probe"), "float32")
    assert "TPU block tiling and VMEM limits do not apply" in text and "VMEM footprint" not in text
    assert "- grid (8, 4): 32 steps" in text


def test_hover_and_tier0_rules_share_one_dtype_table_with_every_float8_and_sub_byte_type():
    from pallasite.analysis import dtypes
    from pallasite.analysis.rules import tiling as rules_tiling

    assert not hasattr(hover, "DTYPE_BYTES") and rules_tiling.EIGHT_BIT is dtypes.EIGHT_BIT
    jnp_names = ("float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
                 "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int4", "uint4", "float4_e2m1fn")
    text = "\n".join(f"a{i} = jnp.{name}" for i, name in enumerate(jnp_names))
    assert hover.dtypes_in(text) == list(jnp_names)  # each read from source, none as a prefix of another
    for name in jnp_names[:8]:  # every float8 tiles like int8
        assert name in dtypes.EIGHT_BIT and dtypes.sublane_rows(dtypes.DTYPE_BITS[name]) == 32
    line = hover.spec_hover(spec((64, 256)), site(), "int4")
    assert "8.0 KiB as int4" in line and "64 rows % 64" in line  # packed: 64 x 256 x 4 bits


def test_hover_picks_blockspec_then_grid_then_call():
    s = site()
    assert hover.hover_at([s], 1, 3, None, None)[0].startswith("**BlockSpec** in[0]")
    assert hover.hover_at([s], 2, 6, None, None)[0].startswith("**grid**")
    assert hover.hover_at([s], 5, 0, None, None)[0].startswith("**pallas_call**")
    assert hover.hover_at([s], 12, 0, None, None) is None
    assert hover.kernel_at([s], 20, 4) == "k"


def test_kernel_hover_lists_results_with_provenance():
    verdicts = [KernelVerdict("k", Span(0, 0, 9, 1), ((0, "ok"), (1, "ok"), (2, "error"), (3, "not run")))]
    results = hover.verdict_results(verdicts, "k", "v6e", "last check in this session, 12:00:00 UTC")
    text = hover.kernel_hover("k", results)
    assert "| 2 | v6e | error | last check in this session, 12:00:00 UTC |" in text
    assert "| 3 |" not in text
    assert "No compile results yet" in hover.kernel_hover("k", [])
    said = hover.kernel_hover("k", results, "compiled for v6e (tiers 0,1,2)")
    assert "The file at the last check: **compiled for v6e (tiers 0,1,2)**" in said


def test_dtype_from_the_task_inputs_text():
    assert hover.dtypes_in("s = jax.ShapeDtypeStruct((8, 128), jnp.bfloat16)\nt = np.int8") == ["bfloat16", "int8"]


def test_lenses_one_per_call_with_last_verdict():
    s = site()
    verdicts = [KernelVerdict("k", s.span, ((1, "ok"), (2, "error")))]
    (lens,) = lenses.check_lenses([s], "file:///k.py", "v5e", verdicts)
    assert lens.title == "Check for v5e (last: tier 1 ok, tier 2 error)" and lens.command == "pallasite.check"
    assert lens.span == s.call_span


def test_no_check_lens_on_a_gpu_pallas_call():
    tpu, gpu = site(), site(backend="gpu", call_span=Span(30, 0, 30, 14))
    assert [lens.span for lens in lenses.check_lenses([tpu, gpu], "file:///k.py", "v5e")] == [tpu.call_span]


def test_quick_fix_actions_are_versioned_and_refused_for_unseen_versions():
    text = "x = (8, 100)\n"
    fix = Fix("Use 128", (TextEdit(Span(0, 8, 0, 11), "128"),))
    found = [Finding("PLS001", "bad", Span(0, 8, 0, 11), fix=fix), Finding("PLS004", "no fix", Span(0, 0, 0, 1))]
    lines = text_lines(text)
    got = actions.actions_for(found, Span(0, 9, 0, 9), "file:///k.py", 4, lines, "utf-16", "v6e", None, {1, 4}, [])
    # no provider: no "Fix with agent" that cannot run, but the action that sets one up
    assert [a.title for a in got] == ["Use 128 (PLS001)", "Set up an LLM provider…", "Check now for v6e"]
    assert got[0].edit.document_changes[0].text_document.version == 4
    assert got[1].edit is None and got[1].command.command == "pallasite.setUpProvider"
    with_agent = actions.actions_for(found, Span(0, 9, 0, 9), "file:///k.py", 4, lines, "utf-16", "v6e", None,
                                     {4}, [], agent="gemini: gemini-2.5-pro")
    assert with_agent[1].title == "Fix with agent (gemini: gemini-2.5-pro)"
    # the agent's action only names its command (the list stays instant); the line and version go with it
    assert with_agent[1].edit is None and with_agent[1].command.command == "pallasite.fixWithAgent"
    assert with_agent[1].command.arguments == [{"uri": "file:///k.py", "version": 4, "line": 0}]
    stale = lsp.Diagnostic(range=lsp.Range(lsp.Position(0, 8), lsp.Position(0, 11)), message="bad",
                           data={"version": 3})
    assert actions.actions_for(found, Span(0, 9, 0, 9), "file:///k.py", 4, lines, "utf-16", "v6e", None,
                               {1, 4}, [stale]) == []
    only_fix = actions.actions_for(found, Span(0, 9, 0, 9), "file:///k.py", 4, lines, "utf-16", "v6e",
                                   [lsp.CodeActionKind.QuickFix], {4}, [])
    assert [a.kind for a in only_fix] == [lsp.CodeActionKind.QuickFix] * 2


def test_findings_get_the_call_and_kernel_def_as_related_places():
    text = (DATA / "tiling_broken.py").read_text()
    analysis = analyze(text, "tiling_broken.py")
    finding = next(f for f in analysis.findings if f.code == "PLS001")
    related = with_site_context(finding, analysis.sites).related
    messages = [r.message for r in related]
    assert "pallas_call of add_kernel" in messages and "kernel add_kernel defined here" in messages
    call = next(r for r in related if r.message == "pallas_call of add_kernel")
    assert text.splitlines()[call.span.line][call.span.column:call.span.end_column] == "pl.pallas_call"


def test_serve_over_tcp_binds_loopback_only(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "pallasite.server.cli", "serve", "--tcp", "--port", str(port)],
                            stderr=subprocess.PIPE, text=True)
    try:
        listening = []
        for _ in range(100):
            listening = [c.laddr for c in psutil.Process(proc.pid).net_connections("tcp") if c.status == "LISTEN"]
            if listening:
                break
            time.sleep(0.1)
        assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"processId": None, "rootUri": None, "capabilities": {}}}).encode()
        conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        data = b""
        while b"serverInfo" not in data:
            chunk = conn.recv(65536)
            assert chunk, "connection closed before the initialize result"
            data += chunk
        result = json.loads(data.split(b"\r\n\r\n", 1)[1])["result"]
        assert result["serverInfo"]["name"] == "pallasite"
        assert "pallasite.check" in result["capabilities"]["executeCommandProvider"]["commands"]
        conn.close()
    finally:
        proc.terminate()
        proc.wait(10)


class RecordingClient:
    """Stands in for the pygls server: records what the session would send."""

    def __init__(self):
        self.shown, self.logged, self.published = [], [], []

    def window_show_message(self, params):
        self.shown.append(params)

    def window_log_message(self, params):
        self.logged.append(params)

    def text_document_publish_diagnostics(self, params):
        self.published.append(params)


def test_a_failing_source_analysis_is_reported_once_and_keeps_the_last_findings(monkeypatch):
    from pallasite.server import session as session_mod

    client = RecordingClient()
    session = session_mod.Session(client)
    text = (DATA / "tiling_broken.py").read_text()
    doc = session.open("file:///w/k.py", "/w/k.py", 1, text)
    session.run_tier0(doc)
    before = [f.code for f in doc.tier0]
    assert "PLS001" in before

    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    from pallasite.server import tier0_runs

    monkeypatch.setattr(tier0_runs, "analyze", broken)
    for version in (2, 3):
        doc.apply(version, [])
        assert session.ensure_analysis(doc) is True  # still known as a kernel file
    assert [f.code for f in doc.tier0] == before
    assert len(client.shown) == 1 and "RecursionError" in client.shown[0].message and "/w/k.py" in client.shown[0].message
    assert len(client.logged) == 2
