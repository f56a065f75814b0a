/**
 * The extension's `contributes.configuration`, generated from the server's settings JSON Schema
 * (`pallasite settings --schema`), plus the few keys only the client reads.
 *
 * The server owns the settings: its schema is nested (`check.debounceMs`), VS Code wants one
 * dotted key per leaf (`pallasite.check.debounceMs`). Objects with declared `properties` are
 * flattened; objects without (maps such as `severity`) stay one setting. Pure functions only: the
 * manifest script and the unit tests use them without VS Code.
 */

export type JsonSchema = { [key: string]: unknown };

export const SECTION = 'pallasite';

/** Settings read by the extension itself; they are never sent to the server. */
export const CLIENT_SETTINGS: Readonly<Record<string, JsonSchema>> = {
  'pallasite.serverPath': {
    type: 'string',
    default: '',
    scope: 'machine-overridable',
    description:
      'A `pallasite` executable to start as `<serverPath> serve`. Empty: run the Python interpreter ' +
      '(see pallasite.interpreter) with `-m pallasite.server.cli serve`. ${workspaceFolder} and ~ are expanded.',
  },
  'pallasite.interpreter': {
    type: 'string',
    default: '',
    scope: 'machine-overridable',
    description:
      'Python interpreter that runs the pallasite language server (pallasite must be installed in it). ' +
      'Empty: the interpreter selected in the Python extension, else python3. ${workspaceFolder} and ~ are expanded.',
  },
  'pallasite.trace.server': {
    type: 'string',
    enum: ['off', 'messages', 'verbose'],
    default: 'off',
    scope: 'window',
    description: 'Log the messages between VS Code and the pallasite server in the "pallasite" output channel.',
  },
};

/** Top-level names under `pallasite.` that belong to the client (stripped before sending). */
export const CLIENT_KEYS: readonly string[] = [
  ...new Set(Object.keys(CLIENT_SETTINGS).map((key) => key.slice(SECTION.length + 1).split('.')[0] as string)),
];

/**
 * Who may set a server setting in VS Code. Trust decides whether a folder's code is executed, so a
 * folder's own .vscode/settings.json must not be able to grant it: user settings only.
 */
export const SCOPES: Readonly<Record<string, string>> = {
  'pallasite.trust.mode': 'application',
  'pallasite.trust.folders': 'application',
  'pallasite.worker.interpreter': 'machine-overridable',
  'pallasite.backend.kind': 'machine-overridable',
  'pallasite.backend.host': 'machine-overridable',
  'pallasite.backend.command': 'machine-overridable',
  'pallasite.backend.remoteWorker': 'machine-overridable',
  'pallasite.backend.rayAddress': 'machine-overridable',
  'pallasite.backend.rayResources': 'machine-overridable',
};

/** Settings a folder VS Code does not trust may not set (VS Code ignores its values for them). */
export const RESTRICTED: readonly string[] = [
  'pallasite.serverPath',
  'pallasite.interpreter',
  'pallasite.worker.interpreter',
  'pallasite.backend.kind',
  'pallasite.backend.host',
  'pallasite.backend.command',
  'pallasite.backend.remoteWorker',
  'pallasite.backend.rayAddress',
  'pallasite.backend.rayResources',
];

const SCHEMA_ONLY_KEYS = new Set(['$schema', '$id', '$defs', 'definitions', 'title']);

export class SchemaError extends Error {}

function isObject(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Follow a local `$ref` (`#/$defs/Name`); anything else is left as it is. */
function resolveRef(node: JsonSchema, root: JsonSchema, where: string): JsonSchema {
  const ref = node['$ref'];
  if (typeof ref !== 'string') {
    return node;
  }
  if (!ref.startsWith('#/')) {
    throw new SchemaError(`${where}: only local $ref values are supported, got ${JSON.stringify(ref)}`);
  }
  let target: unknown = root;
  for (const part of ref.slice(2).split('/')) {
    target = isObject(target) ? target[part] : undefined;
  }
  if (!isObject(target)) {
    throw new SchemaError(`${where}: $ref ${JSON.stringify(ref)} points at nothing in the schema`);
  }
  const { $ref: _ignored, ...rest } = node;
  return { ...resolveRef(target, root, where), ...rest };
}

/** `{check: {properties: {debounceMs: ...}}}` -> `{"pallasite.check.debounceMs": {...}}`, in schema order. */
export function flattenSchema(schema: unknown, section: string = SECTION): Record<string, JsonSchema> {
  if (!isObject(schema) || !isObject(schema['properties'])) {
    throw new SchemaError(
      'the settings schema must be a JSON object with "properties" (the output of `pallasite settings --schema`)',
    );
  }
  const root = schema;
  const out: Record<string, JsonSchema> = {};
  const walk = (node: JsonSchema, prefix: string): void => {
    const properties = node['properties'];
    if (!isObject(properties)) {
      return;
    }
    for (const [key, raw] of Object.entries(properties)) {
      const dotted = `${prefix}.${key}`;
      if (!isObject(raw)) {
        throw new SchemaError(`${dotted}: expected a schema object, got ${JSON.stringify(raw)}`);
      }
      const sub = resolveRef(raw, root, dotted);
      if (sub['type'] === 'object' && isObject(sub['properties'])) {
        walk(sub, dotted);
      } else {
        const leaf: JsonSchema = {};
        for (const [name, value] of Object.entries(sub)) {
          if (!SCHEMA_ONLY_KEYS.has(name)) {
            leaf[name] = value;
          }
        }
        out[dotted] = leaf;
      }
    }
  };
  walk(root, section);
  return out;
}

export interface ConfigurationContribution {
  title: string;
  properties: Record<string, JsonSchema>;
}

/** The whole `contributes.configuration` block: server settings (ordered as in the schema), then client settings. */
export function configurationFromSchema(schema: unknown): ConfigurationContribution {
  const server = flattenSchema(schema);
  const properties: Record<string, JsonSchema> = {};
  let order = 0;
  for (const [key, leaf] of Object.entries(server)) {
    const scope = SCOPES[key];
    properties[key] = { ...leaf, ...(scope === undefined ? {} : { scope }), order: order++ };
  }
  for (const [key, leaf] of Object.entries(CLIENT_SETTINGS)) {
    if (key in properties) {
      throw new SchemaError(
        `${key} is both a server setting and a client-only setting: rename the client key in src/configSchema.ts`,
      );
    }
    properties[key] = { ...leaf, order: order++ };
  }
  for (const key of Object.keys(properties)) {
    const top = key.slice(SECTION.length + 1).split('.')[0] ?? '';
    if (!(key in CLIENT_SETTINGS) && CLIENT_KEYS.includes(top)) {
      throw new SchemaError(`the server setting ${key} collides with the client-only key pallasite.${top}`);
    }
  }
  return { title: 'Pallasite', properties };
}

/** Readable differences between the generated block and the one in package.json (empty: in sync). */
export function configurationDifferences(expected: ConfigurationContribution, actual: unknown): string[] {
  if (!isObject(actual) || !isObject(actual['properties'])) {
    return ['package.json has no contributes.configuration.properties'];
  }
  const have = actual['properties'];
  const problems: string[] = [];
  for (const [key, leaf] of Object.entries(expected.properties)) {
    if (!(key in have)) {
      problems.push(`missing setting ${key}`);
    } else if (canonical(have[key]) !== canonical(leaf)) {
      problems.push(`setting ${key} differs: package.json has ${canonical(have[key])}, the schema gives ${canonical(leaf)}`);
    }
  }
  for (const key of Object.keys(have)) {
    if (!(key in expected.properties)) {
      problems.push(`package.json declares ${key}, which the server schema does not have`);
    }
  }
  return problems;
}

/** JSON with sorted object keys, so key order does not count as a difference. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isObject(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

/** The chips offered by "Select Target TPU Chip": the `pallasite.target` enum of a package.json. */
export function chipChoices(packageJson: unknown): string[] {
  const contributes = isObject(packageJson) ? packageJson['contributes'] : undefined;
  const configuration = isObject(contributes) ? contributes['configuration'] : undefined;
  const properties = isObject(configuration) ? configuration['properties'] : undefined;
  const target = isObject(properties) ? properties[`${SECTION}.target`] : undefined;
  const choices = isObject(target) ? target['enum'] : undefined;
  return Array.isArray(choices) ? choices.filter((c): c is string => typeof c === 'string') : [];
}
