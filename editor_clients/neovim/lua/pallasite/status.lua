--- What the statusline shows: the server's `pallasite/status` notification ({target, backend,
--- worker, trusted, files}) and its LSP work-done progress, kept per client; `files` holds each open
--- kernel document's last verdict in the server's words, of which the statusline shows its buffer's.
--- `text()` is pure; the handlers store state and fire `User PallasiteStatus` so other plugins can react.

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
  local files = {}
  for _, f in ipairs(type(result.files) == 'table' and result.files or {}) do
    if type(f) == 'table' and type(f.uri) == 'string' and type(f.state) == 'string'
        and type(f.verdict) == 'string' and type(f.detail) == 'string' then
      files[f.uri] = { state = f.state, verdict = f.verdict, detail = f.detail }
    end
  end
  return {
    target = result.target,
    backend = type(result.backend) == 'string' and result.backend or 'local',
    worker = result.worker,
    trusted = result.trusted,
    files = files,
  }
end

--- "pallasite v6e · local · idle", then " · untrusted", the document `uri`'s last verdict (when the
--- server sent one) and the running progress, if any.
--- @param status {target: string, backend: string, worker: string, trusted: boolean, files: table?}|nil
--- @param progress {title: string?, message: string?, percentage: integer?}|nil
--- @param uri string|nil
--- @return string
function M.text(status, progress, uri)
  local parts = {}
  if status then
    parts = { 'pallasite ' .. status.target, status.backend, status.worker }
    if not status.trusted then
      parts[#parts + 1] = 'untrusted'
    end
    local verdict = uri and status.files and status.files[uri]
    if verdict then
      parts[#parts + 1] = verdict.verdict
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
  return M.text(M.by_client[client.id], running, vim.uri_from_bufnr(bufnr or vim.api.nvim_get_current_buf()))
end

--- The last verdict of the buffer's document ({state, verdict, detail}), nil when none was sent.
function M.verdict(bufnr)
  local status = M.for_buffer(bufnr)
  local uri = vim.uri_from_bufnr(bufnr or vim.api.nvim_get_current_buf())
  return status and status.files and status.files[uri] or nil
end

return M
