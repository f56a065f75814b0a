/** Which command line starts the server, and the message when pallasite is missing. */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { commandLine, expandPath, installAdvice, launchBlocked, resolveLaunch } from '../src/interpreter';

const none = { serverPath: '', interpreter: '', platform: 'linux' };

test('serverPath wins and runs `<path> serve`', () => {
  const plan = resolveLaunch({ ...none, serverPath: '/opt/bin/pallasite', interpreter: '/usr/bin/python3.11' });
  assert.equal(plan.command, '/opt/bin/pallasite');
  assert.deepEqual(plan.args, ['serve']);
  assert.deepEqual(plan.versionArgs, ['--version']);
  assert.equal(plan.source, 'pallasite.serverPath');
  assert.equal(plan.python, undefined);
});

test('an explicit interpreter setting beats the Python extension, which beats the default', () => {
  const configured = resolveLaunch({ ...none, interpreter: '/venv/bin/python', pythonExtension: '/other/python' });
  assert.equal(configured.command, '/venv/bin/python');
  assert.equal(configured.source, 'pallasite.interpreter');
  assert.deepEqual(configured.args, ['-m', 'pallasite.server.cli', 'serve']);
  assert.deepEqual(configured.versionArgs, ['-m', 'pallasite.server.cli', '--version']);

  const fromExtension = resolveLaunch({ ...none, pythonExtension: '/proj/.venv/bin/python' });
  assert.equal(fromExtension.command, '/proj/.venv/bin/python');
  assert.equal(fromExtension.source, 'Python extension');

  assert.equal(resolveLaunch(none).command, 'python3');
  assert.equal(resolveLaunch({ ...none, platform: 'win32' }).command, 'python');
  assert.equal(resolveLaunch({ ...none, pythonExtension: '  ' }).source, 'default');
});

test('paths expand ${workspaceFolder}, ${userHome} and ~', () => {
  const vars = { workspaceFolder: '/w', home: '/home/u' };
  assert.equal(expandPath('${workspaceFolder}/.venv/bin/python', vars), '/w/.venv/bin/python');
  assert.equal(expandPath('~/bin/pallasite', vars), '/home/u/bin/pallasite');
  assert.equal(expandPath('${userHome}/x', vars), '/home/u/x');
  assert.equal(expandPath('/a~b', vars), '/a~b');
  assert.equal(
    resolveLaunch({ ...none, interpreter: '${workspaceFolder}/.venv/bin/python', workspaceFolder: '/w' }).command,
    '/w/.venv/bin/python',
  );
});

test('the install message names the interpreter, the failure and the pip command for it', () => {
  const plan = resolveLaunch({ ...none, pythonExtension: '/proj/.venv/bin/python' });
  const message = installAdvice(plan, "Traceback ...\n/proj/.venv/bin/python: No module named pallasite\n");
  assert.match(message, /not installed for \/proj\/\.venv\/bin\/python \(selected in the Python extension\)/);
  assert.match(message, /No module named pallasite/);
  assert.match(message, /`\/proj\/\.venv\/bin\/python -m pip install \/path\/to\/pallasite`/);
  assert.match(message, /on no package index/);
  assert.doesNotMatch(message, /pip install pallasite/);
  assert.match(message, /-m pip install -e \./);
});

test('a broken serverPath gets a message about serverPath, not pip', () => {
  const plan = resolveLaunch({ ...none, serverPath: '/nope/pallasite' });
  const message = installAdvice(plan, 'spawn /nope/pallasite ENOENT');
  assert.match(message, /pallasite\.serverPath/);
  assert.match(message, /ENOENT/);
  assert.doesNotMatch(message, /pip install/);
});

test('command lines are quoted the way a shell would need', () => {
  assert.equal(commandLine('/a b/python', ['-m', 'x']), "'/a b/python' -m x");
  assert.equal(commandLine('python3', ['-m', 'pallasite.server.cli']), 'python3 -m pallasite.server.cli');
});

test("in a folder VS Code does not trust, a server inside that folder waits for trust", () => {
  const local = resolveLaunch({ ...none, pythonExtension: '/w/.venv/bin/python' });
  const message = launchBlocked(local, false, '/w');
  assert.match(message ?? '', /not starting \/w\/\.venv\/bin\/python .*does not trust/);
  assert.equal(launchBlocked(local, true, '/w'), undefined);
  assert.equal(launchBlocked(resolveLaunch({ ...none, pythonExtension: '/usr/bin/python3' }), false, '/w'), undefined);
  assert.equal(launchBlocked(resolveLaunch({ ...none, pythonExtension: '/work/python' }), false, '/w'), undefined);
  assert.equal(launchBlocked(local, false, undefined), undefined);
});
