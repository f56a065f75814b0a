--- The :Pallasite* user commands. Each forwards to one server command with
--- workspace/executeCommand and exists (buffer-local) only where the attached server advertises
--- that command in `executeCommandProvider.commands`: no command that leads nowhere.

local plans = require('pallasite.plans')

local M = {}

M.MODES = { 'step', 'auto' }
M.ALGOS = { 'parallel', 'beam', 'evolve' }

--- Server contract (server/lsp.py): pallasite.check(uri) runs the configured tiers,
--- pallasite.check({uri = ..., tiers = {...}}) the given ones (tier 3: TPU interpret mode);
--- pallasite.check({uri = ..., script = true}) runs the file's __main__ and checks every
--- pallas_call it makes; pallasite.selectTarget(chip); pallasite.trustFolder(folderUri?) (none:
--- every workspace folder); pallasite.explain(code) answers {ok, code, title, markdown}.
--- server/editor/optimize_lsp.py: pallasite.optimize({uri, mode = 'auto'|'step', iterations}) answers when
--- the run ends; in step mode the server opens each plan / candidate diff with window/showDocument
--- (plans.lua) and waits for pallasite.optimize.approve / .revise / .stop({uri = <that document>});
--- revise takes the document's text (`text`, else the file) as the new plan. server/editor/search_lsp.py:
--- pallasite.search({uri, algo = 'parallel'|'beam'|'evolve', <knob> = N ...}).
--- The server answers {ok = false, message = ...} when it could not do it; that message is shown.
--- `args(ctx, fargs)` returns the arguments, or nil and a message when the command cannot run;
--- `show(result)` (optional) presents a successful answer.
M.NO_PLAN = 'no plan or diff document is shown; run :PallasiteOptimize step first'

--- The arguments of approve / revise / stop: the plan or diff document shown (revise: with its
--- text as it is in the buffer, the instruction).
local function plan_args(with_text)
  return function(ctx)
    if not ctx.plan then
      return nil, M.NO_PLAN
    end
    return { { uri = ctx.plan.uri, text = with_text and ctx.plan.text or nil } }
  end
end

--- The arguments of optimize / search: the options parsed from the command's words by
--- M[parse] (looked up at call time), with the document's uri.
local function options_args(parse)
  return function(ctx, fargs)
    local options, problem = M[parse](fargs)
    if not options then
      return nil, problem
    end
    options.uri = ctx.uri
    return { options }
  end
end

M.COMMANDS = {
  {
    name = 'PallasiteCheck',
    server = 'pallasite.check',
    desc = 'pallasite: check this file now (all configured tiers)',
    args = function(ctx)
      return { ctx.uri }
    end,
  },
  {
    name = 'PallasiteCheckTier3',
    server = 'pallasite.check',
    desc = 'pallasite: check this file with all tiers, including tier 3 (TPU interpret mode)',
    args = function(ctx)
      return { { uri = ctx.uri, tiers = { 0, 1, 2, 3 } } }
    end,
  },
  {
    name = 'PallasiteTarget',
    server = 'pallasite.selectTarget',
    desc = 'pallasite: set the target TPU chip, e.g. :PallasiteTarget v5e',
    nargs = 1,
    args = function(_, fargs)
      if #fargs ~= 1 then
        return nil, 'give one chip name, e.g. :PallasiteTarget v5e'
      end
      return { fargs[1] }
    end,
  },
  {
    name = 'PallasiteTrust',
    server = 'pallasite.trustFolder',
    desc = "pallasite: trust this folder (run its kernels in a pallasite worker)",
    args = function(ctx)
      return ctx.root_uri and { ctx.root_uri } or {}
    end,
  },
  {
    name = 'PallasiteCheckScript',
    server = 'pallasite.check',
    desc = "pallasite: check as a script (run this file's __main__, check every pallas_call it makes)",
    args = function(ctx)
      return { { uri = ctx.uri, script = true } }
    end,
  },
  {
    name = 'PallasiteExplain',
    server = 'pallasite.explain',
    desc = 'pallasite: explain a finding code (default: the diagnostic under the cursor), e.g. :PallasiteExplain PLS201',
    nargs = '?',
    args = function(ctx, fargs)
      if fargs[1] then
        local code = M.finding_code(fargs[1])
        if not code then
          return nil, ('%q is not a finding code; give one such as PLS001'):format(fargs[1])
        end
        return { code }
      end
      local code = M.code_at(ctx.diagnostics or {}, ctx.cursor[1] - 1, ctx.cursor[2])
      if not code then
        return nil, 'no pallasite finding under the cursor; give a code, e.g. :PallasiteExplain PLS201'
      end
      return { code }
    end,
    show = function(result)
      if type(result.markdown) == 'string' then
        M.show_markdown(result.markdown, result.code)
      end
    end,
  },
  {
    name = 'PallasiteOptimize',
    server = 'pallasite.optimize',
    desc = 'pallasite: optimize this kernel (:PallasiteOptimize [step] [iterations]; default auto, server default iterations)',
    nargs = '*',
    args = options_args('optimize_options'),
    show = function(result)
      if type(result.written) == 'string' then
        vim.notify('pallasite: the winner is in ' .. result.written, vim.log.levels.INFO)
      end
    end,
  },
  {
    name = 'PallasiteApprove',
    server = 'pallasite.optimize.approve',
    desc = 'pallasite: approve the plan / candidate diff shown (step-by-step optimize)',
    plan = true,
    args = plan_args(false),
  },
  {
    name = 'PallasiteRevise',
    server = 'pallasite.optimize.revise',
    desc = 'pallasite: revise: your edits to the plan document shown are the instruction',
    plan = true,
    save = true,
    args = plan_args(true),
  },
  {
    name = 'PallasiteStop',
    server = 'pallasite.optimize.stop',
    desc = 'pallasite: stop the step-by-step optimize run waiting on the document shown',
    plan = true,
    args = plan_args(false),
  },
  {
    name = 'PallasiteSearch',
    server = 'pallasite.search',
    desc = 'pallasite: search for a faster kernel (:PallasiteSearch [parallel|beam|evolve] [knob=N ...])',
    nargs = '*',
    args = options_args('search_options'),
  },
}

--- The search knobs :PallasiteSearch passes on (server/editor/search_lsp.py's names; docs/search-eval.md
--- says what each costs).
M.SEARCH_KNOBS = { 'budget', 'seed', 'targetSpeedup', 'trajectories', 'iterations', 'width', 'depth', 'branches',
  'keepFactor', 'population', 'generations', 'crossoverRate' }

--- {algo?, knob = number ...} from :PallasiteSearch's words, or nil and what is wrong.
--- @param fargs string[]
--- @return table|nil, string|nil
function M.search_options(fargs)
  local options = {}
  for i, word in ipairs(fargs or {}) do
    local key, value = word:match('^([%a]+)=(.+)$')
    if i == 1 and not key then
      if not vim.list_contains(M.ALGOS, word) then
        return nil, ('unknown search algorithm %q; choose one of %s'):format(word, table.concat(M.ALGOS, ', '))
      end
      options.algo = word
    elseif not key then
      return nil, ('%q: give the algorithm first, then knobs as name=number, e.g. :PallasiteSearch beam width=2'):format(word)
    elseif not vim.list_contains(M.SEARCH_KNOBS, key) then
      return nil, ('unknown search knob %q; known: %s'):format(key, table.concat(M.SEARCH_KNOBS, ', '))
    elseif not (value:match('^%d+$') or value:match('^%d*%.%d+$')) then
      return nil, ('%s=%s: the value must be a number'):format(key, value)
    else
      options[key] = tonumber(value)
    end
  end
  return options
end


--- {mode, iterations} from :PallasiteOptimize's words ('step' or 'auto', a positive count), or
--- nil and what is wrong.
--- @param fargs string[]
--- @return table|nil, string|nil
function M.optimize_options(fargs)
  local options = { mode = 'auto' }
  local seen_mode, seen_count = false, false
  for _, word in ipairs(fargs or {}) do
    local count = word:match('^%d+$') and tonumber(word) or nil
    if vim.list_contains(M.MODES, word) and not seen_mode then
      options.mode, seen_mode = word, true
    elseif count and count >= 1 and not seen_count then
      options.iterations, seen_count = count, true
    else
      return nil, ('%q: give step or auto and a number of iterations, e.g. :PallasiteOptimize step 3'):format(word)
    end
  end
  return options
end

--- A finding code as the server names them (PLS and three digits), normalised; nil if not one.
--- @return string|nil
function M.finding_code(text)
  local code = type(text) == 'string' and vim.trim(text):upper() or ''
  return code:match('^PLS%d%d%d$') and code or nil
end

--- The code of the pallasite diagnostic under a cursor (0-based line and column), else of the
--- first one on that line; nil if there is none. `diagnostics` are vim.diagnostic.get() items.
--- @return string|nil
function M.code_at(diagnostics, lnum, col)
  local on_line = nil
  for _, d in ipairs(diagnostics) do
    local code = M.finding_code(d.code and tostring(d.code))
    local end_lnum = d.end_lnum or d.lnum
    if code and d.lnum <= lnum and lnum <= end_lnum then
      local after = lnum > d.lnum or col >= d.col
      local before = lnum < end_lnum or col < (d.end_col or d.col + 1)
      if after and before then
        return code
      end
      on_line = on_line or code
    end
  end
  return on_line
end

--- Show markdown in a floating window at the cursor, closed when the cursor moves. Run again for
--- the same `code`, it enters the window (to scroll or yank); another code replaces it.
--- @return integer bufnr, integer winid
function M.show_markdown(markdown, code)
  local lines = vim.split(markdown, '\n', { plain = true })
  return vim.lsp.util.open_floating_preview(lines, 'markdown', {
    border = 'rounded',
    focus_id = 'pallasite-explain-' .. tostring(code),
    max_width = math.min(100, math.floor(vim.o.columns * 0.8)),
    max_height = math.floor(vim.o.lines * 0.6),
  })
end

--- Completion for :PallasiteExplain: the finding codes shown in the buffer.
function M.codes_in(bufnr, lead)
  local seen, out = {}, {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    local code = M.finding_code(d.code and tostring(d.code))
    if code and not seen[code] and vim.startswith(code, (lead or ''):upper()) then
      seen[code] = true
      out[#out + 1] = code
    end
  end
  table.sort(out)
  return out
end

--- The command ids a client's server advertises.
--- @return string[]
function M.advertised(client)
  local provider = client.server_capabilities and client.server_capabilities.executeCommandProvider
  local list = type(provider) == 'table' and provider.commands or {}
  return vim.tbl_filter(function(c)
    return type(c) == 'string'
  end, list)
end

--- The user commands available with this list of advertised server commands.
function M.available(advertised)
  return vim.tbl_filter(function(entry)
    return vim.list_contains(advertised, entry.server)
  end, M.COMMANDS)
end

--- Chip names for :PallasiteTarget completion, read once from the server's settings schema.
local chips_cache = nil

--- The server command line with its subcommand replaced: {'pallasite','serve'} -> {'pallasite', ...}.
--- @param cmd string[]|function
--- @param sub string[]
--- @return string[]|nil
function M.sibling_cmd(cmd, sub)
  if type(cmd) ~= 'table' then
    return nil
  end
  local out = {}
  for _, part in ipairs(cmd) do
    if part == 'serve' then
      vim.list_extend(out, sub)
      return out
    end
    out[#out + 1] = part
  end
  return nil
end

--- The JSON Schema of the server's settings (`pallasite settings --schema`), or nil and why not.
function M.settings_schema(cmd)
  local schema_cmd = M.sibling_cmd(cmd, { 'settings', '--schema' })
  if not schema_cmd then
    return nil, 'the server command line has no `serve` to replace'
  end
  local ok, result = pcall(function()
    return vim.system(schema_cmd, { text = true }):wait(20000)
  end)
  if not ok then
    return nil, tostring(result)
  end
  if result.code ~= 0 then
    return nil, (result.stderr ~= '' and result.stderr or ('exit code ' .. result.code))
  end
  local decoded_ok, schema = pcall(vim.json.decode, result.stdout)
  if not decoded_ok or type(schema) ~= 'table' then
    return nil, 'its output is not JSON'
  end
  return schema
end

function M.chips()
  if chips_cache == nil then
    local schema = M.settings_schema(require('pallasite').options.cmd)
    local target = schema and schema.properties and schema.properties.target
    chips_cache = target and target.enum or {}
  end
  return chips_cache
end

--- What went wrong with a command, from the request error or the server's {ok = false} answer.
--- @return string|nil
function M.problem(err, result)
  if err then
    return err.message or vim.inspect(err)
  end
  if type(result) == 'table' and result.ok == false then
    return type(result.message) == 'string' and result.message or 'the server could not do it'
  end
  return nil
end

--- The pallasite client for a buffer: the one attached to it; for a plan document (not attached:
--- it is not Python) the client that showed it, else the only pallasite client running.
function M.client_for(bufnr, plan)
  local attached = vim.lsp.get_clients({ bufnr = bufnr, name = 'pallasite' })[1]
  if attached then
    return attached
  end
  local shown_by = plan and plan.client_id and vim.lsp.get_client_by_id(plan.client_id)
  if shown_by then
    return shown_by
  end
  local all = vim.lsp.get_clients({ name = 'pallasite' })
  return #all == 1 and all[1] or nil
end

--- Run a palette entry for a buffer: find its pallasite client and send the command.
function M.run(entry, bufnr, fargs)
  local plan = entry.plan and plans.target(bufnr) or nil
  local client = M.client_for(bufnr, plan)
  if not client then
    vim.notify('pallasite: no pallasite server is attached to this buffer', vim.log.levels.ERROR)
    return
  end
  if plan and entry.save then
    local saved, why = plans.save(plan.bufnr)
    if not saved then
      vim.notify('pallasite: could not save ' .. plan.path .. ' (its text is sent anyway): ' .. why, vim.log.levels.WARN)
    end
    plan = vim.tbl_extend('force', plan, { text = plans.buffer_text(plan.bufnr) })
  end
  local ctx = {
    uri = vim.uri_from_bufnr(bufnr),
    root_uri = client.root_dir and vim.uri_from_fname(client.root_dir) or nil,
    cursor = vim.api.nvim_get_current_buf() == bufnr and vim.api.nvim_win_get_cursor(0) or { 1, 0 },
    diagnostics = vim.diagnostic.get(bufnr),
    plan = plan,
  }
  local args, problem = entry.args(ctx, fargs)
  if not args then
    vim.notify('pallasite: ' .. problem, vim.log.levels.ERROR)
    return
  end
  client:exec_cmd({ title = entry.desc, command = entry.server, arguments = args }, { bufnr = bufnr }, function(err, result)
    M.last_result = { command = entry.server, err = err, result = result }
    local problem = M.problem(err, result)
    if problem then
      vim.notify('pallasite: ' .. problem, vim.log.levels.WARN)
    elseif entry.show and type(result) == 'table' then
      entry.show(result)
    end
    vim.api.nvim_exec_autocmds('User', {
      pattern = 'PallasiteCommandDone',
      modeline = false,
      data = { command = entry.server, arguments = args, result = result, error = err },
    })
  end)
end

--- Create the buffer-local commands the client's server advertises.
function M.attach(client, bufnr)
  M.create(M.available(M.advertised(client)), bufnr)
end

--- Create these entries as buffer-local commands of `bufnr`.
function M.create(entries, bufnr)
  for _, entry in ipairs(entries) do
    vim.api.nvim_buf_create_user_command(bufnr, entry.name, function(cmd)
      M.run(entry, bufnr, cmd.fargs)
    end, {
      desc = entry.desc,
      nargs = entry.nargs or 0,
      complete = M.completion(entry.name, bufnr),
    })
  end
end

--- A plan / diff buffer the server showed: :PallasiteApprove / :PallasiteRevise / :PallasiteStop on it.
function M.attach_plan(bufnr)
  M.create(vim.tbl_filter(function(entry)
    return entry.plan == true
  end, M.COMMANDS), bufnr)
end

--- The argument completion of a command: chips for :PallasiteTarget, codes for :PallasiteExplain,
--- modes for :PallasiteOptimize, algorithms for :PallasiteSearch.
function M.completion(name, bufnr)
  if name == 'PallasiteTarget' then
    return function(lead)
      return vim.tbl_filter(function(chip)
        return vim.startswith(chip, lead)
      end, M.chips())
    end
  elseif name == 'PallasiteExplain' then
    return function(lead)
      return M.codes_in(bufnr, lead)
    end
  elseif name == 'PallasiteOptimize' or name == 'PallasiteSearch' then
    local words = name == 'PallasiteOptimize' and M.MODES or M.ALGOS
    return function(lead)
      return vim.tbl_filter(function(word)
        return vim.startswith(word, lead)
      end, words)
    end
  end
  return nil
end

--- Remove the commands when the server leaves the buffer.
function M.detach(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  for _, entry in ipairs(M.COMMANDS) do
    pcall(vim.api.nvim_buf_del_user_command, bufnr, entry.name)
  end
end

return M
