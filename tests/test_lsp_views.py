"""Every result reaches every view when it arrives, and hovers say what the tiers learned (issue 52),
through the real server with a real check worker (tier 1 keeps these fast; tier 2 where libtpu is
installed):

- a check's verdict reaches the code lens at once (the server asks ``workspace/codeLens/refresh``)
  and the status bar (``pallasite/status``'s ``files``: the document's last verdict), after trusting
  the folder and after a fix and save, so lens, status bar and Problems say the same;
- the pallas_call hover of a plain GEMM (no example_inputs(), chained ``BM = BN = BK = 128``) reads
  its block sizes statically, says "not known yet" rather than "at least 0 B", and after the check
  gives the float32 blocks as traced, their bytes, a VMEM share, the grid's steps and the bytes per step.
"""

from __future__ import annotations

import pytest

import asyncio
import importlib.util

from lsprotocol import types as lsp

from test_lsp import (  # noqa: F401  (client is a fixture)
    answer_trust, change, client, copy_fixture, diagnostics_for, initialize, open_doc,
)

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


async def lens_titles(client, uri: str) -> list[str]:
    """The titles of the "Check for <chip>" lenses (the Time, Autotune and Optimize lenses left out)."""
    found = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    titles = [lens.command.title for lens in found or () if lens.command]
    return [t for t in titles if t.startswith(("Check for ", "Checking for "))]


async def hover_text(client, uri: str, line: int, column: int) -> str:
    found = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                   lsp.Position(line, column)))
    return found.contents.value if found else ""


async def until(read, good, seconds: float = 120):
    """await read() until good(value) or the time is up; the last value."""
    value = await read()
    for _ in range(int(seconds * 10)):
        if good(value):
            break
        await asyncio.sleep(0.1)
        value = await read()
    return value


def file_status(client, uri: str) -> dict:
    """The last status bar entry the server sent for ``uri`` (``pallasite/status``'s ``files``)."""
    for status in reversed(client.statuses):
        for entry in status.get("files") or ():
            entry = entry._asdict() if hasattr(entry, "_asdict") else dict(entry)
            if entry.get("uri") == uri:
                return entry
    return {}


def refreshed_after(client, index: int) -> bool:
    """Whether the server asked for the lenses again after publication ``index`` arrived."""
    return any(t >= client.published_at[index] for t in client.lens_refreshes)


def publication(client, uri: str, good) -> int | None:
    return next((i for i, p in enumerate(client.published) if p.uri == uri and good(p.diagnostics)), None)


@pytest.mark.pipeline
async def test_trusting_the_folder_brings_the_verdict_to_lens_and_status_bar_without_touching_the_editor(
        client, tmp_path):
    """Before: after "Trust" the check ran and Problems showed its error, but the lens read "Check for v6e"
    until the editor was touched (no refresh), and the status bar only ever said idle."""
    answer_trust(client, "Trust")
    _, uri, text = copy_fixture("store_shape.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws", {"tiers": [0, 1]})
    open_doc(client, uri, text)
    assert file_status(client, uri).get("state") != "error"
    diags = await diagnostics_for(client, uri, 1, timeout=120, predicate=lambda ds: any(d.code == "PLS104" for d in ds))
    assert diags
    index = publication(client, uri, lambda ds: any(d.code == "PLS104" for d in ds))
    for _ in range(100):  # the refresh follows the publication (the check task's end)
        if refreshed_after(client, index):
            break
        await asyncio.sleep(0.05)
    assert refreshed_after(client, index), "no workspace/codeLens/refresh after the check's result"
    assert await lens_titles(client, uri) == ["Check for v6e (last: tier 1 error)"]
    said = await until(lambda: asyncio.sleep(0, file_status(client, uri)), lambda s: s.get("state") == "error", 10)
    assert said["verdict"] == "not compiled: 1 error(s): PLS104", said
    assert "not compiled for v6e" in said["detail"] and "store_shape.py" in said["detail"]
    assert any(getattr(e, "uri", None) == uri and e.state == "checking" for s in client.statuses for e in s.get("files") or ())


async def test_after_a_fix_and_a_save_the_lens_the_status_bar_and_problems_agree(client, tmp_path):
    """Before: after the fix and the save's check, Problems said "No problems" while the lens kept
    "(last: tier 1 error)" (the save's verdict never reached it)."""
    answer_trust(client, "Trust")
    path, uri, text = copy_fixture("store_shape.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws", {"tiers": [0, 1]})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1, timeout=120, predicate=lambda ds: any(d.code == "PLS104" for d in ds))
    line = text.splitlines()[10]
    change(client, uri, 2, (10, 4), (10, len(line)), "o_ref[...] = x")  # the fix, not saved yet
    await diagnostics_for(client, uri, 2, predicate=lambda ds: not any(d.code == "PLS104" for d in ds))
    assert await lens_titles(client, uri) == ["Check for v6e (last: tier 1 error; edited since)"]
    assert file_status(client, uri)["verdict"].endswith("(edited since)")
    path.write_text(text.replace(line, "    o_ref[...] = x"))
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    saved = len(client.published)
    titles = await until(lambda: lens_titles(client, uri), lambda t: t == ["Check for v6e (last: tier 1 ok)"])
    assert titles == ["Check for v6e (last: tier 1 ok)"]
    after = [p for p in client.published[saved:] if p.uri == uri]
    assert after and not [d for d in after[-1].diagnostics if d.severity == lsp.DiagnosticSeverity.Error]
    index = client.published.index(after[-1])
    for _ in range(100):
        if refreshed_after(client, index):
            break
        await asyncio.sleep(0.05)
    assert refreshed_after(client, index)
    said = file_status(client, uri)
    assert said["state"] == "unknown" and said["verdict"] == "not compiled for the chip: tier 2 was not run (tiers 0,1 passed)", said


@pytest.mark.pipeline
async def test_the_gemm_hover_says_what_the_check_learned(client, tmp_path):
    """Before: "Element type not known from the source", "(BM, BK): size not static", "at least 0 B of
    32.00 MiB (0%)" and "grid: step count not static", right after the worker had checked the kernel."""
    answer_trust(client, "Trust")
    _, uri, text = copy_fixture("gemm_plain.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws", {"tiers": [0, 1, 2], "check": {"onOpen": False}})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    lines = text.splitlines()
    call = next(i for i, t in enumerate(lines) if "pl.pallas_call(" in t)
    spec = next(i for i, t in enumerate(lines) if "pl.BlockSpec((BM, BK)" in t)
    static = await hover_text(client, uri, call, 20)  # before any check: the source alone
    assert "`in[0]` (128, 128)" in static and "size not static" not in static  # BM = BN = BK = 128 read
    assert "`out[0]` (128, 128): 64.0 KiB as float32" in static  # out_shape names float32
    assert "at least 0 B" not in static and "step count not known yet" in static
    result = await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.check", arguments=[{"uri": uri}])), 240)
    assert result["ok"] is True, result
    traced = await until(lambda: hover_text(client, uri, call, 20), lambda t: "As the last check ran it" in t, 20)
    assert "entry `gemm` with float32[256,128], float32[128,256]" in traced, traced
    for block in ("`in[0]` (128, 128) float32: 64.0 KiB", "`in[1]` (128, 128) float32: 64.0 KiB",
                  "`out[0]` (128, 128) float32: 64.0 KiB"):
        assert block in traced, traced
    assert "(m // BM, n // BN, k // BK) = (2, 2, 1): 4 steps as traced" in traced
    assert "at most 192.0 KiB copied between HBM and VMEM" in traced
    assert "- VMEM per grid step: 384.0 KiB" in traced and "at least" not in traced
    if HAS_LIBTPU:  # tier 2 ran: the compiler's own allocation
        assert "as the TPU compiler allocated it (libtpu's VMEM report, tier 2)" in traced, traced
    spec_text = await hover_text(client, uri, spec, 22)
    assert "float32: 64.0 KiB" in spec_text and "double-buffered: 128.0 KiB" in spec_text, spec_text
