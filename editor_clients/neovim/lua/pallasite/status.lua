--- What the statusline shows: the server's `pallasite/status` notification ({target, backend,
--- worker, trusted}) and its LSP work-done progress, kept per client. `text()` is pure; the
--- handlers store state and fire `User PallasiteStatus` so other plugins can react.

local M = {}

M.NOTIFICATION = 'pallasite/status'

--- client id -> last valid status
--- @type table<integer, {target: string, backend: string, worker: string, trusted: boolean}>
M.by_client = {}

--- client id -> progress token -> {title, message, percentage}
--- @type table<integer, table<string|integer, {title: string?, message: string?, percentage: integer?}>>
M.progress = {}

--- The notification's payload if it has the expected shape, else nil.
--- @return {target: string, backend: string, worker: string, trusted: boolean}|nil
function M.parse(result)
  if type(result) ~= 'table' then
    return nil
  end
  if type(result.target) ~= 'string' or type(result.worker) ~= 'string' or type(result.trusted) ~= 'boolean' then
    return nil
  end
  return {
    target = result.target,
    backend = type(result.backend) == 'string' and result.backend or 'local',
    worker = result.worker,
    trusted = result.trusted,
  }
end

--- "pallasite v6e · local · idle", then " · untrusted" and the running progress, if any.
--- @param status {target: string, backend: string, worker: string, trusted: boolean}|nil
--- @param progress {title: string?, message: string?, percentage: integer?}|nil
--- @return string
function M.text(status, progress)
  local parts = {}
  if status then
    parts = { 'pallasite ' .. status.target, status.backend, status.worker }
    if not status.trusted then
      parts[#parts + 1] = 'untrusted'
    end
  else
    parts = { 'pallasite' }
  end
  if progress then
    -- The server's titles start with "pallasite: "; the statusline already says it once.
    local title = progress.title and progress.title:gsub('^pallasite: ', '') or nil
    local words = vim.tbl_filter(function(s)
      return s ~= nil and s ~= ''
    end, { title, progress.message })
    local line = table.concat(words, ': ')
    if progress.percentage then
      line = string.format('%s %d%%', line, progress.percentage)
    end
    parts[#parts + 1] = line
  end
  return table.concat(parts, ' · ')
end

--- Handler for the `pallasite/status` notification.
function M.on_status(_, result, ctx)
  local status = M.parse(result)
  if not status then
    vim.notify_once(
      'pallasite: ignored a pallasite/status notification of unexpected shape: ' .. vim.inspect(result),
      vim.log.levels.WARN
    )
    return
  end
  M.by_client[ctx.client_id] = status
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'PallasiteStatus',
    modeline = false,
    data = { client_id = ctx.client_id, status = status },
  })
  vim.cmd.redrawstatus({ bang = true })
end

--- LspProgress for a pallasite client: remember begin/report, forget on end.
function M.on_progress(client_id, params)
  local value = params and params.value
  if type(value) ~= 'table' then
    return
  end
  local tokens = M.progress[client_id] or {}
  M.progress[client_id] = tokens
  if value.kind == 'end' then
    tokens[params.token] = nil
  else
    local known = tokens[params.token] or {}
    tokens[params.token] = {
      title = value.title or known.title,
      message = value.message or known.message,
      percentage = value.percentage or known.percentage,
    }
  end
  vim.cmd.redrawstatus({ bang = true })
end

--- The first pallasite client attached to the buffer.
local function client_for(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr or 0, name = 'pallasite' })[1]
end

function M.for_buffer(bufnr)
  local client = client_for(bufnr)
  return client and M.by_client[client.id] or nil
end

--- @param bufnr integer|nil
--- @return string
function M.statusline(bufnr)
  local client = client_for(bufnr)
  if not client then
    return ''
  end
  local running = nil
  for _, p in pairs(M.progress[client.id] or {}) do
    running = p
    break
  end
  return M.text(M.by_client[client.id], running)
end

return M
