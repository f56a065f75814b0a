// End to end without VS Code: loads the bundled extension (dist/extension.js) with the stand-in
// `vscode` module, lets it start a real `pallasite serve`, and checks what a user would see.
//
//   node test/e2e/run-e2e.js SCENARIO PYTHON PROJECT_DIR KERNEL_FILE
//
// SCENARIO "server": PYTHON has pallasite (trust.mode never: tier 0 only); "trust": the same with
// trust.mode "ask", tiers 0-1, "Trust" pressed when the server asks, then the file checked as a
// script (KERNEL_FILE: a script with a __main__, e.g. running_total.py); "missing": PYTHON lacks
// pallasite. Step-by-step optimize is walked in a real VS Code instead (tests/test_vscode_real.py).
// Prints `RESULT <json>` and exits 0; on a failed wait prints what it waited for and exits 1.
'use strict';

const Module = require('node:module');
const path = require('node:path');
const fake = require('./fake-vscode');

const [scenario, python, folder, file] = process.argv.slice(2);
const settings = {
  'pallasite.interpreter': python,
  'pallasite.serverPath': '',
  ...(scenario === 'trust'
    ? { 'pallasite.trust.mode': 'ask', 'pallasite.tiers': [0, 1] } // tier 1 (CPU lowering) needs trust
    : { 'pallasite.trust.mode': 'never' }), // tier 0 only: no worker in this test
};
const packageJSON = require(path.join(__dirname, '..', '..', 'package.json'));
const defaults = Object.fromEntries(Object.entries(packageJSON.contributes.configuration.properties)
  .map(([key, schema]) => [key, schema.default]));
const vscode = fake.create({ folder, file, settings, defaults, quickPickAnswer: 'v5e', inputBoxAnswer: 'pls201',
  messageAnswer: 'Trust' });
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return request === 'vscode' ? 'vscode' : resolve.call(this, request, ...rest);
};
require.cache.vscode = { id: 'vscode', filename: 'vscode', loaded: true, exports: vscode.module };

const extension = require(path.join(__dirname, '..', '..', 'dist', 'extension.js'));
const { recorded } = vscode;
const result = {};

async function waitFor(what, predicate, ms = 30000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) {
      console.log(`TIMEOUT waiting for ${what}`);
      console.log(JSON.stringify({ ...recorded, diagnostics: [...recorded.diagnostics] }, null, 1).slice(0, 6000));
      process.exit(1);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

const statusText = () => recorded.statusItems[0] && recorded.statusItems[0].text;
const kernelDiagnostics = () => recorded.diagnostics.get(vscode.document.uri.toString()) || [];

async function server() {
  const context = { subscriptions: [], extension: { packageJSON } };
  await extension.activate(context);
  result.contextsAfterStart = { ...recorded.contexts };
  await waitFor('a diagnostic for the kernel', () => kernelDiagnostics().length > 0);
  result.diagnostics = kernelDiagnostics().map((d) => ({
    line: d.range.start.line, message: d.message, code: typeof d.code === 'object' ? d.code.value : d.code,
  }));
  // The project's [tool.pallasite] target: VS Code's defaults must not override it.
  const chip = process.env.PALLASITE_E2E_CHIP || 'v6e';
  await waitFor(`the status bar to show ${chip}`, () => (statusText() || '').includes(` ${chip} `));
  result.statusBefore = statusText();
  result.statusCommand = recorded.statusItems[0].command;
  // Palette: "Select Target TPU Chip" with no arguments -> quick pick -> server -> status.
  const selected = await vscode.module.commands.executeCommand('pallasite.selectTarget');
  result.selectResult = selected;
  await waitFor('the status bar to show v5e', () => /v5e/.test(statusText() || ''));
  result.statusAfter = statusText();
  result.quickPicks = recorded.quickPicks;
  // Palette: tier-3 check of the active file; the folder is untrusted (trust.mode never).
  result.tier3Result = await vscode.module.commands.executeCommand('pallasite.checkTier3');
  result.messages = [...recorded.messages];
  // Palette "Explain Finding" with the cursor on the diagnostic: its code's markdown is shown.
  const [first] = kernelDiagnostics();
  vscode.editor.selection = { active: first.range.start };
  result.explainAtCursor = await vscode.module.commands.executeCommand('pallasite.explainFinding');
  // ... and with the cursor where there is none: the code typed in the input box ("pls201").
  vscode.editor.selection = { active: new vscode.module.Position(0, 0) };
  result.explainTyped = await vscode.module.commands.executeCommand('pallasite.explainFinding');
  result.inputBoxes = recorded.inputBoxes;
  result.openedDocuments = recorded.openedDocuments;
  result.shownDocuments = recorded.shownDocuments;
  await extension.deactivate();
  result.contextsAfterStop = { ...recorded.contexts };
}

const isTrustQuestion = (m) => m.items.includes('Trust');

async function trust() {
  const context = { subscriptions: [], extension: { packageJSON } };
  await extension.activate(context);
  await waitFor('the trust question', () => recorded.messages.some(isTrustQuestion));
  await waitFor('the status bar to say trusted', () => recorded.contexts['pallasite.folderTrusted'] === true
    && !/untrusted/.test(statusText() || ''));
  result.statusTrusted = statusText();
  result.trustedContext = recorded.contexts['pallasite.folderTrusted'];
  // Trusted: a check of the file runs the lowering in a worker without asking again.
  result.checkResult = await vscode.module.commands.executeCommand('pallasite.check');
  // Palette "Check as Script": {uri, script: true}; the server runs the file's __main__.
  result.scriptResult = await vscode.module.commands.executeCommand('pallasite.checkScript');
  const code = (d) => String(typeof d.code === 'object' ? d.code.value : d.code);
  await waitFor('a lowering diagnostic from the script run', () => kernelDiagnostics().some((d) => code(d).startsWith('PLS1')));
  result.scriptDiagnostics = kernelDiagnostics().map((d) => ({ line: d.range.start.line, code: code(d) }));
  await new Promise((r) => setTimeout(r, 1000)); // time for a second question, were one to come
  result.questions = recorded.messages.filter(isTrustQuestion);
  result.otherMessages = recorded.messages.filter((m) => !isTrustQuestion(m));
  await extension.deactivate();
}

async function missing() {
  const context = { subscriptions: [], extension: { packageJSON } };
  await extension.activate(context);
  result.status = statusText();
  result.messages = recorded.messages;
  result.contexts = { ...recorded.contexts };
  await extension.deactivate();
}

({ server, trust, missing })[scenario]().then(() => {
  console.log(`RESULT ${JSON.stringify(result)}`);
  process.exit(0);
}, (err) => {
  console.log(`FAILED ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
