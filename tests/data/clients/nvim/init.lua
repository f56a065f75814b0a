-- Minimal init for the headless tests: the plugin from this checkout, the server from the test's
-- Python, settings from PALLASITE_TEST_SETTINGS (JSON). Nothing else is loaded (nvim --clean).
local here = vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2))
local plugin = vim.fs.normalize(here .. '/../../../../editor_clients/neovim')
vim.opt.runtimepath:prepend(plugin)
vim.opt.swapfile = false
vim.opt.shada = ''

local settings = vim.json.decode(vim.env.PALLASITE_TEST_SETTINGS or '{}', { luanil = { object = true } })
require('pallasite').setup({ python = vim.env.PALLASITE_TEST_PYTHON, settings = settings })
