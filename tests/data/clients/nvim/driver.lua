-- Runs one scenario (PALLASITE_TEST_SCENARIO) against a real `pallasite serve`, writes what it
-- saw as JSON to PALLASITE_TEST_RESULT and quits. The Python test asserts on that JSON.
local started = vim.uv.hrtime() -- after init.lua (setup) and the file's load: the client is starting
local result = { scenario = vim.env.PALLASITE_TEST_SCENARIO, steps = {} }
local notes = {}
local original_notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(notes, { msg = msg, level = level })
  return original_notify(msg, level, opts)
end

--- Pump the event loop until cond() is true; error naming `what` on timeout.
local function wait_for(what, cond, ms)
  local ok = vim.wait(ms or 20000, cond, 20)
  if not ok then
    error('timed out waiting for ' .. what, 0)
  end
end

local function step(name, value)
  table.insert(result.steps, name)
  result[name] = value
end

local function pallasite_client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr or 0, name = 'pallasite' })[1]
end

local function related_messages(d)
  local lsp = (d.user_data and d.user_data.lsp) or {}
  return vim.tbl_map(function(rel) return rel.message end, lsp.relatedInformation or {})
end

local function diagnostics(bufnr)
  return vim.tbl_map(function(d)
    return { lnum = d.lnum, col = d.col, code = d.code, severity = d.severity, message = d.message, source = d.source,
             related = related_messages(d) }
  end, vim.diagnostic.get(bufnr or 0))
end

local function buffer_commands(bufnr)
  local names = vim.tbl_keys(vim.api.nvim_buf_get_commands(bufnr or 0, {}))
  table.sort(names)
  return names
end

--- Replace vim.ui.select with an answer chosen by title; record every question.
local function answer_questions_with(title)
  result.questions = {}
  vim.ui.select = function(items, opts, on_choice)
    table.insert(result.questions, { prompt = opts.prompt, kind = opts.kind,
      items = vim.tbl_map(function(i) return opts.format_item and opts.format_item(i) or i end, items) })
    for _, item in ipairs(items) do
      if item.title == title then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
end

--- The floating windows open now: their buffer's filetype and text.
local function floats()
  local out = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= '' then
      local b = vim.api.nvim_win_get_buf(win)
      table.insert(out, { filetype = vim.bo[b].filetype,
        text = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n') })
    end
  end
  return out
end

--- Run :PallasiteExplain with `arg`; the server's answer and the floats shown after it.
local function explain(arg)
  local answer
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteCommandDone', once = true,
    callback = function(ev) answer = ev.data.result or vim.NIL end })
  vim.cmd('PallasiteExplain' .. arg)
  wait_for('the answer to :PallasiteExplain' .. arg, function() return answer ~= nil end)
  return { result = answer, floats = floats() }
end

local scenarios = {}

-- A tier-0 finding arrives at the right line; the advertised commands exist; :PallasiteTarget
-- goes to the server and comes back as a status notification; a bad chip gets the server's message.
function scenarios.diagnostics_and_target()
  local buf = vim.api.nvim_get_current_buf()
  wait_for('the pallasite client to attach', function() return pallasite_client(buf) ~= nil end)
  local client = pallasite_client(buf)
  step('root_dir', client.root_dir)
  step('advertised', require('pallasite.commands').advertised(client))
  wait_for('a diagnostic', function() return #vim.diagnostic.get(buf) > 0 end)
  step('ms_to_first_diagnostic', math.floor((vim.uv.hrtime() - started) / 1e6))
  step('diagnostics', diagnostics(buf))
  step('buffer_commands', buffer_commands(buf))
  wait_for('a first pallasite/status', function() return require('pallasite').status(buf) ~= nil end)
  step('status_before', require('pallasite').status(buf))
  step('statusline_before', require('pallasite').statusline(buf))
  local seen, last_target = {}, (require('pallasite').status(buf) or {}).target
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteStatus', callback = function(ev)
    -- the targets the status bar went through (a status also comes when a file's verdict changes)
    if ev.data.status.target ~= last_target then
      table.insert(seen, ev.data.status.target)
      last_target = ev.data.status.target
    end
  end })
  local answered = false
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteCommandDone', once = true, callback = function() answered = true end })
  vim.cmd('PallasiteTarget v5e')
  wait_for('the answer to :PallasiteTarget v5e', function() return answered end)
  wait_for('the status to say v5e', function() return (require('pallasite').status(buf) or {}).target == 'v5e' end)
  step('status_after', require('pallasite').status(buf))
  step('statusline_after', require('pallasite').statusline(buf))
  step('targets_seen', seen)
  step('command_result', require('pallasite.commands').last_result.result)
  local done = false
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteCommandDone', once = true, callback = function() done = true end })
  vim.cmd('PallasiteTarget v9x')
  wait_for('the answer to a bad chip', function() return done end)
  step('bad_chip_notes', vim.tbl_filter(function(n) return n.msg:find('v9x', 1, true) ~= nil end, notes))
  step('completion', vim.fn.getcompletion('PallasiteTarget v5', 'cmdline'))
  -- :PallasiteExplain with the cursor on the finding, then with a code given: the server's markdown
  -- is shown in a floating window.
  local first = vim.diagnostic.get(buf)[1]
  vim.api.nvim_win_set_cursor(0, { first.lnum + 1, first.col })
  step('explain_completion', vim.fn.getcompletion('PallasiteExplain P', 'cmdline'))
  step('explained_at_cursor', explain(''))
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  step('explained_typed', explain(' pls201'))
  local before = #notes
  pcall(vim.cmd, 'PallasiteExplain') -- an error-level message: raised inside a script, shown to a user
  step('explain_nothing_here', vim.list_slice(notes, before + 1))
end

-- The server asks to trust the folder when a kernel opens; the plugin's handler answers "Trust";
-- the server records it (status trusted, trust store); opening a second kernel does not ask again.
function scenarios.trust()
  answer_questions_with('Trust')
  local buf = vim.api.nvim_get_current_buf()
  wait_for('the pallasite client to attach', function() return pallasite_client(buf) ~= nil end)
  wait_for('the trust question', function() return #result.questions > 0 end)
  wait_for('the status to say trusted', function() return (require('pallasite').status(buf) or {}).trusted == true end)
  step('status', require('pallasite').status(buf))
  step('asked_by_plugin', require('pallasite.prompt').asked)
  -- The lowering's verdict: its own PLS1xx diagnostic, or (when it repeats a tier-0 finding, which
  -- the server then shows once) a "jax lowering ... agrees" note on the tier-0 diagnostic.
  local function compiler_codes()
    return vim.tbl_filter(function(d)
      if tostring(d.code):match('^PLS1') then return true end
      for _, message in ipairs(related_messages(d)) do
        if tostring(message):match('jax lowering .* agrees') then return true end
      end
      return false
    end, vim.diagnostic.get(buf))
  end
  wait_for('a tier-1 (lowering) diagnostic once trusted', function() return #compiler_codes() > 0 end, 60000)
  step('compiler_diagnostics', diagnostics(buf))
  -- :PallasiteCheck end to end: the server's answer, and its work-done progress seen by the plugin.
  local progress = {}
  vim.api.nvim_create_autocmd('LspProgress', { callback = function(ev)
    local value = ev.data.params.value
    table.insert(progress, { kind = value.kind, title = value.title, line = require('pallasite').statusline(buf) })
  end })
  local answer
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteCommandDone', once = true,
    callback = function(ev) answer = ev.data.result or vim.NIL end })
  vim.cmd('PallasiteCheck')
  wait_for('the answer to :PallasiteCheck', function() return answer ~= nil end, 60000)
  step('check_result', answer)
  step('check_progress', progress)
  step('statusline_after_check', require('pallasite').statusline(buf))
  vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.PALLASITE_TEST_SECOND_FILE))
  local second = vim.api.nvim_get_current_buf()
  wait_for('the client to attach to the second kernel', function() return pallasite_client(second) ~= nil end)
  wait_for('diagnostics of the second kernel', function() return #vim.diagnostic.get(second) > 0 end, 30000)
  vim.wait(1500) -- time for a second question, if the server were to ask one
  step('questions_total', #result.questions)
  -- :PallasiteCheckScript on a script with no example inputs: the server runs its __main__ and
  -- the lowering's verdict on the pallas_call it made arrives at the kernel's line.
  vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.PALLASITE_TEST_SCRIPT_FILE))
  local script = vim.api.nvim_get_current_buf()
  wait_for('the client to attach to the script', function() return pallasite_client(script) ~= nil end)
  wait_for('the buffer-local :PallasiteCheckScript', function()
    return vim.api.nvim_buf_get_commands(script, {}).PallasiteCheckScript ~= nil
  end)
  local script_answer
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteCommandDone', once = true,
    callback = function(ev) script_answer = { command = ev.data.command, result = ev.data.result or vim.NIL } end })
  vim.cmd('PallasiteCheckScript')
  wait_for('the answer to :PallasiteCheckScript', function() return script_answer ~= nil end, 90000)
  step('script_answer', script_answer)
  wait_for('a lowering diagnostic from the script run', function()
    for _, d in ipairs(vim.diagnostic.get(script)) do
      if tostring(d.code):match('^PLS1') then return true end
    end
    return false
  end, 30000)
  step('script_diagnostics', diagnostics(script))
end

-- A later session in the same folder (same trust store): no question, trusted from the start.
function scenarios.trust_remembered()
  answer_questions_with('Not now')
  local buf = vim.api.nvim_get_current_buf()
  wait_for('the pallasite client to attach', function() return pallasite_client(buf) ~= nil end)
  wait_for('a first pallasite/status', function() return require('pallasite').status(buf) ~= nil end)
  vim.wait(1500)
  step('status', require('pallasite').status(buf))
  step('questions_total', #result.questions)
end

-- "Not now": the folder stays untrusted, the statusline says so, only tier 0 runs.
function scenarios.not_now()
  answer_questions_with('Not now')
  local buf = vim.api.nvim_get_current_buf()
  wait_for('the trust question', function() return #result.questions > 0 end)
  wait_for('a diagnostic', function() return #vim.diagnostic.get(buf) > 0 end)
  vim.wait(1000)
  step('status', require('pallasite').status(buf))
  step('statusline', require('pallasite').statusline(buf))
  step('asked_by_plugin', require('pallasite.prompt').asked)
  -- Changing one's mind: :PallasiteTrust trusts the client's root folder on the server.
  local answer
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteCommandDone', once = true,
    callback = function(ev) answer = ev.data.result or vim.NIL end })
  vim.cmd('PallasiteTrust')
  wait_for('the answer to :PallasiteTrust', function() return answer ~= nil end)
  wait_for('the status to say trusted', function() return require('pallasite').status(buf).trusted end)
  step('trust_result', answer)
  step('statusline_trusted', require('pallasite').statusline(buf))
end

-- Step-by-step optimize from Neovim with the scripted provider: :PallasiteOptimize step 2, the
-- plan opens (window/showDocument) in a split, :PallasiteApprove there, the diff replaces it,
-- :PallasiteApprove from the kernel's window, the second plan edited (unsaved) and
-- :PallasiteRevise, the last diff approved; then the run's answer. Every executeCommand sent is kept.
function scenarios.optimize_step()
  answer_questions_with('Trust')
  local kernel = vim.api.nvim_get_current_buf()
  local kernel_win = vim.api.nvim_get_current_win()
  wait_for('the pallasite client to attach', function() return pallasite_client(kernel) ~= nil end)
  wait_for('the buffer-local :PallasiteOptimize', function()
    return vim.api.nvim_buf_get_commands(kernel, {}).PallasiteOptimize ~= nil
  end)
  step('buffer_commands', buffer_commands(kernel))
  step('optimize_completion', vim.fn.getcompletion('PallasiteOptimize s', 'cmdline'))
  step('search_completion', vim.fn.getcompletion('PallasiteSearch ', 'cmdline'))
  local client = pallasite_client(kernel)
  local sent = {}
  local request = client.request
  client.request = function(self, method, params, ...)
    if method == 'workspace/executeCommand' then
      table.insert(sent, vim.deepcopy(params))
    end
    return request(self, method, params, ...)
  end
  local answers, shown = {}, {}
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteCommandDone', callback = function(ev)
    table.insert(answers, { command = ev.data.command, result = ev.data.result or vim.NIL })
  end })
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasitePlanShown', callback = function(ev)
    local win = vim.api.nvim_get_current_win()
    table.insert(shown, { uri = ev.data.uri, bufnr = ev.data.bufnr, focused = vim.api.nvim_win_get_buf(win) == ev.data.bufnr,
      windows = #vim.api.nvim_tabpage_list_wins(0), winbar = vim.wo[win].winbar,
      commands = buffer_commands(ev.data.bufnr), name = vim.api.nvim_buf_get_name(ev.data.bufnr),
      text = table.concat(vim.api.nvim_buf_get_lines(ev.data.bufnr, 0, -1, false), '\n') })
  end })
  local function answer_to(command, count)
    wait_for('answer ' .. count .. ' to ' .. command, function()
      return #vim.tbl_filter(function(a) return a.command == command end, answers) >= count
    end, 120000)
  end
  local function shown_count(n)
    wait_for('document ' .. n .. ' shown by the server', function()
      local running = vim.tbl_filter(function(a) return a.command == 'pallasite.optimize' end, answers)[1]
      if running then
        error('the optimize run ended early: ' .. vim.json.encode(running.result), 0)
      end
      return #shown >= n
    end, 180000)
  end
  vim.cmd('PallasiteOptimize step 2')
  shown_count(1)
  vim.cmd('PallasiteApprove') -- in the plan's window (showDocument took focus)
  answer_to('pallasite.optimize.approve', 1)
  shown_count(2)
  vim.api.nvim_set_current_win(kernel_win)
  vim.cmd('PallasiteApprove') -- from the kernel: acts on the diff shown
  answer_to('pallasite.optimize.approve', 2)
  shown_count(3)
  local plan2 = shown[3].bufnr
  vim.api.nvim_buf_set_lines(plan2, 0, -1, false, { 'Use 128-row blocks, keep the add', 'Edited in Neovim.' })
  step('plan2_modified_before_revise', vim.bo[plan2].modified)
  vim.cmd('PallasiteRevise')
  answer_to('pallasite.optimize.revise', 1)
  step('plan2_modified_after_revise', vim.bo[plan2].modified)
  step('plan2_file', table.concat(vim.fn.readfile(vim.api.nvim_buf_get_name(plan2)), '\n'))
  shown_count(4)
  vim.cmd('PallasiteApprove')
  answer_to('pallasite.optimize', 1)
  step('shown', shown)
  step('sent', vim.deepcopy(sent))
  step('answers', vim.deepcopy(answers))
  -- After the run, nothing waits: a late :PallasiteStop gets the server's message.
  local before = #notes
  vim.cmd('PallasiteStop')
  answer_to('pallasite.optimize.stop', 1)
  step('late_stop_notes', vim.list_slice(notes, before + 1))
end

-- :PallasiteSearch parallel trajectories=1 iterations=1 with one scripted node: the server's edit
-- lands in the buffer, and the report (an external showDocument) goes to vim.ui.open, stubbed here
-- to fail so the plugin's fallback (the path, as a message) is seen.
function scenarios.search()
  answer_questions_with('Trust')
  local opened = {}
  vim.ui.open = function(uri) table.insert(opened, uri); return nil, 'no opener in this test' end
  local buf = vim.api.nvim_get_current_buf()
  wait_for('the pallasite client to attach', function() return pallasite_client(buf) ~= nil end)
  wait_for('the buffer-local :PallasiteSearch', function()
    return vim.api.nvim_buf_get_commands(buf, {}).PallasiteSearch ~= nil
  end)
  local answer
  vim.api.nvim_create_autocmd('User', { pattern = 'PallasiteCommandDone', callback = function(ev)
    if ev.data.command == 'pallasite.search' then answer = { arguments = ev.data.arguments, result = ev.data.result or vim.NIL } end
  end })
  vim.cmd('PallasiteSearch parallel trajectories=1 iterations=1')
  wait_for('the answer to :PallasiteSearch', function() return answer ~= nil end, 180000)
  step('search', answer)
  step('opened', opened)
  step('buffer_text', table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n') .. '\n')
end

-- :checkhealth pallasite, captured from its buffer.
function scenarios.health()
  answer_questions_with('Not now') -- the opened kernel may make the server ask; never block on it
  vim.cmd('checkhealth pallasite')
  step('health', vim.api.nvim_buf_get_lines(0, 0, -1, false))
end

local ok, err = pcall(scenarios[result.scenario])
result.ok = ok
result.error = not ok and tostring(err) or nil
result.notes = notes
local f = assert(io.open(vim.env.PALLASITE_TEST_RESULT, 'w'))
f:write(vim.json.encode(result))
f:close()
vim.cmd('qa!')
