#!/usr/bin/env node
// Keeps package.json in step with the server: `contributes.configuration` from
// `pallasite settings --schema`, and the commands, palette entries and editor title bar entries
// (step-by-step plan documents) from src/commands.ts. Other `menus` entries are kept as they are.
//
//   node scripts/sync-manifest.mjs [--check] [--schema FILE|-]
//
// Without --schema it runs `$PALLASITE_PYTHON -m pallasite.server.cli settings --schema`
// (PALLASITE_PYTHON defaults to python3). --check changes nothing and exits 1 listing every
// difference; without it package.json is rewritten. Needs `npm run compile` first (it uses the
// compiled modules in out/). Exit codes: 0 in step / written, 1 out of step, 2 could not run.

import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const require = createRequire(import.meta.url);

function fail(message) {
  process.stderr.write(`sync-manifest: ${message}\n`);
  process.exit(2);
}

let configSchema, commands;
try {
  configSchema = require(join(root, 'out', 'src', 'configSchema.js'));
  commands = require(join(root, 'out', 'src', 'commands.js'));
} catch (err) {
  fail(`the compiled modules are missing (${err.message}); run \`npm run compile\` first`);
}

const args = process.argv.slice(2);
const check = args.includes('--check');
const schemaAt = args.indexOf('--schema');
let schemaText;
if (schemaAt >= 0) {
  const source = args[schemaAt + 1];
  if (source === undefined) fail('--schema needs a file name, or - for standard input');
  try {
    schemaText = readFileSync(source === '-' ? 0 : source, 'utf8');
  } catch (err) {
    fail(`cannot read the schema from ${source}: ${err.message}`);
  }
} else {
  const python = process.env.PALLASITE_PYTHON || 'python3';
  try {
    schemaText = execFileSync(python, ['-m', 'pallasite.server.cli', 'settings', '--schema'], { encoding: 'utf8' });
  } catch (err) {
    fail(`\`${python} -m pallasite.server.cli settings --schema\` failed (${err.message.split('\n')[0]}); ` +
      'set PALLASITE_PYTHON to an interpreter with pallasite installed, or pass --schema FILE');
  }
}

let schema;
try {
  schema = JSON.parse(schemaText);
} catch (err) {
  fail(`the settings schema is not JSON: ${err.message}`);
}

let configuration;
try {
  configuration = configSchema.configurationFromSchema(schema);
} catch (err) {
  fail(err.message);
}
const { commands: commandList, commandPalette, editorTitle } = commands.manifestCommands();

const manifestPath = join(root, 'package.json');
const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
const contributes = (manifest.contributes ??= {});

if (check) {
  const problems = configSchema.configurationDifferences(configuration, contributes.configuration);
  const canonical = configSchema.canonical;
  if (canonical(contributes.commands) !== canonical(commandList)) {
    problems.push('contributes.commands differs from the palette table in src/commands.ts');
  }
  if (canonical(contributes.menus?.commandPalette) !== canonical(commandPalette)) {
    problems.push('contributes.menus.commandPalette differs from the palette table in src/commands.ts');
  }
  if (canonical(contributes.menus?.['editor/title']) !== canonical(editorTitle)) {
    problems.push('contributes.menus["editor/title"] differs from the plan-document entries in src/commands.ts');
  }
  const restricted = manifest.capabilities?.untrustedWorkspaces?.restrictedConfigurations;
  if (canonical(restricted) !== canonical(configSchema.RESTRICTED)) {
    problems.push('capabilities.untrustedWorkspaces.restrictedConfigurations differs from RESTRICTED in src/configSchema.ts');
  }
  if (problems.length > 0) {
    process.stderr.write(`package.json is out of step with the server (run \`npm run sync-manifest\`):\n  ${problems.join('\n  ')}\n`);
    process.exit(1);
  }
  process.stdout.write(`package.json is in step: ${Object.keys(configuration.properties).length} settings, ${commandList.length} commands\n`);
} else {
  contributes.configuration = configuration;
  contributes.commands = commandList;
  contributes.menus = { ...(contributes.menus ?? {}), commandPalette, 'editor/title': editorTitle };
  manifest.capabilities = {
    ...(manifest.capabilities ?? {}),
    untrustedWorkspaces: {
      supported: 'limited',
      description:
        'In a folder VS Code does not trust, pallasite ignores that folder\'s settings for which programs to run.',
      restrictedConfigurations: [...configSchema.RESTRICTED],
    },
  };
  writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  process.stdout.write(`wrote package.json: ${Object.keys(configuration.properties).length} settings, ${commandList.length} commands\n`);
}
