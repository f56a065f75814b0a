/**
 * The `pallasite` settings section as the server receives it (initialization options,
 * workspace/configuration answers, didChangeConfiguration): VS Code's nested object minus the
 * client-only keys, so the server never warns about keys it does not own.
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
