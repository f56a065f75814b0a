--- The server's questions (window/showMessageRequest; the folder-trust question is one) asked
--- through vim.ui.select, so any picker plugin (telescope, fzf-lua, dressing) shows them. The
--- answer goes back to the server, which remembers it; every question asked is kept in `M.asked`.

local M = {}

--- Questions asked so far: {message = ..., answer = title or nil}.
M.asked = {}

--- @param params lsp.ShowMessageRequestParams
function M.on_request(err, params, ctx)
  local actions = params.actions or {}
  local co, is_main = coroutine.running()
  if #actions == 0 or not co or is_main then
    -- Nothing to choose, or not called where an answer can be awaited: Neovim's own handler.
    return vim.lsp.handlers['window/showMessageRequest'](err, params, ctx)
  end
  local record = { message = params.message }
  table.insert(M.asked, record)
  vim.ui.select(actions, {
    prompt = 'pallasite: ' .. params.message,
    kind = 'pallasite',
    format_item = function(action)
      return action.title
    end,
  }, function(choice)
    record.answer = choice and choice.title or nil
    -- Resume after select returns: a synchronous select would otherwise resume before the yield.
    vim.schedule(function()
      coroutine.resume(co, choice or vim.NIL)
    end)
  end)
  return coroutine.yield()
end

return M
