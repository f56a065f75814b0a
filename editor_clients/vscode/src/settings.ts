/**
 * The `pallasite` settings section as the server receives it (initialization options,
 * workspace/configuration answers, didChangeConfiguration): only the values the user set (VS Code
 * would otherwise fill in every default and hide the project's [tool.pallasite]), nested, and
 * without the client-only keys, so the server never warns about keys it does not own.
 */

import { CLIENT_KEYS } from './configSchema';

export type Section = Record<string, unknown>;

function isPlainObject(value: unknown): value is Section {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Deep copy of plain data (drops functions such as WorkspaceConfiguration's get/update). */
function plain(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(plain);
  }
  if (isPlainObject(value)) {
    const out: Section = {};
    for (const [key, v] of Object.entries(value)) {
      if (typeof v !== 'function' && v !== undefined) {
        out[key] = plain(v);
      }
    }
    return out;
  }
  return value;
}

/** The section for the server; anything that is not an object becomes `{}` (server defaults). */
export function serverSection(config: unknown): Section {
  if (!isPlainObject(config)) {
    return {};
  }
  const out = plain(config) as Section;
  for (const key of CLIENT_KEYS) {
    delete out[key];
  }
  return out;
}

/** Keys whose change needs a new server process (the command line depends on them). */
export const RESTART_KEYS: readonly string[] = ['pallasite.serverPath', 'pallasite.interpreter'];

/** Whether a configuration change touching `affected` keys needs a restart, a resend, or nothing. */
export function reactionTo(affects: (key: string) => boolean): 'restart' | 'resend' | 'none' {
  if (RESTART_KEYS.some(affects)) {
    return 'restart';
  }
  return affects('pallasite') ? 'resend' : 'none';
}

/** What VS Code's `WorkspaceConfiguration.inspect` reports for one key (the parts used here). */
export interface Inspected {
  readonly globalValue?: unknown;
  readonly workspaceValue?: unknown;
  readonly workspaceFolderValue?: unknown;
}

/**
 * The explicitly set values of `keys` (dotted, without the `pallasite.` prefix) as one nested
 * section. The most specific scope wins (folder > workspace > user); object values (e.g.
 * `severity`) are merged across scopes the way VS Code merges them.
 */
export function explicitSection(keys: readonly string[], inspect: (key: string) => Inspected | undefined): Section {
  const out: Section = {};
  for (const key of keys) {
    const found = inspect(key);
    const scoped = [found?.globalValue, found?.workspaceValue, found?.workspaceFolderValue].filter(
      (v) => v !== undefined && v !== null,
    );
    if (scoped.length === 0) {
      continue;
    }
    const value = scoped.every(isPlainObject)
      ? Object.assign({}, ...scoped.map((v) => plain(v) as Section))
      : plain(scoped[scoped.length - 1]);
    const parts = key.split('.');
    let node = out;
    for (const part of parts.slice(0, -1)) {
      const next = node[part];
      node = (isPlainObject(next) ? next : (node[part] = {})) as Section;
    }
    node[parts[parts.length - 1] as string] = value;
  }
  return serverSection(out);
}

/** The server's keys (without the prefix) among a manifest's configuration properties. */
export function serverKeys(properties: Record<string, unknown>): string[] {
  return Object.keys(properties)
    .filter((k) => k.startsWith('pallasite.') && !CLIENT_KEYS.includes(k.slice('pallasite.'.length).split('.')[0] ?? ''))
    .map((k) => k.slice('pallasite.'.length));
}
