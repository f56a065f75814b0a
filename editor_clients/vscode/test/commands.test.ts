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
  manifestCommands,
  paletteArguments,
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
    ['pallasite.check', 'pallasite.checkTier3'],
  );
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
