/** The settings section sent to the server. */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLIENT_KEYS } from '../src/configSchema';
import { explicitSection, reactionTo, serverKeys, serverSection } from '../src/settings';

test('client-only keys are stripped, server keys are kept nested', () => {
  const section = serverSection({
    target: 'v5e',
    check: { debounceMs: 300, onSave: true },
    severity: { PLS010: 'off' },
    serverPath: '/opt/pallasite',
    interpreter: '/venv/bin/python',
    trace: { server: 'verbose' },
  });
  assert.deepEqual(section, { target: 'v5e', check: { debounceMs: 300, onSave: true }, severity: { PLS010: 'off' } });
  assert.deepEqual([...CLIENT_KEYS].sort(), ['interpreter', 'serverPath', 'trace']);
});

test('functions and undefined values (WorkspaceConfiguration methods) are dropped; the input is not mutated', () => {
  const input = { target: 'v6e', get: () => 1, update: () => undefined, tiers: [0, 1], worker: { interpreter: undefined } };
  const section = serverSection(input);
  assert.deepEqual(section, { target: 'v6e', tiers: [0, 1], worker: {} });
  assert.equal(typeof input.get, 'function');
  (section['tiers'] as number[]).push(2);
  assert.deepEqual(input.tiers, [0, 1]);
});

test('anything but an object gives the server its defaults', () => {
  assert.deepEqual(serverSection(undefined), {});
  assert.deepEqual(serverSection([1, 2]), {});
  assert.deepEqual(serverSection('v5e'), {});
});

test('changing how the server starts restarts it; other pallasite keys are resent', () => {
  const affects = (changed: string[]) => (key: string) => changed.some((c) => c === key || c.startsWith(`${key}.`));
  assert.equal(reactionTo(affects(['pallasite.interpreter'])), 'restart');
  assert.equal(reactionTo(affects(['pallasite.serverPath'])), 'restart');
  assert.equal(reactionTo(affects(['pallasite.check.debounceMs'])), 'resend');
  assert.equal(reactionTo(affects(['python.defaultInterpreterPath'])), 'none');
});

test('only explicitly set values are sent, nested, most specific scope first', () => {
  const inspected: Record<string, { globalValue?: unknown; workspaceValue?: unknown; workspaceFolderValue?: unknown }> = {
    target: { globalValue: 'v5e', workspaceValue: 'v5p' },
    tiers: {},
    'check.debounceMs': { workspaceFolderValue: 300 },
    'check.onSave': { globalValue: false },
    'trust.mode': undefined as never,
    severity: { globalValue: { PLS010: 'off' }, workspaceValue: { PLS001: 'warning' } },
  };
  const section = explicitSection(Object.keys(inspected), (key) => inspected[key]);
  assert.deepEqual(section, {
    target: 'v5p',
    check: { debounceMs: 300, onSave: false },
    severity: { PLS010: 'off', PLS001: 'warning' },
  });
  // Nothing set: an empty section, so the project's [tool.pallasite] and the server defaults apply.
  assert.deepEqual(explicitSection(['target', 'check.onOpen'], () => ({})), {});
});

test("the server's keys are the manifest's minus the client-only ones", () => {
  const properties = {
    'pallasite.target': {},
    'pallasite.check.debounceMs': {},
    'pallasite.serverPath': {},
    'pallasite.interpreter': {},
    'pallasite.trace.server': {},
    'other.key': {},
  };
  assert.deepEqual(serverKeys(properties), ['target', 'check.debounceMs']);
});
