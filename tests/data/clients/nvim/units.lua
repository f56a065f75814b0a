-- Unit checks of the plugin's pure functions, run with `nvim --headless --clean -l units.lua OUT`.
-- Writes {name: "ok" | error message} as JSON to OUT.
local here = vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2))
vim.opt.runtimepath:prepend(vim.fs.normalize(here .. '/../../../../editor_clients/neovim'))

local pallasite = require('pallasite')
local commands = require('pallasite.commands')
local health = require('pallasite.health')
local status = require('pallasite.status')
local plans = require('pallasite.plans')

local cases = {}

cases.status_text = function()
  local s = { target = 'v6e', backend = 'local', worker = 'idle', trusted = true }
  assert(status.text(s) == 'pallasite v6e · local · idle', status.text(s))
  s.trusted = false
  assert(status.text(s) == 'pallasite v6e · local · idle · untrusted', status.text(s))
  local p = { title = 'Checking add.py', message = 'tier 1', percentage = 40 }
  assert(status.text(s, p) == 'pallasite v6e · local · idle · untrusted · Checking add.py: tier 1 40%', status.text(s, p))
  assert(status.text(nil) == 'pallasite')
  local titled = status.text(s, { title = 'pallasite: checking add.py for v6e', message = 'tier 1' })
  assert(titled == 'pallasite v6e · local · idle · untrusted · checking add.py for v6e: tier 1', titled)
end

cases.status_shows_the_buffers_last_verdict = function()
  local s = status.parse({ target = 'v6e', backend = 'local', worker = 'idle', trusted = true, files = {
    { uri = 'file:///p/add.py', state = 'error', verdict = 'not compiled: 1 error(s): PLS001', detail = 'long' },
    { uri = 'file:///p/bad.py', state = 'error' },
  } })
  assert(vim.tbl_count(s.files) == 1, vim.inspect(s.files))
  local text = status.text(s, nil, 'file:///p/add.py')
  assert(text == 'pallasite v6e · local · idle · not compiled: 1 error(s): PLS001', text)
  assert(status.text(s, nil, 'file:///p/other.py') == 'pallasite v6e · local · idle')
  assert(status.text(s) == 'pallasite v6e · local · idle')
end

cases.changes_reach_the_server_at_once = function()
  -- the server debounces tier 0; a second debounce in Neovim held a typed word's last key (issue 52)
  local config = pallasite.lsp_config(pallasite.resolve({}))
  assert(config.flags and config.flags.debounce_text_changes == 0, vim.inspect(config.flags))
end

cases.status_parse = function()
  assert(status.parse({ target = 'v5e', worker = 'idle', trusted = false }).backend == 'local')
  assert(status.parse({ target = 'v5e', worker = 'idle', trusted = 'no' }) == nil)
  assert(status.parse('v5e') == nil)
end

cases.progress_begin_report_end = function()
  status.on_progress(7, { token = 't', value = { kind = 'begin', title = 'Checking', percentage = 0 } })
  status.on_progress(7, { token = 't', value = { kind = 'report', message = 'tier 2', percentage = 50 } })
  local p = status.progress[7].t
  assert(p.title == 'Checking' and p.message == 'tier 2' and p.percentage == 50, vim.inspect(p))
  status.on_progress(7, { token = 't', value = { kind = 'end' } })
  assert(status.progress[7].t == nil)
end

cases.available_commands_follow_the_server = function()
  local names = function(list)
    return vim.tbl_map(function(e) return e.name end, list)
  end
  assert(#commands.available({}) == 0)
  assert(vim.deep_equal(names(commands.available({ 'pallasite.check' })),
    { 'PallasiteCheck', 'PallasiteCheckTier3', 'PallasiteCheckScript' }))
  assert(vim.deep_equal(names(commands.available({ 'pallasite.explain' })), { 'PallasiteExplain' }))
  assert(vim.deep_equal(names(commands.available({ 'pallasite.trustFolder', 'pallasite.autotune' })), { 'PallasiteTrust' }))
  local client = { server_capabilities = { executeCommandProvider = { commands = { 'pallasite.check', 3 } } } }
  assert(vim.deep_equal(commands.advertised(client), { 'pallasite.check' }))
  assert(vim.deep_equal(commands.advertised({ server_capabilities = {} }), {}))
end

cases.command_arguments = function()
  local by_name = {}
  for _, e in ipairs(commands.COMMANDS) do by_name[e.name] = e end
  local ctx = { uri = 'file:///p/add.py', root_uri = 'file:///p' }
  assert(vim.deep_equal(by_name.PallasiteCheck.args(ctx, {}), { 'file:///p/add.py' }))
  assert(vim.deep_equal(by_name.PallasiteCheckTier3.args(ctx, {}), { { uri = 'file:///p/add.py', tiers = { 0, 1, 2, 3 } } }))
  assert(vim.deep_equal(by_name.PallasiteTarget.args(ctx, { 'v5e' }), { 'v5e' }))
  local none, why = by_name.PallasiteTarget.args(ctx, {})
  assert(none == nil and why:find('PallasiteTarget v5e', 1, true))
  assert(vim.deep_equal(by_name.PallasiteTrust.args(ctx, {}), { 'file:///p' }))
  assert(vim.deep_equal(by_name.PallasiteTrust.args({ uri = 'file:///x.py' }, {}), {}))
  assert(vim.deep_equal(by_name.PallasiteCheckScript.args(ctx, {}), { { uri = 'file:///p/add.py', script = true } }))
  assert(by_name.PallasiteCheckScript.server == 'pallasite.check')
end

cases.explain_arguments = function()
  local explain
  for _, e in ipairs(commands.COMMANDS) do
    if e.name == 'PallasiteExplain' then explain = e end
  end
  assert(explain.server == 'pallasite.explain' and explain.nargs == '?')
  local diagnostics = {
    { lnum = 3, col = 0, end_lnum = 3, end_col = 4, code = 'E501' },
    { lnum = 3, col = 10, end_lnum = 3, end_col = 20, code = 'PLS001' },
    { lnum = 3, col = 22, end_lnum = 3, end_col = 30, code = 'PLS007' },
    { lnum = 9, col = 0, end_lnum = 9, end_col = 5, code = 'PLS201' },
  }
  -- nvim_win_get_cursor: 1-based row, 0-based column.
  local at = function(row, col) return { cursor = { row, col }, diagnostics = diagnostics } end
  assert(vim.deep_equal(explain.args(at(4, 25), {}), { 'PLS007' }))
  assert(vim.deep_equal(explain.args(at(4, 12), {}), { 'PLS001' }))
  assert(vim.deep_equal(explain.args(at(4, 2), {}), { 'PLS001' }), 'on the line, not under the cursor')
  assert(vim.deep_equal(explain.args(at(10, 40), {}), { 'PLS201' }))
  local none, why = explain.args(at(6, 0), {})
  assert(none == nil and why:find(':PallasiteExplain PLS201', 1, true), why)
  assert(vim.deep_equal(explain.args(at(6, 0), { ' pls201 ' }), { 'PLS201' }))
  none, why = explain.args(at(4, 12), { 'tiling' })
  assert(none == nil and why:find('"tiling" is not a finding code', 1, true), why)
end

cases.command_problems = function()
  assert(commands.problem(nil, { ok = true }) == nil)
  assert(commands.problem(nil, { ok = false, message = 'not trusted' }) == 'not trusted')
  assert(commands.problem({ message = 'boom' }, nil) == 'boom')
end

cases.sibling_cmd = function()
  assert(vim.deep_equal(commands.sibling_cmd({ 'pallasite', 'serve' }, { '--version' }), { 'pallasite', '--version' }))
  assert(vim.deep_equal(commands.sibling_cmd({ '/py', '-m', 'pallasite.server.cli', 'serve', '--x' }, { 'settings', '--schema' }),
    { '/py', '-m', 'pallasite.server.cli', 'settings', '--schema' }))
  assert(commands.sibling_cmd({ 'other-server' }, { '--version' }) == nil)
  assert(commands.sibling_cmd(function() end, { '--version' }) == nil)
end

cases.options = function()
  local o = pallasite.resolve({ python = '/venv/bin/python', settings = { target = 'v5e' } })
  assert(vim.deep_equal(o.cmd, { '/venv/bin/python', '-m', 'pallasite.server.cli', 'serve' }))
  assert(vim.deep_equal(o.root_markers, { 'pyproject.toml', '.git' }))
  assert(vim.deep_equal(pallasite.resolve({ cmd = { 'x' } }).cmd, { 'x' }), 'a cmd list replaces, not merges')
  assert(vim.deep_equal(pallasite.resolve(nil).cmd, { 'pallasite', 'serve' }))
  local ok, err = pcall(pallasite.resolve, { settings = 'v5e' })
  assert(not ok and tostring(err):find('settings', 1, true), tostring(err))
  local cfg = pallasite.lsp_config(pallasite.resolve({}))
  assert(vim.json.encode(cfg.settings) == '{"pallasite":{}}', vim.json.encode(cfg.settings))
  assert(vim.json.encode(cfg.init_options) == '{}')
  assert(cfg.handlers['pallasite/status'] ~= nil and cfg.handlers['window/showMessageRequest'] ~= nil)
  assert(cfg.handlers['window/showDocument'] == plans.on_show_document)
end

cases.settings_problems = function()
  local schema = {
    properties = {
      target = { type = 'string', enum = { 'v5e', 'v6e' } },
      tiers = { type = 'array' },
      check = { type = 'object', properties = { debounceMs = { type = 'integer' } } },
      severity = { type = 'object' },
    },
  }
  assert(#health.settings_problems({ target = 'v5e', tiers = { 0 }, check = { debounceMs = 5 }, severity = {} }, schema) == 0)
  local problems = health.settings_problems({ targt = 'v5e', target = 'v9', check = { debounceMs = 1.5, extra = true } }, schema)
  table.sort(problems)
  assert(#problems == 4, vim.inspect(problems))
  assert(problems[1]:find("'check.debounceMs' should be an integer", 1, true), problems[1])
  assert(problems[2]:find("'target' is \"v9\"; allowed: v5e, v6e", 1, true), problems[2])
  assert(problems[3]:find("unknown setting 'check.extra'", 1, true), problems[3])
  assert(problems[4]:find("unknown setting 'targt'", 1, true), problems[4])
end

cases.worker_python = function()
  assert(health.worker_python({ '/py', '-m', 'pallasite.server.cli', 'serve' }, {}) == '/py')
  assert(health.worker_python({ '/py', '-m', 'x' }, { worker = { interpreter = '/other' } }) == '/other')
  local script = vim.fn.tempname()
  vim.fn.mkdir(script, 'p')
  local exe = script .. '/pallasite'
  vim.fn.writefile({ '#!/opt/venv/bin/python3.11', 'print(1)' }, exe)
  vim.fn.setfperm(exe, 'rwxr-xr-x')
  local python, how = health.worker_python({ exe, 'serve' }, {})
  assert(python == '/opt/venv/bin/python3.11', tostring(python) .. ' ' .. how)
  vim.fn.delete(script, 'rf')
end

cases.optimize_and_search_arguments = function()
  local by_name = {}
  for _, e in ipairs(commands.COMMANDS) do by_name[e.name] = e end
  local ctx = { uri = 'file:///p/add.py' }
  assert(vim.deep_equal(by_name.PallasiteOptimize.args(ctx, {}), { { uri = 'file:///p/add.py', mode = 'auto' } }))
  assert(vim.deep_equal(by_name.PallasiteOptimize.args(ctx, { 'step' }), { { uri = 'file:///p/add.py', mode = 'step' } }))
  assert(vim.deep_equal(by_name.PallasiteOptimize.args(ctx, { '5', 'step' }),
    { { uri = 'file:///p/add.py', mode = 'step', iterations = 5 } }))
  assert(vim.deep_equal(by_name.PallasiteOptimize.args(ctx, { 'auto', '2' }),
    { { uri = 'file:///p/add.py', mode = 'auto', iterations = 2 } }))
  for _, bad in ipairs({ { 'fast' }, { '0' }, { '1.5' }, { 'inf' }, { '0x10' }, { '-2' }, { 'step', 'auto' }, { '2', '3' } }) do
    local none, why = by_name.PallasiteOptimize.args(ctx, bad)
    assert(none == nil and why:find('give step or auto and a number of iterations', 1, true), vim.inspect(bad))
  end
  assert(by_name.PallasiteOptimize.server == 'pallasite.optimize')
  assert(vim.deep_equal(by_name.PallasiteSearch.args(ctx, {}), { { uri = 'file:///p/add.py' } }))
  assert(vim.deep_equal(by_name.PallasiteSearch.args(ctx, { 'evolve' }), { { uri = 'file:///p/add.py', algo = 'evolve' } }))
  assert(vim.deep_equal(by_name.PallasiteSearch.args(ctx, { 'beam', 'width=2', 'keepFactor=1.1' }),
    { { uri = 'file:///p/add.py', algo = 'beam', width = 2, keepFactor = 1.1 } }))
  assert(vim.deep_equal(by_name.PallasiteSearch.args(ctx, { 'budget=4' }), { { uri = 'file:///p/add.py', budget = 4 } }))
  local none, why = by_name.PallasiteSearch.args(ctx, { 'greedy' })
  assert(none == nil and why:find('unknown search algorithm "greedy"; choose one of parallel, beam, evolve', 1, true), why)
  none, why = by_name.PallasiteSearch.args(ctx, { 'beam', 'wdth=2' })
  assert(none == nil and why:find('unknown search knob "wdth"; known: budget, seed', 1, true), why)
  for _, bad in ipairs({ 'width=two', 'width=nan', 'width=0x2', 'width=inf' }) do
    none, why = by_name.PallasiteSearch.args(ctx, { 'beam', bad })
    assert(none == nil and why:find('the value must be a number', 1, true), bad .. ': ' .. tostring(why))
  end
  none, why = by_name.PallasiteSearch.args(ctx, { 'beam', 'parallel' })
  assert(none == nil and why:find('give the algorithm first, then knobs as name=number', 1, true), why)
  assert(by_name.PallasiteSearch.server == 'pallasite.search')
end

cases.plan_commands_act_on_the_plan_shown = function()
  local by_name = {}
  for _, e in ipairs(commands.COMMANDS) do by_name[e.name] = e end
  local plan = { uri = 'file:///p/.pallasite/plans/r-1.md', path = '/p/.pallasite/plans/r-1.md', bufnr = 4, text = 'new plan\n' }
  assert(vim.deep_equal(by_name.PallasiteApprove.args({ plan = plan }, {}), { { uri = plan.uri } }))
  assert(vim.deep_equal(by_name.PallasiteStop.args({ plan = plan }, {}), { { uri = plan.uri } }))
  assert(vim.deep_equal(by_name.PallasiteRevise.args({ plan = plan }, {}), { { uri = plan.uri, text = 'new plan\n' } }))
  assert(by_name.PallasiteApprove.server == 'pallasite.optimize.approve' and by_name.PallasiteRevise.server == 'pallasite.optimize.revise'
    and by_name.PallasiteStop.server == 'pallasite.optimize.stop')
  for _, name in ipairs({ 'PallasiteApprove', 'PallasiteRevise', 'PallasiteStop' }) do
    local none, why = by_name[name].args({ uri = 'file:///p/add.py' }, {})
    assert(none == nil and why == commands.NO_PLAN, name)
  end
  assert(vim.deep_equal(vim.tbl_map(function(e) return e.name end, commands.available({ 'pallasite.optimize.approve' })),
    { 'PallasiteApprove' }))
end

cases.plan_target = function()
  assert(plans.is_plan_path('/p/.pallasite/plans/r-1.md') and plans.is_plan_path('C:\\p\\.pallasite\\plans\\r-1.diff'))
  assert(not plans.is_plan_path('/p/add.py') and not plans.is_plan_path('/p/.pallasite/search/report.html'))
  assert(not plans.is_plan_path(nil))
  local names = { [1] = '/p/add.py', [2] = '/p/.pallasite/plans/r-1.md', [3] = '/p/.pallasite/plans/r-1.diff', [5] = '/p/other.py' }
  local name_of = function(b) return names[b] end
  local shown = {
    { uri = 'file:///p/.pallasite/plans/r-1.md', path = names[2], bufnr = 2, client_id = 1 },
    { uri = 'file:///p/.pallasite/plans/r-1.diff', path = names[3], bufnr = 3, client_id = 1 },
  }
  assert(plans.target(2, shown, name_of) == shown[1], 'a plan buffer acts on itself')
  assert(plans.target(1, shown, name_of) == shown[2], 'elsewhere: the last document shown')
  names[3] = nil -- its buffer was wiped: the one before it
  assert(plans.target(5, shown, name_of) == shown[1])
  assert(plans.target(1, {}, name_of) == nil)
  local unknown = plans.target(7, {}, function() return '/q/.pallasite/plans/x-2.md' end)
  assert(unknown.bufnr == 7 and unknown.path == '/q/.pallasite/plans/x-2.md' and unknown.uri == 'file:///q/.pallasite/plans/x-2.md')
end

cases.show_document = function()
  -- external (the search report): vim.ui.open; where it cannot open, the path is shown instead.
  local opened, notes = {}, {}
  local ui_open, notify = vim.ui.open, vim.notify
  vim.notify = function(msg) table.insert(notes, msg) end
  vim.ui.open = function(uri) table.insert(opened, uri); return nil, 'no opener' end
  local answer = plans.on_show_document(nil, { uri = 'file:///tmp/p/.pallasite/search/r.html', external = true }, { client_id = 1 })
  vim.ui.open, vim.notify = ui_open, notify
  assert(answer.success == false and opened[1] == 'file:///tmp/p/.pallasite/search/r.html', vim.inspect(answer))
  assert(notes[1] == 'pallasite: the server has a document for you: /tmp/p/.pallasite/search/r.html', notes[1])
  -- a plan document: opened in a split below, focus kept when takeFocus is false, commands on it.
  local dir = vim.fn.tempname() .. '/.pallasite/plans'
  vim.fn.mkdir(dir, 'p')
  vim.fn.writefile({ 'Try big blocks' }, dir .. '/r-1.md')
  vim.fn.writefile({ '-old', '+new' }, dir .. '/r-1.diff')
  local plans_seen = {}
  local previous = plans.on_plan_buffer
  plans.on_plan_buffer = function(b) table.insert(plans_seen, b); commands.attach_plan(b) end
  local start_win = vim.api.nvim_get_current_win()
  answer = plans.on_show_document(nil, { uri = vim.uri_from_fname(dir .. '/r-1.md'), takeFocus = false }, { client_id = 3 })
  assert(answer.success == true and vim.api.nvim_get_current_win() == start_win, 'focus stays')
  assert(#vim.api.nvim_tabpage_list_wins(0) == 2, 'one split')
  local first = plans.shown[#plans.shown]
  assert(first.client_id == 3 and first.bufnr == plans_seen[1] and vim.api.nvim_buf_get_lines(first.bufnr, 0, -1, false)[1] == 'Try big blocks')
  local names = vim.tbl_keys(vim.api.nvim_buf_get_commands(first.bufnr, {}))
  table.sort(names)
  assert(vim.deep_equal(names, { 'PallasiteApprove', 'PallasiteRevise', 'PallasiteStop' }), vim.inspect(names))
  answer = plans.on_show_document(nil, { uri = vim.uri_from_fname(dir .. '/r-1.diff'), takeFocus = true }, { client_id = 3 })
  assert(#vim.api.nvim_tabpage_list_wins(0) == 2, 'the plan window is reused')
  assert(vim.api.nvim_get_current_buf() == plans.shown[#plans.shown].bufnr, 'takeFocus: the diff is current')
  assert(vim.wo.winbar == plans.WINBAR)
  assert(plans.target(first.bufnr) == first and plans.target(vim.api.nvim_get_current_buf()) == plans.shown[#plans.shown])
  plans.on_plan_buffer = previous
  vim.fn.delete(vim.fs.dirname(vim.fs.dirname(dir)), 'rf')
end

local out = {}
for name, fn in pairs(cases) do
  local ok, err = pcall(fn)
  out[name] = ok and 'ok' or tostring(err)
end
local f = assert(io.open(_G.arg[1], 'w'))
f:write(vim.json.encode(out))
f:close()
