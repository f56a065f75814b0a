--- pallasite for Neovim 0.11+: registers the `pallasite` language server with vim.lsp.config /
--- vim.lsp.enable, adds the :Pallasite* commands the server advertises (buffer-local, on attach),
--- opens the step-by-step optimize plan / diff documents the server shows (plans.lua), and
--- exposes a statusline component fed by the server's `pallasite/status` notification.
---
---   require('pallasite').setup({
---     cmd = { 'pallasite', 'serve' },            -- or python = '/path/to/python'
---     settings = { target = 'v5e' },             -- the server's `pallasite` section (`pallasite settings --schema`)
---   })
---   vim.o.statusline = '%f %= %{v:lua.require("pallasite").statusline()}'

local commands = require('pallasite.commands')
local plans = require('pallasite.plans')
local prompt = require('pallasite.prompt')
local status = require('pallasite.status')

local M = {}

M.NAME = 'pallasite'

--- @class pallasite.Options
--- @field cmd string[]|fun(dispatchers: table): table  how to start the server (default: pallasite serve)
--- @field python? string  a Python with pallasite installed: runs `python -m pallasite.server.cli serve`
--- @field root_markers string[]
--- @field filetypes string[]
--- @field settings table  the `pallasite` settings section sent to the server
--- @field enable boolean  call vim.lsp.enable (default true)
local defaults = {
  cmd = { 'pallasite', 'serve' },
  root_markers = { 'pyproject.toml', '.git' },
  filetypes = { 'python' },
  settings = {},
  enable = true,
}

--- The options in effect (defaults until setup() runs, so :checkhealth works either way).
--- @type pallasite.Options
M.options = vim.deepcopy(defaults)

--- Options merged over the defaults, checked; errors name the option and what it should be.
--- @param opts table|nil
--- @return pallasite.Options
function M.resolve(opts)
  opts = opts or {}
  vim.validate('opts', opts, 'table')
  vim.validate('cmd', opts.cmd, { 'table', 'function' }, true)
  vim.validate('python', opts.python, 'string', true)
  vim.validate('root_markers', opts.root_markers, 'table', true)
  vim.validate('filetypes', opts.filetypes, 'table', true)
  vim.validate('settings', opts.settings, 'table', true)
  vim.validate('enable', opts.enable, 'boolean', true)
  -- Shallow for the lists (a deep merge would mix list items), deep copy for settings.
  local resolved = vim.tbl_extend('force', vim.deepcopy(defaults), opts)
  resolved.settings = vim.deepcopy(opts.settings or {})
  if opts.python and not opts.cmd then
    resolved.cmd = { opts.python, '-m', 'pallasite.server.cli', 'serve' }
  end
  return resolved
end

--- An empty Lua table encodes as a JSON list; the server wants an object.
local function as_object(tbl)
  return next(tbl) == nil and vim.empty_dict() or tbl
end

--- The vim.lsp.config table for the options (pure: nothing is started here).
--- @param opts pallasite.Options
--- @return vim.lsp.Config
function M.lsp_config(opts)
  local section = as_object(vim.deepcopy(opts.settings))
  return {
    cmd = opts.cmd,
    filetypes = opts.filetypes,
    root_markers = opts.root_markers,
    settings = { pallasite = section },
    init_options = section,
    -- Every change goes to the server at once: the server debounces tier 0 itself (check.debounceMs,
    -- 150 ms); Neovim's own rate limit (150 ms by default) held the last keystroke of a typed word up to
    -- 150 ms more, so diagnostics came ~300 ms after it (benchmarks/bench_nvim_tier0.py).
    flags = { debounce_text_changes = 0 },
    handlers = {
      [status.NOTIFICATION] = status.on_status,
      ['window/showMessageRequest'] = prompt.on_request,
      ['window/showDocument'] = plans.on_show_document,
    },
  }
end

local group = vim.api.nvim_create_augroup('pallasite', { clear = true })

plans.on_plan_buffer = commands.attach_plan

--- Register and enable the server; safe to call again with new options.
--- @param opts table|nil see pallasite.Options
function M.setup(opts)
  M.options = M.resolve(opts)
  vim.lsp.config(M.NAME, M.lsp_config(M.options))
  vim.api.nvim_clear_autocmds({ group = group })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.NAME then
        commands.attach(client, ev.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd('LspProgress', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.NAME then
        status.on_progress(ev.data.client_id, ev.data.params)
      end
    end,
  })
  vim.api.nvim_create_autocmd('LspDetach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.NAME then
        commands.detach(ev.buf)
      end
    end,
  })
  vim.lsp.enable(M.NAME, M.options.enable)
end

--- Statusline component: "pallasite v6e · local · idle" (plus progress and trust), '' when no
--- pallasite server is attached to the buffer.
--- @param bufnr integer|nil
--- @return string
function M.statusline(bufnr)
  return status.statusline(bufnr)
end

--- The last `pallasite/status` of the server attached to the buffer (nil if none yet).
function M.status(bufnr)
  return status.for_buffer(bufnr)
end

return M
