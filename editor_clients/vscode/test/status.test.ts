/** The status bar item's text and tooltip from `pallasite/status`. */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clientStateText, isAlarming, parseStatus, statusText, statusTooltip, workerIcon } from '../src/status';

test('a well-formed notification is parsed; a malformed one is refused', () => {
  assert.deepEqual(parseStatus({ target: 'v5e', backend: 'local', worker: 'idle', trusted: true, extra: 1 }), {
    target: 'v5e',
    backend: 'local',
    worker: 'idle',
    trusted: true,
  });
  assert.deepEqual(parseStatus({ target: 'v5e', worker: 'idle', trusted: true, tiers: [0, 1] })?.tiers, [0, 1]);
  assert.equal(parseStatus({ target: 'v5e', worker: 'idle', trusted: true, tiers: ['x'] })?.tiers, undefined);
  assert.equal(parseStatus({ target: 'v5e', worker: 'idle', trusted: 'yes' }), undefined);
  assert.equal(parseStatus(null), undefined);
  assert.equal(parseStatus('v5e'), undefined);
  assert.equal(parseStatus({ target: 'v5e', worker: 'idle', trusted: false })?.backend, 'local');
});

test('the text shows chip, backend and worker state, and says when the folder is untrusted', () => {
  const trusted = { target: 'v6e', backend: 'local', worker: 'idle', trusted: true };
  assert.equal(statusText(trusted), '$(circuit-board) v6e · local · idle');
  assert.equal(
    statusText({ ...trusted, trusted: false }),
    '$(circuit-board) v6e · local · idle · $(workspace-untrusted) untrusted',
  );
  assert.equal(statusText({ ...trusted, worker: 'checking' }), '$(sync~spin) v6e · local · checking');
  assert.equal(statusText({ ...trusted, worker: 'crashed' }), '$(error) v6e · local · crashed');
});

test('the tooltip explains trust in terms of what runs', () => {
  const status = { target: 'v5p', backend: 'local', worker: 'starting', trusted: false };
  const tooltip = statusTooltip(status);
  assert.match(tooltip, /TPU v5p/);
  assert.match(tooltip, /Worker: starting/);
  assert.match(tooltip, /only tier 0/);
  assert.match(statusTooltip({ ...status, trusted: true }), /compiler tiers run/);
  assert.doesNotMatch(tooltip, /Tiers on/);
  assert.match(statusTooltip({ ...status, tiers: [0, 1, 2] }), /Tiers on open\/save: 0, 1, 2/);
});

test('only failed worker states are alarming; unknown states get the plain icon', () => {
  const base = { target: 'v6e', backend: 'local', trusted: true };
  assert.equal(isAlarming({ ...base, worker: 'crashed' }), true);
  assert.equal(isAlarming({ ...base, worker: 'idle' }), false);
  assert.equal(workerIcon('something new'), '$(circuit-board)');
});

test('client states before the server speaks', () => {
  assert.match(clientStateText('not installed'), /not installed/);
  assert.match(clientStateText('starting'), /sync~spin/);
});

test("the active document's last verdict follows the server's words; other documents' do not show", () => {
  const files = [
    { uri: 'file:///k/a.py', state: 'error', verdict: 'not compiled: 1 error(s): PLS001', detail: 'not compiled for v6e: 1 error(s): PLS001' },
    { uri: 'file:///k/b.py', state: 'ok', verdict: 'compiled (tiers 0,1,2)', detail: 'compiled for v6e (tiers 0,1,2)' },
    { uri: 'file:///k/c.py', state: 'odd' },
  ];
  const status = parseStatus({ target: 'v6e', backend: 'local', worker: 'idle', trusted: true, files });
  assert.equal(status?.files?.length, 2); // the malformed entry is dropped
  assert.equal(statusText(status!, 'file:///k/a.py'), '$(circuit-board) v6e · local · idle · $(error) not compiled: 1 error(s): PLS001');
  assert.equal(statusText(status!, 'file:///k/b.py'), '$(circuit-board) v6e · local · idle · $(pass) compiled (tiers 0,1,2)');
  assert.equal(statusText(status!, 'file:///k/other.py'), '$(circuit-board) v6e · local · idle');
  assert.equal(statusText(status!), '$(circuit-board) v6e · local · idle');
  assert.match(statusTooltip(status!, 'file:///k/a.py'), /^This file: not compiled for v6e: 1 error\(s\): PLS001/);
  assert.equal(parseStatus({ target: 'v6e', worker: 'idle', trusted: true, files: 'x' })?.files, undefined);
});
