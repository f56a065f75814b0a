"""The error catalog in the editor, end to end over stdio: hovering a diagnostic shows its catalog
entry (below the hover of the code there), and the ``pallasite.explain`` command returns it.
"""

from __future__ import annotations

from lsprotocol import types as lsp
from pygls.uris import from_fs_path
from pytest_lsp import client_capabilities

from pallasite.knowledge import catalog
from test_lsp import (  # noqa: F401  (client is a fixture)
    answer_trust, client, copy_fixture, diagnostics_for, initialize, open_doc,
)


async def hover_text(client, uri: str, position: lsp.Position) -> lsp.Hover | None:
    return await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), position))


async def test_hover_on_a_diagnostic_shows_its_catalog_entry_below_the_code_hover(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("tiling_broken.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws")
    open_doc(client, uri, text)
    diags = await diagnostics_for(client, uri, 1)
    (pls001,) = [d for d in diags if d.code == "PLS001"]
    assert pls001.code_description is None  # the catalog names no web page for it: left out

    on_diag = await hover_text(client, uri, pls001.range.start)
    value = on_diag.contents.value
    entry = catalog.explain("PLS001", markdown=True)
    assert value.startswith("**BlockSpec**")  # the BlockSpec's own hover comes first...
    assert value.endswith("\n\n---\n\n" + entry)  # ...then the catalog entry of the diagnostic
    assert on_diag.range.start.line == pls001.range.start.line

    lines = text.splitlines()  # the pallas_call line has no diagnostic: no catalog entry there
    call = await hover_text(client, uri, lsp.Position(17, lines[17].index("pallas_call") + 1))
    assert call.contents.value.startswith("**pallas_call**") and "### PLS" not in call.contents.value


async def test_every_diagnostic_hover_includes_its_catalog_entry(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("renamed_api.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws")
    open_doc(client, uri, text)
    diags = await diagnostics_for(client, uri, 1)
    for diag in diags:
        hovered = await hover_text(client, uri, diag.range.start)
        assert hovered is not None, f"no hover on the {diag.code} diagnostic"
        assert catalog.explain(diag.code, markdown=True) in hovered.contents.value


async def test_explain_command_is_advertised_and_returns_the_entry(client, tmp_path):
    answer_trust(client, "Not now")
    result = await client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=from_fs_path(str(tmp_path))))
    commands = result.capabilities.execute_command_provider.commands
    assert "pallasite.explain" in commands

    async def explain(*arguments):
        return await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="pallasite.explain", arguments=list(arguments)))

    found = await explain("pls201")
    assert found["ok"] is True and found["code"] == "PLS201"
    assert found["markdown"] == catalog.explain("PLS201", markdown=True)
    assert (await explain({"code": "PLS001"}))["markdown"] == catalog.explain("PLS001", markdown=True)
    typo = await explain("PLS2O1")
    assert typo["ok"] is False and "Did you mean PLS201" in typo["message"]
    missing = await explain()
    assert missing["ok"] is False and "give a finding code" in missing["message"]
