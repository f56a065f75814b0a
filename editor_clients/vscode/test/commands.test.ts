/** Palette entries follow the server's advertised commands; arguments for each palette command. */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  PALETTE,
  advertisedCommands,
  availablePalette,
  contextKey,
  commandProblem,
  contextValues,
  explanationMarkdown,
  findingCodeAt,
  fromMenuOrPalette,
  isPlanDocument,
  missingContextMessage,
  PLAN_DOCUMENT_WHEN,
  typedFindingCode,
  manifestCommands,
  paletteArguments,
  settingsToOpen,
  whenClause,
} from '../src/commands';

const packageJson = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'));

const initializeResult = (commands: unknown) => ({ capabilities: { executeCommandProvider: { commands } } });

test('advertised commands are read from the initialize result, defensively', () => {
  assert.deepEqual(advertisedCommands(initializeResult(['pallasite.check', 7, 'pallasite.trustFolder'])), [
    'pallasite.check',
    'pallasite.trustFolder',
  ]);
  assert.deepEqual(advertisedCommands({ capabilities: {} }), []);
  assert.deepEqual(advertisedCommands(undefined), []);
  assert.deepEqual(advertisedCommands(initializeResult('pallasite.check')), []);
});

test('only palette entries whose server command is advertised are available', () => {
  assert.deepEqual(availablePalette([]), []);
  assert.deepEqual(
    availablePalette(['pallasite.check']).map((e) => e.id),
    ['pallasite.check', 'pallasite.checkTier3', 'pallasite.checkScript'],
  );
  assert.deepEqual(availablePalette(['pallasite.explain']).map((e) => e.id), ['pallasite.explainFinding']);
  assert.deepEqual(
    availablePalette(['pallasite.selectTarget', 'pallasite.autotune']).map((e) => e.id),
    ['pallasite.selectTarget'],
  );
  const all = PALETTE.map((e) => e.server);
  assert.equal(availablePalette(all).length, PALETTE.length);
});

test('context values turn off the palette keys a server lacks and turn on every advertised one', () => {
  const values = contextValues(['pallasite.check', 'pallasite.autotune']);
  assert.equal(values[contextKey('pallasite.check')], true);
  assert.equal(values[contextKey('pallasite.autotune')], true);
  assert.equal(values[contextKey('pallasite.selectTarget')], false);
  assert.equal(values[contextKey('pallasite.trustFolder')], false);
  assert.ok(Object.values(contextValues([])).every((v) => v === false));
});

test('a command only an earlier server advertised is turned off when the server stops', () => {
  // pallasite.time has no palette entry: without `previously` its key would stay true after a stop.
  const stopped = contextValues([], ['pallasite.check', 'pallasite.time']);
  assert.equal(stopped[contextKey('pallasite.time')], false);
  assert.equal(stopped[contextKey('pallasite.check')], false);
  const restarted = contextValues(['pallasite.time'], ['pallasite.time']);
  assert.equal(restarted[contextKey('pallasite.time')], true);
});

test('context keys are distinct per server command', () => {
  const keys = new Set(['pallasite.check', 'pallasite.selectTarget', 'other.check'].map(contextKey));
  assert.equal(keys.size, 3);
});

test('palette arguments: the active file for checks, tier 3 as an option, the chosen chip, the folder', () => {
  const ctx = { documentUri: 'file:///k/add.py', folderUri: 'file:///k' };
  assert.deepEqual(paletteArguments('pallasite.check', ctx), ['file:///k/add.py']);
  assert.deepEqual(paletteArguments('pallasite.checkTier3', ctx), [{ uri: 'file:///k/add.py', tiers: [0, 1, 2, 3] }]);
  assert.deepEqual(paletteArguments('pallasite.selectTarget', ctx, 'v5e'), ['v5e']);
  assert.deepEqual(paletteArguments('pallasite.trustFolder', ctx), ['file:///k']);
  assert.deepEqual(paletteArguments('pallasite.trustFolder', {}), []);
});

test('check as script sends {uri, script: true} for the active file, and needs one', () => {
  const ctx = { documentUri: 'file:///k/run_kernels.py', folderUri: 'file:///k' };
  assert.deepEqual(paletteArguments('pallasite.checkScript', ctx), [{ uri: 'file:///k/run_kernels.py', script: true }]);
  assert.equal(paletteArguments('pallasite.checkScript', { folderUri: 'file:///k' }), undefined);
  const entry = PALETTE.find((e) => e.id === 'pallasite.checkScript');
  assert.equal(entry?.server, 'pallasite.check');
  assert.equal(entry && whenClause(entry), 'pallasite.advertises.check && editorLangId == python');
});

test('explain sends the finding code, and is offered only where pallasite.explain is advertised', () => {
  assert.deepEqual(paletteArguments('pallasite.explainFinding', { findingCode: 'PLS201' }), ['PLS201']);
  assert.equal(paletteArguments('pallasite.explainFinding', { documentUri: 'file:///k/a.py' }), undefined);
  const entry = PALETTE.find((e) => e.id === 'pallasite.explainFinding');
  assert.equal(entry && whenClause(entry), 'pallasite.advertises.explain');
  assert.equal(entry?.title, 'Explain Finding');
});

const diag = (line: number, start: number, end: number, code: unknown, source = 'pallasite') =>
  ({ range: { start: { line, character: start }, end: { line, character: end } }, code, source }) as never;

test('the finding to explain: the pallasite diagnostic under the cursor, else one on its line', () => {
  const diagnostics = [
    diag(3, 0, 4, 'E501', 'flake8'),
    diag(3, 10, 20, { value: 'PLS001', target: 'x' }),
    diag(3, 22, 30, 'PLS007'),
    diag(9, 0, 5, 'PLS201'),
  ];
  assert.equal(findingCodeAt(diagnostics, 3, 25), 'PLS007');
  assert.equal(findingCodeAt(diagnostics, 3, 12), 'PLS001');
  assert.equal(findingCodeAt(diagnostics, 3, 2), 'PLS001'); // on the line, not under the cursor
  assert.equal(findingCodeAt(diagnostics, 9, 40), 'PLS201');
  assert.equal(findingCodeAt(diagnostics, 5, 0), undefined);
  assert.equal(findingCodeAt([diag(1, 0, 9, 'E501')], 1, 3), undefined);
});

test('a typed finding code is normalised, anything else is refused with an example', () => {
  assert.deepEqual(typedFindingCode(' pls201 '), { code: 'PLS201' });
  assert.match(typedFindingCode('tiling').problem ?? '', /"tiling" is not a finding code; give one such as PLS001/);
  assert.equal(typedFindingCode('PLS20').code, undefined);
});

test("explain answers become a markdown document; refusals do not", () => {
  const answer = { ok: true, code: 'PLS201', title: 'x', markdown: '# PLS201\n\nwhy' };
  assert.equal(explanationMarkdown(answer), '# PLS201\n\nwhy');
  assert.equal(explanationMarkdown({ ok: false, message: 'unknown code' }), undefined);
  assert.equal(explanationMarkdown({ ok: true, markdown: '' }), undefined);
  assert.equal(explanationMarkdown(null), undefined);
});

test('palette commands that cannot run here say so by returning undefined', () => {
  assert.equal(paletteArguments('pallasite.check', { folderUri: 'file:///k' }), undefined);
  assert.equal(paletteArguments('pallasite.checkTier3', {}), undefined);
  assert.equal(paletteArguments('pallasite.selectTarget', {}), undefined);
});

test('package.json contributes exactly the palette table, each hidden unless advertised', () => {
  const expected = manifestCommands();
  assert.deepEqual(packageJson.contributes.commands, expected.commands);
  assert.deepEqual(packageJson.contributes.menus.commandPalette, expected.commandPalette);
  for (const entry of PALETTE) {
    assert.match(whenClause(entry), new RegExp(`^${contextKey(entry.server).replace(/\./g, '\\.')}\\b`));
  }
  const checkWhen = expected.commandPalette.find((e) => e.command === 'pallasite.check')?.when;
  assert.equal(checkWhen, 'pallasite.advertises.check && editorLangId == python');
  // "Trust This Folder" disappears once the server says the folder is trusted.
  const trustWhen = expected.commandPalette.find((e) => e.command === 'pallasite.trustFolder')?.when;
  assert.equal(trustWhen, 'pallasite.advertises.trustFolder && !pallasite.folderTrusted');
});

test("the server's {ok: false, message} answers become a message; successes say nothing", () => {
  assert.equal(
    commandProblem({ ok: false, message: '/w is not trusted: run pallasite.trustFolder to check it.' }),
    'Pallasite: /w is not trusted: run pallasite.trustFolder to check it.',
  );
  assert.equal(commandProblem({ ok: false }), 'Pallasite: the command failed.');
  assert.equal(commandProblem({ ok: true, findings: 2 }), undefined);
  assert.equal(commandProblem(undefined), undefined);
  assert.equal(commandProblem('done'), undefined);
});

test('optimize (auto and step by step) and search send {uri, ...} for the active Python file, and need one', () => {
  const ctx = { documentUri: 'file:///k/add.py', folderUri: 'file:///k' };
  assert.deepEqual(paletteArguments('pallasite.optimize', ctx), [{ uri: 'file:///k/add.py', mode: 'auto' }]);
  assert.deepEqual(paletteArguments('pallasite.optimizeStep', ctx), [{ uri: 'file:///k/add.py', mode: 'step' }]);
  assert.deepEqual(paletteArguments('pallasite.search', ctx), [{ uri: 'file:///k/add.py' }]);
  for (const id of ['pallasite.optimize', 'pallasite.optimizeStep', 'pallasite.search']) {
    assert.equal(paletteArguments(id, { folderUri: 'file:///k' }), undefined, id);
    assert.equal(missingContextMessage(id), 'Pallasite: open a Python kernel file first.');
  }
  assert.deepEqual(
    availablePalette(['pallasite.optimize']).map((e) => e.id),
    ['pallasite.optimize', 'pallasite.optimizeStep'],
  );
  assert.deepEqual(availablePalette(['pallasite.search']).map((e) => e.id), ['pallasite.search']);
});

test('approve / revise / stop act on the plan document in the active editor; revise sends its text', () => {
  const plan = {
    documentUri: 'file:///k/add.py',
    planUri: 'file:///k/.pallasite/plans/ab12-1.md',
    planText: 'Use 128-row blocks\n',
  };
  assert.deepEqual(paletteArguments('pallasite.optimize.approve', plan), [{ uri: plan.planUri }]);
  assert.deepEqual(paletteArguments('pallasite.optimize.stop', plan), [{ uri: plan.planUri }]);
  assert.deepEqual(paletteArguments('pallasite.optimize.revise', plan), [{ uri: plan.planUri, text: 'Use 128-row blocks\n' }]);
  const noText = { planUri: plan.planUri };
  assert.deepEqual(paletteArguments('pallasite.optimize.revise', noText), [{ uri: plan.planUri }]);
  for (const id of ['pallasite.optimize.approve', 'pallasite.optimize.revise', 'pallasite.optimize.stop']) {
    // The kernel file is active, not a plan: nothing is sent, the user is told what to open.
    assert.equal(paletteArguments(id, { documentUri: 'file:///k/add.py' }), undefined, id);
    assert.match(missingContextMessage(id) ?? '', /open the plan or diff document of a step-by-step run/);
    assert.equal(PALETTE.find((e) => e.id === id)?.server, id);
  }
  assert.equal(missingContextMessage('pallasite.selectTarget'), undefined);
});

test("a call from the title bar (the document's URI, then its group) is filled from the editor like the palette's", () => {
  assert.ok(fromMenuOrPalette([]));
  // What VS Code passes from editor/title: the resource as a Uri, then {groupId}.
  const uri = { scheme: 'file', authority: '', path: '/k/.pallasite/plans/ab12-1.md', query: '', fragment: '' };
  assert.ok(fromMenuOrPalette([uri, { groupId: 1 }]));
  // The server's own arguments (code lenses, other extensions) pass through untouched.
  assert.ok(!fromMenuOrPalette([{ uri: 'file:///k/.pallasite/plans/ab12-1.md' }]));
  assert.ok(!fromMenuOrPalette(['file:///k/add.py']));
  assert.ok(!fromMenuOrPalette(['v5e']));
  assert.ok(!fromMenuOrPalette([null]));
});

test('plan documents are the files under .pallasite/plans/, with either separator', () => {
  assert.ok(isPlanDocument('/home/u/proj/.pallasite/plans/ab12-1.md'));
  assert.ok(isPlanDocument('/home/u/proj/.pallasite/plans/ab12-1.diff'));
  assert.ok(isPlanDocument('C:\\proj\\.pallasite\\plans\\ab12-2.md'));
  assert.ok(!isPlanDocument('/home/u/proj/add.py'));
  assert.ok(!isPlanDocument('/home/u/proj/.pallasite/search/report.html'));
  assert.ok(!isPlanDocument('/home/u/proj/.pallasite/plans/'));
  // The when clause's regular expression (VS Code evaluates it on resourcePath) agrees on these.
  const source = /=~ \/(.*)\/$/.exec(PLAN_DOCUMENT_WHEN)?.[1];
  assert.ok(source !== undefined, PLAN_DOCUMENT_WHEN);
  const when = new RegExp(source);
  for (const path of ['/p/.pallasite/plans/x-1.md', 'C:\\p\\.pallasite\\plans\\x-1.diff']) {
    assert.ok(when.test(path), path);
  }
  for (const path of ['/p/add.py', '/p/.pallasite/search/r.html', '/p/pallasite/plans.md']) {
    assert.ok(!when.test(path), path);
  }
});

test('the plan documents get Approve, Revise and Stop in their title bar; package.json has them', () => {
  const { editorTitle, commands, commandPalette } = manifestCommands();
  assert.deepEqual(
    editorTitle.map((e) => [e.command, e.group]),
    [
      ['pallasite.optimize.approve', 'navigation@1'],
      ['pallasite.optimize.revise', 'navigation@2'],
      ['pallasite.optimize.stop', 'navigation@3'],
    ],
  );
  for (const entry of editorTitle) {
    assert.equal(entry.when, `${contextKey(entry.command)} && ${PLAN_DOCUMENT_WHEN}`);
    assert.equal(commandPalette.find((e) => e.command === entry.command)?.when, entry.when);
    assert.match(commands.find((c) => c.command === entry.command)?.icon ?? '', /^\$\([a-z-]+\)$/);
  }
  assert.deepEqual(packageJson.contributes.menus['editor/title'], editorTitle);
  const stepWhen = commandPalette.find((e) => e.command === 'pallasite.optimizeStep')?.when;
  assert.equal(stepWhen, 'pallasite.advertises.optimize && editorLangId == python');
});

test('"Set up an LLM provider…" opens the settings its answer names, and only pallasite settings', () => {
  assert.equal(settingsToOpen({ ok: true, settings: 'pallasite.agent', docs: 'file:///docs/agents.md' }), 'pallasite.agent');
  assert.equal(settingsToOpen({ ok: false, settings: 'pallasite.agent' }), undefined);
  assert.equal(settingsToOpen({ ok: true, settings: 'editor.fontSize' }), undefined);
  assert.equal(settingsToOpen({ ok: true }), undefined);
  assert.equal(settingsToOpen(null), undefined);
});
