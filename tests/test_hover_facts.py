"""What hovers learn from the tiers, piece by piece and without a server (issue 52): chained and tuple
block constants read statically, the worker's traced grid on the wire (optional, old replies still
read), libtpu's VMEM report read and attributed to a call, and the traced hover's words."""

from __future__ import annotations

from pathlib import Path

from pallasite.analysis.tier0 import analyze
from pallasite.analysis.types import TracedBlock, TracedCall
from pallasite.engine.findings.reach import traced_calls
from pallasite.runner import vmem_report
from pallasite.server.editor import hover, hover_facts
from pallasite.wire.messages import check_result_from_plain

GEMM = Path(__file__).parent / "data" / "lsp" / "gemm_plain.py"
MIB = 1 << 20


def test_chained_and_tuple_assignments_give_static_block_sizes():
    """``BM = BN = BK = 128`` left every name unresolved ("(BM, BK): size not static") before."""
    text = GEMM.read_text()
    [site] = analyze(text, str(GEMM)).sites
    assert [s.block_shape for s in (*site.in_specs, *site.out_specs)] == [(128, 128)] * 3
    tuples = text.replace("BM = BN = BK = 128", "BM, BN = BK, _ = 128, 256")  # BK = 128, BN = 256
    [site] = analyze(tuples, str(GEMM)).sites
    assert [s.block_shape for s in site.in_specs] == [(128, 128), (128, 256)]
    local = text.replace("BM = BN = BK = 128\n", "").replace("    m, k = x.shape", "    BM = BN = BK = 64\n    m, k = x.shape")
    [site] = analyze(local, str(GEMM)).sites
    assert site.out_specs[0].block_shape == (64, 64)


def test_the_static_hover_says_not_known_yet_never_at_least_nothing():
    [site] = analyze(GEMM.read_text(), str(GEMM)).sites
    unread = hover.site_hover(site.__class__(**{**site.__dict__, "in_specs": (
        site.in_specs[0].__class__(**{**site.in_specs[0].__dict__, "block_shape": ("bm", 128)}),), "out_specs": ()}),
        hover.ChipLimits("v6e", 32 * MIB, source="probe"), None)
    assert "at least 0 B" not in unread
    assert "not known yet: the block sizes of in[0] (bm, 128) are not static" in unread
    text = hover.site_hover(site, hover.ChipLimits("v6e", 32 * MIB, source="probe"), None)
    assert "`out[0]` (128, 128): 64.0 KiB as float32" in text  # out_shape=jax.ShapeDtypeStruct(..., jnp.float32)
    assert "step count not known yet: the grid depends on values the source does not fix" in text


def _reply(**memory) -> dict:
    call = {"lines": [24], "kernel": "gemm_kernel", "kernel_line": 11, "vmem_bytes": 393216, "grid": [2, 2, 1],
            "buffers": [{"role": r, "index": i, "shape": [128, 128], "dtype": "float32", "bytes": 65536, "buffers": 2}
                        for r, i in (("in_specs", 0), ("in_specs", 1), ("out_specs", 0))]}
    return {"chip": "v6e", "tiers": [1, 2], "entries": [{
        "name": "gemm", "tiers": {"1": "ok", "2": "ok"}, "inputs": [[[256, 128], "float32"], [[128, 256], "float32"]],
        "memory": memory or None, "reached": [call]}]}


def test_the_traced_grid_travels_and_an_old_reply_without_it_still_reads():
    [entry] = check_result_from_plain(_reply()).entries
    assert entry.reached[0].grid == (2, 2, 1)
    old = _reply()
    del old["entries"][0]["reached"][0]["grid"]
    [entry] = check_result_from_plain(old).entries
    assert entry.reached[0].grid is None and entry.reached[0].vmem_bytes == 393216


def test_libtpus_vmem_is_given_to_a_call_only_when_the_entry_made_that_one_call():
    [call] = traced_calls(check_result_from_plain(_reply(vmem_scoped_bytes=393216, vmem_kernels=1)).entries)
    assert call.compiled_vmem_bytes == 393216 and call.grid == (2, 2, 1) and call.inputs[0] == ((256, 128), "float32")
    [call] = traced_calls(check_result_from_plain(_reply(argument_size_in_bytes=1)).entries)
    assert call.compiled_vmem_bytes is None and "no VMEM report" in call.compiled_vmem_why
    two = _reply(vmem_scoped_bytes=393216, vmem_kernels=2)
    two["entries"][0]["reached"].append(dict(two["entries"][0]["reached"][0], lines=[40]))
    assert {c.compiled_vmem_bytes for c in traced_calls(check_result_from_plain(two).entries)} == {None}
    failed = _reply()
    failed["entries"][0]["tiers"]["2"] = "skipped: tier 1 failed"
    [call] = traced_calls(check_result_from_plain(failed).entries)
    assert "tier 2 (the libtpu compile) did not run here (skipped: tier 1 failed)" == call.compiled_vmem_why


PAGE = """<html><script>
const DATA = {"global_info": {"module_name": "jit_gemm", "vmem_capacity": 134217728},
 "hlo_breakdowns": {"<top-inlining-caller>": {"blocks": [], "total_size": 917504},
                    "gemm.1": {"blocks": [{"block_size": 393216, "block_type": "SCOPED"}], "total_size": 393216},
                    "gemm.2": {"blocks": [], "total_size": 524288}}};
</script></html>"""


def test_the_vmem_report_page_gives_each_kernels_scoped_bytes(tmp_path, monkeypatch):
    assert vmem_report.kernel_sizes(PAGE) == [393216, 524288]  # the summary left out, in the module's order
    assert vmem_report.kernel_sizes("<html>no data</html>") == [] == vmem_report.kernel_sizes("const DATA = {oops")
    monkeypatch.setitem(vmem_report._state, "dir", str(tmp_path))
    (tmp_path / "1-TLP-00-vmem_report.html").write_text(PAGE)
    assert vmem_report.take() == [393216, 524288] and list(tmp_path.iterdir()) == []  # read once, removed
    assert vmem_report.take() is None


def test_the_report_is_asked_for_only_where_libtpu_is_known_to_take_the_flags(monkeypatch):
    monkeypatch.setattr(vmem_report, "_libtpu_version", lambda: (0, 0, 42, 1))
    env: dict[str, str] = {}
    folder = vmem_report.enable(env)
    assert folder and env["LIBTPU_INIT_ARGS"] == f"--xla_jf_dump_to={folder} --xla_jf_dump_category_filter=memory-report"
    assert vmem_report.enable({"LIBTPU_INIT_ARGS": "--xla_jf_dump_to=/mine"}) is None  # the user's own dump wins
    assert vmem_report.enable({"PALLASITE_VMEM_REPORT": "0"}) is None
    monkeypatch.setattr(vmem_report, "_libtpu_version", lambda: (0, 0, 41))
    assert vmem_report.enable({}) is None  # an older libtpu may abort on an unknown flag value
    Path(folder).rmdir()


def test_the_traced_hover_names_its_sources():
    [site] = analyze(GEMM.read_text(), str(GEMM)).sites
    blocks = tuple(TracedBlock(r, i, (128, 128), "float32", 65536, 2) for r, i in (("in_specs", 0), ("in_specs", 1),
                                                                                   ("out_specs", 0)))
    call = TracedCall("gemm", (site.span.line + 1,), "gemm_kernel", inputs=(((256, 128), "float32"),), blocks=blocks,
                      vmem_bytes=393216, grid=(2, 2, 1), compiled_vmem_why="tier 2 (the libtpu compile) did not run here (not run)")
    assert hover_facts.traced_for(site, [call], edited=False) is call
    moved = TracedCall("gemm", (999,), "gemm_kernel")
    assert hover_facts.traced_for(site, [moved], edited=True) is moved  # edited since: by the kernel's name
    assert hover_facts.traced_for(site, [moved, moved], edited=True) is None  # two calls: cannot tell
    text = hover_facts.traced_site_hover(site, call, hover.ChipLimits("v6e", 32 * MIB, source="probe"), "last check")
    assert ("- VMEM per grid step: 384.0 KiB for the blocks as traced (pipelined blocks double-buffered, scratch "
            "once): 1.2% of the 32.00 MiB scoped VMEM on v6e (limit from probe)") in text
    assert "the compiler's own allocation: not known yet: tier 2 (the libtpu compile) did not run here" in text
    assert "(m // BM, n // BN, k // BK) = (2, 2, 1): 4 steps as traced" in text
    small = hover_facts.traced_site_hover(site, call, hover.ChipLimits("v6e", 256 << 10, source="probe"), "last check")
    assert ": over the 256.0 KiB scoped VMEM on v6e (limit from probe): expect a VMEM OOM (PLS201)" in small
