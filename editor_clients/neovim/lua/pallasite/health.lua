--- :checkhealth pallasite — Neovim version, the server command, a real initialize round trip (and
--- the :Pallasite* commands it makes available),
--- the settings against the server's own schema, and what the worker's Python can run (jax for
--- tiers 1-3, libtpu for tier 2).

local commands = require('pallasite.commands')

local M = {}

local INIT_TIMEOUT_MS = 20000

--- The Python that runs check workers: settings worker.interpreter, else the one behind the
--- server command (`python -m ...`, or the shebang of a `pallasite` script), else nil.
--- @param cmd string[]|function
--- @param settings table
--- @return string|nil python, string how it was found
function M.worker_python(cmd, settings)
  local configured = settings and settings.worker and settings.worker.interpreter
  if type(configured) == 'string' and configured ~= '' then
    return configured, 'settings worker.interpreter'
  end
  if type(cmd) ~= 'table' or not cmd[1] then
    return nil, 'the server command is a function'
  end
  if cmd[2] == '-m' then
    return cmd[1], 'the server command'
  end
  local path = vim.fn.exepath(cmd[1])
  if path ~= '' and vim.fn.filereadable(path) == 1 then
    local first = vim.fn.readfile(path, '', 1)[1] or ''
    local shebang = first:match('^#!%s*(%S+)')
    if shebang and shebang:match('python[%d.]*$') then
      return shebang, 'the shebang of ' .. path
    end
  end
  return nil, 'could not tell which Python runs ' .. tostring(cmd[1])
end

local JSON_TYPES = {
  string = function(v)
    return type(v) == 'string'
  end,
  boolean = function(v)
    return type(v) == 'boolean'
  end,
  number = function(v)
    return type(v) == 'number'
  end,
  integer = function(v)
    return type(v) == 'number' and math.floor(v) == v
  end,
  array = function(v)
    return type(v) == 'table' and vim.islist(v)
  end,
  object = function(v)
    return type(v) == 'table' and (next(v) == nil or not vim.islist(v))
  end,
}

--- Problems of a settings table against the server's JSON Schema (unknown keys, wrong types,
--- values outside an enum), each naming the dotted key.
--- @return string[]
function M.settings_problems(settings, schema, prefix)
  prefix = prefix or ''
  local problems = {}
  local properties = schema.properties or {}
  for key, value in pairs(settings) do
    local dotted = prefix .. key
    local sub = properties[key]
    if not sub then
      local known = vim.tbl_keys(properties)
      table.sort(known)
      problems[#problems + 1] =
        string.format("unknown setting '%s' (known here: %s)", dotted, table.concat(known, ', '))
    elseif sub.type and JSON_TYPES[sub.type] and not JSON_TYPES[sub.type](value) then
      local article = sub.type:match('^[aeiou]') and 'an' or 'a'
      problems[#problems + 1] = string.format("'%s' should be %s %s, got %s", dotted, article, sub.type, vim.inspect(value))
    elseif sub.enum and not vim.list_contains(sub.enum, value) then
      problems[#problems + 1] = string.format(
        "'%s' is %s; allowed: %s",
        dotted,
        vim.inspect(value),
        table.concat(vim.tbl_map(tostring, sub.enum), ', ')
      )
    elseif sub.type == 'object' and sub.properties then
      vim.list_extend(problems, M.settings_problems(value, sub, dotted .. '.'))
    end
  end
  return problems
end

--- Start the server, send initialize, wait for the answer, shut it down.
--- @return table|nil result, string|nil error, integer elapsed_ms
function M.initialize(cmd)
  local started = vim.uv.hrtime()
  local done, result, failure = false, nil, nil
  local ok, rpc = pcall(vim.lsp.rpc.start, cmd, {
    server_request = function()
      return nil, vim.lsp.rpc.rpc_response_error(vim.lsp.protocol.ErrorCodes.MethodNotFound)
    end,
    on_exit = function(code)
      if not done then
        done, failure = true, 'the server exited with code ' .. tostring(code) .. ' before answering'
      end
    end,
  })
  if not ok then
    return nil, tostring(rpc), 0
  end
  rpc.request('initialize', {
    processId = vim.fn.getpid(),
    rootUri = vim.NIL,
    capabilities = vim.lsp.protocol.make_client_capabilities(),
    clientInfo = { name = 'pallasite checkhealth' },
  }, function(err, res)
    done, result, failure = true, res, err and (err.message or vim.inspect(err)) or nil
  end)
  vim.wait(INIT_TIMEOUT_MS, function()
    return done
  end, 50)
  local elapsed = math.floor((vim.uv.hrtime() - started) / 1e6)
  if not done then
    failure = string.format('no answer to initialize within %d s', INIT_TIMEOUT_MS / 1000)
  end
  if result then
    rpc.request('shutdown', nil, function()
      rpc.notify('exit', nil)
    end)
    vim.wait(2000, function()
      return rpc.is_closing()
    end, 20)
  end
  if not rpc.is_closing() then
    rpc.terminate()
  end
  return result, failure, elapsed
end

--- Run python code with the interpreter; returns ok, first line of output (or of the error).
local function python_says(python, code)
  local ok, res = pcall(function()
    return vim.system({ python, '-c', code }, { text = true }):wait(60000)
  end)
  if not ok then
    return false, tostring(res)
  end
  local out = vim.trim(res.code == 0 and res.stdout or res.stderr)
  local lines = vim.split(out, '\n')
  return res.code == 0, lines[res.code == 0 and 1 or #lines] or ''
end

function M.check()
  local health = vim.health
  local options = require('pallasite').options

  health.start('pallasite: Neovim')
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok('Neovim ' .. tostring(vim.version()) .. ' (vim.lsp.config / vim.lsp.enable available)')
  else
    health.error('Neovim ' .. tostring(vim.version()) .. ' is too old', { 'pallasite needs Neovim 0.11 or newer' })
  end
  if vim.lsp.config and vim.lsp.config.pallasite and vim.lsp.config.pallasite.cmd then
    health.ok('the pallasite server is configured (require("pallasite").setup() ran)')
  else
    health.warn('require("pallasite").setup() has not run', { 'add require("pallasite").setup({}) to your init.lua' })
  end

  health.start('pallasite: server')
  local cmd = options.cmd
  if type(cmd) ~= 'table' then
    health.info('the server command is a function; skipping the server checks')
    return
  end
  local exe = vim.fn.exepath(cmd[1])
  if exe == '' then
    health.error(string.format('`%s` is not an executable on PATH', cmd[1]), {
      'install it from your pallasite checkout: python -m pip install /path/to/pallasite (pallasite is on no package index)',
      "or point setup() at a Python that has it: require('pallasite').setup({ python = '/path/to/python' })",
    })
    return
  end
  local version_cmd = commands.sibling_cmd(cmd, { '--version' })
  local res = version_cmd and vim.system(version_cmd, { text = true }):wait(30000)
  if res and res.code == 0 then
    health.ok(string.format('%s (%s)', vim.trim(res.stdout), table.concat(cmd, ' ')))
  else
    local python = cmd[2] == '-m' and cmd[1] or 'python'
    health.error(string.format('`%s` failed: %s', table.concat(version_cmd or cmd, ' '), res and vim.trim(res.stderr) or '?'), {
      string.format('install pallasite into that Python from your checkout: %s -m pip install /path/to/pallasite (pallasite is on no package index)', python),
      'or, from a pallasite checkout: ' .. python .. ' -m pip install -e .',
    })
    return
  end
  local result, failure, elapsed = M.initialize(cmd)
  if result then
    local info = result.serverInfo or {}
    local provided = commands.advertised({ server_capabilities = result.capabilities })
    health.ok(string.format(
      'the server started and answered initialize in %d ms (%s %s); commands: %s',
      elapsed,
      info.name or '?',
      info.version or '',
      #provided > 0 and table.concat(provided, ', ') or 'none'
    ))
    local names = vim.tbl_map(function(entry)
      return ':' .. entry.name
    end, commands.available(provided))
    if #names > 0 then
      health.ok('Neovim commands for it (buffer-local in Python files): ' .. table.concat(names, ', '))
    else
      health.warn('the server advertises none of the commands this plugin knows', {
        'update the plugin and the server together (pull your pallasite checkout, then python -m pip install /path/to/pallasite)',
      })
    end
    if vim.list_contains(provided, 'pallasite.optimize') then
      health.ok(string.format(
        'window/showDocument: step-by-step plans and diffs open in a split with :PallasiteApprove, :PallasiteRevise, '
          .. ':PallasiteStop; other documents: %s',
        vim.lsp.handlers['window/showDocument'] and "Neovim's own handler" or 'opened with :edit'
      ))
    end
  else
    health.error('the server did not answer initialize: ' .. tostring(failure), {
      'run `' .. table.concat(cmd, ' ') .. '` in a terminal to see its error',
      'the LSP log (:lua vim.cmd.edit(vim.lsp.log.get_filename())) has the messages',
    })
  end

  health.start('pallasite: settings')
  local schema, why = commands.settings_schema(cmd)
  if not schema then
    health.warn('could not read the settings schema: ' .. tostring(why))
  else
    local problems = M.settings_problems(options.settings or {}, schema)
    if #problems == 0 then
      health.ok(string.format('%d top-level settings given; all match `pallasite settings --schema`', vim.tbl_count(options.settings or {})))
    else
      for _, problem in ipairs(problems) do
        health.warn(problem, { 'the server uses its default for this key; see `pallasite settings --schema`' })
      end
    end
  end

  health.start('pallasite: worker environment')
  local python, how = M.worker_python(cmd, options.settings)
  if not python then
    health.warn('cannot check the worker environment: ' .. how)
    return
  end
  health.info(string.format('worker Python: %s (%s)', python, how))
  local has_jax, jax_line = python_says(python, 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__)')
  if has_jax then
    health.ok(jax_line .. ': tiers 1 (lowering) and 3 (interpret mode) can run')
  else
    health.error('jax is not importable by ' .. python .. ': ' .. jax_line, {
      'tiers 1-3 need it: ' .. python .. ' -m pip install jax',
    })
  end
  local has_tpu, tpu_line = python_says(
    python,
    'import importlib.util as u, importlib.metadata as m; s = u.find_spec("libtpu"); '
      .. 'print(("libtpu " + m.version("libtpu")) if s else "absent"); raise SystemExit(0 if s else 1)'
  )
  if has_tpu then
    health.ok(tpu_line .. ': tier 2 (the TPU compiler, deviceless) can run')
  else
    health.warn('libtpu is not installed for ' .. python .. ': tier 2 (the real TPU compiler) is unavailable', {
      python .. " -m pip install '/path/to/pallasite[tpu]'",
    })
  end
end

return M
