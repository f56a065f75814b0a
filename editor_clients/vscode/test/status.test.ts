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
