--- Documents the server opens with window/showDocument: optimize's step-mode plan
--- (`.pallasite/plans/<run>-<iteration>.md`) and candidate diff (`...diff`), search's HTML report.
---
--- A plan or diff opens in a split beside the kernel (one window, reused for the next document),
--- with :PallasiteApprove / :PallasiteRevise / :PallasiteStop on its buffer and a winbar saying
--- so. The buffer is not attached to the server (it is not Python): :PallasiteRevise saves it and
--- sends its text, so unsaved edits are never lost. `external` documents (the search report) go to
--- vim.ui.open; where that fails the path is shown. Any other document: Neovim's own handler.

local M = {}

--- Documents shown so far, oldest first: {uri, path, bufnr, client_id}.
--- @type table[]
M.shown = {}

M.WINBAR = 'pallasite: %#Title#:PallasiteApprove%* · %#Title#:PallasiteRevise%* (your edits are the instruction) · %#Title#:PallasiteStop%*'

--- Whether a path is a step-mode plan or diff document (a file under `.pallasite/plans/`).
--- @param path string|nil
--- @return boolean
function M.is_plan_path(path)
  return type(path) == 'string' and path:gsub('\\', '/'):find('/.pallasite/plans/', 1, true) ~= nil
end

--- The plan document a command acts on from `bufnr`: that buffer if it is one, else the most
--- recently shown plan document whose buffer still exists. nil if there is none.
--- @param bufnr integer
--- @param shown table[]|nil  (default M.shown)
--- @param name_of fun(bufnr: integer): string|nil  (default: the buffer's file name)
--- @return table|nil {uri, path, bufnr, client_id}
function M.target(bufnr, shown, name_of)
  shown = shown or M.shown
  name_of = name_of or function(b)
    return vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_name(b) or nil
  end
  local own = name_of(bufnr)
  if M.is_plan_path(own) then
    for i = #shown, 1, -1 do
      if shown[i].bufnr == bufnr then
        return shown[i]
      end
    end
    return { uri = vim.uri_from_fname(own), path = own, bufnr = bufnr }
  end
  for i = #shown, 1, -1 do
    if name_of(shown[i].bufnr) == shown[i].path then
      return shown[i]
    end
  end
  return nil
end

--- The text of a buffer as the file would hold it.
function M.buffer_text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n') .. '\n'
end

--- Write a modified plan buffer to its file (so the file and the server's reading of it agree).
--- @return boolean ok, string|nil why not
function M.save(bufnr)
  if not (vim.api.nvim_buf_is_valid(bufnr) and vim.bo[bufnr].modified) then
    return true
  end
  local ok, err = pcall(vim.api.nvim_buf_call, bufnr, function()
    vim.cmd('silent noautocmd write')
  end)
  return ok, not ok and tostring(err) or nil
end

--- A window in the current tab that already shows a plan document, else nil.
local function plan_window()
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if M.is_plan_path(vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win))) then
      return win
    end
  end
  return nil
end

--- Called for each plan buffer shown (init.lua sets it: the buffer-local commands).
M.on_plan_buffer = function(_bufnr) end

--- Open a plan/diff file in the plan window (a split below the current window the first time).
--- @return integer bufnr, integer winid
function M.open(path, take_focus)
  local from = vim.api.nvim_get_current_win()
  local win = plan_window()
  if win then
    vim.api.nvim_set_current_win(win)
  else
    vim.cmd('belowright split')
    win = vim.api.nvim_get_current_win()
  end
  local existing = vim.fn.bufnr(path)
  local reload = existing ~= -1 and vim.api.nvim_buf_is_loaded(existing) and not vim.bo[existing].modified
  vim.cmd((reload and 'edit! ' or 'edit ') .. vim.fn.fnameescape(path))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.wo[win].winbar = M.WINBAR
  if take_focus == false and vim.api.nvim_win_is_valid(from) then
    vim.api.nvim_set_current_win(from)
  end
  return bufnr, win
end

--- window/showDocument (a server request: answers {success = ...}).
--- @param params lsp.ShowDocumentParams
function M.on_show_document(err, params, ctx)
  local uri = params.uri
  local is_file = type(uri) == 'string' and vim.startswith(uri, 'file:')
  local path = is_file and vim.uri_to_fname(uri) or uri
  if params.external then
    local ok, cmd = pcall(vim.ui.open, uri)
    local done = ok and cmd and cmd:wait(5000) or nil
    if not (done and done.code == 0) then
      vim.notify('pallasite: the server has a document for you: ' .. tostring(path), vim.log.levels.INFO)
      return { success = false }
    end
    return { success = true }
  end
  if not (is_file and M.is_plan_path(path)) then
    local builtin = vim.lsp.handlers['window/showDocument']
    if builtin then
      return builtin(err, params, ctx)
    end
    if not is_file then
      return { success = false }
    end
    vim.cmd.edit(vim.fn.fnameescape(path))
    return { success = true }
  end
  local ok, bufnr = pcall(M.open, path, params.takeFocus)
  if not ok then
    vim.notify('pallasite: could not open ' .. path .. ': ' .. tostring(bufnr), vim.log.levels.ERROR)
    return { success = false }
  end
  table.insert(M.shown, { uri = uri, path = vim.api.nvim_buf_get_name(bufnr), bufnr = bufnr, client_id = ctx.client_id })
  M.on_plan_buffer(bufnr)
  vim.api.nvim_exec_autocmds('User', { pattern = 'PallasitePlanShown', modeline = false, data = { uri = uri, bufnr = bufnr } })
  return { success = true }
end

return M
