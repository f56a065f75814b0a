/** The settings section sent to the server. */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLIENT_KEYS } from '../src/configSchema';
import { reactionTo, serverSection } from '../src/settings';

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
