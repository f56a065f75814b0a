/** The settings schema -> contributes.configuration conversion. */

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  CLIENT_SETTINGS,
  SchemaError,
  chipChoices,
  configurationDifferences,
  configurationFromSchema,
  flattenSchema,
} from '../src/configSchema';

const root = join(__dirname, '..', '..');
const fixture = JSON.parse(readFileSync(join(root, 'test', 'fixtures', 'schema-with-refs.json'), 'utf8'));
const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

test('nested objects become dotted keys, maps stay one setting, $refs are followed', () => {
  const flat = flattenSchema(fixture);
  assert.deepEqual(Object.keys(flat), [
    'pallasite.target',
    'pallasite.check.onSave',
    'pallasite.check.limits.timeLimitS',
    'pallasite.severity',
  ]);
  assert.deepEqual(flat['pallasite.check.limits.timeLimitS'], {
    type: 'number',
    default: 60,
    minimum: 1,
    description: 'seconds',
  });
  assert.deepEqual(flat['pallasite.severity'], {
    type: 'object',
    additionalProperties: { type: 'string' },
    default: {},
    description: 'per code',
  });
});

test('the configuration keeps schema order, then the client-only keys, and scopes the trust keys', () => {
  const schema = {
    type: 'object',
    properties: {
      target: { type: 'string', default: 'v6e' },
      trust: { type: 'object', properties: { mode: { type: 'string', enum: ['ask', 'always'], default: 'ask' } } },
    },
  };
  const config = configurationFromSchema(schema);
  const keys = Object.keys(config.properties);
  assert.deepEqual(keys, ['pallasite.target', 'pallasite.trust.mode', ...Object.keys(CLIENT_SETTINGS)]);
  assert.deepEqual(
    keys.map((k) => config.properties[k]?.['order']),
    keys.map((_, i) => i),
  );
  assert.equal(config.properties['pallasite.trust.mode']?.['scope'], 'application');
  assert.equal(config.properties['pallasite.target']?.['scope'], undefined);
});

test('a server setting that collides with a client-only key is refused with a message naming it', () => {
  const schema = { type: 'object', properties: { interpreter: { type: 'string', default: '' } } };
  assert.throws(() => configurationFromSchema(schema), (err: Error) => {
    assert.ok(err instanceof SchemaError);
    assert.match(err.message, /pallasite\.interpreter/);
    return true;
  });
});

test('bad schemas give a clear error instead of a crash', () => {
  assert.throws(() => flattenSchema('not json'), /pallasite settings --schema/);
  assert.throws(
    () => flattenSchema({ properties: { a: { $ref: '#/$defs/Missing' } } }),
    /pallasite\.a: \$ref "#\/\$defs\/Missing" points at nothing/,
  );
  assert.throws(() => flattenSchema({ properties: { a: { $ref: 'http://x/y' } } }), /only local \$ref/);
});

test('differences name the missing, changed and extra settings; key order does not count', () => {
  const expected = configurationFromSchema(fixture);
  const same = JSON.parse(JSON.stringify(expected));
  assert.deepEqual(configurationDifferences(expected, same), []);
  const reordered = { properties: Object.fromEntries(Object.entries(expected.properties).reverse()) };
  assert.deepEqual(configurationDifferences(expected, reordered), []);
  const changed = JSON.parse(JSON.stringify(expected));
  delete changed.properties['pallasite.target'];
  changed.properties['pallasite.check.onSave'].default = false;
  changed.properties['pallasite.gone'] = { type: 'string' };
  const problems = configurationDifferences(expected, changed);
  assert.equal(problems.length, 3);
  assert.match(problems[0] ?? '', /missing setting pallasite\.target/);
  assert.match(problems[1] ?? '', /pallasite\.check\.onSave differs/);
  assert.match(problems[2] ?? '', /declares pallasite\.gone/);
});

test('the chip quick pick offers the target enum of the manifest', () => {
  assert.deepEqual(chipChoices(packageJson), packageJson.contributes.configuration.properties['pallasite.target'].enum);
  assert.ok(chipChoices(packageJson).length > 0);
  assert.deepEqual(chipChoices({}), []);
});

test("package.json's configuration matches the live server schema (when pallasite is installed)", (t) => {
  const python = process.env['PALLASITE_PYTHON'];
  if (python === undefined) {
    t.skip('set PALLASITE_PYTHON to the interpreter that has pallasite to compare with the live schema');
    return;
  }
  const schema = JSON.parse(
    execFileSync(python, ['-m', 'pallasite.server.cli', 'settings', '--schema'], { encoding: 'utf8' }),
  );
  assert.deepEqual(configurationDifferences(configurationFromSchema(schema), packageJson.contributes.configuration), []);
});
