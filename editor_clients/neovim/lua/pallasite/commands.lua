--- The :Pallasite* user commands. Each forwards to one server command with
--- workspace/executeCommand and exists (buffer-local) only where the attached server advertises
--- that command in `executeCommandProvider.commands`: no command that leads nowhere.

local M = {}

--- Server contract (server/lsp.py): pallasite.check(uri) runs the configured tiers,
--- pallasite.check({uri = ..., tiers = {...}}) the given ones (tier 3: TPU interpret mode);
--- pallasite.selectTarget(chip); pallasite.trustFolder(folderUri?) (none: every workspace folder).
--- The server answers {ok = false, message = ...} when it could not do it; that message is shown.
--- `args(ctx, fargs)` returns the arguments, or nil and a message when the command cannot run.
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
}

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

--- Run a palette entry for a buffer: find its pallasite client and send the command.
function M.run(entry, bufnr, fargs)
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'pallasite' })[1]
  if not client then
    vim.notify('pallasite: no pallasite server is attached to this buffer', vim.log.levels.ERROR)
    return
  end
  local ctx = {
    uri = vim.uri_from_bufnr(bufnr),
    root_uri = client.root_dir and vim.uri_from_fname(client.root_dir) or nil,
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
    end
    vim.api.nvim_exec_autocmds('User', {
      pattern = 'PallasiteCommandDone',
      modeline = false,
      data = { command = entry.server, result = result, error = err },
    })
  end)
end

--- Create the buffer-local commands the client's server advertises.
function M.attach(client, bufnr)
  for _, entry in ipairs(M.available(M.advertised(client))) do
    vim.api.nvim_buf_create_user_command(bufnr, entry.name, function(cmd)
      M.run(entry, bufnr, cmd.fargs)
    end, {
      desc = entry.desc,
      nargs = entry.nargs or 0,
      complete = entry.name == 'PallasiteTarget' and function(lead)
        return vim.tbl_filter(function(chip)
          return vim.startswith(chip, lead)
        end, M.chips())
      end or nil,
    })
  end
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
