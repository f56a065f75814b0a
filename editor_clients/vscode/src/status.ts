/**
 * The status bar item's content, from the server's `pallasite/status` notification
 * ({target, backend, worker, trusted}) or from the client's own state before the server runs.
 * Pure functions: what to show is decided here, VS Code only displays it.
 */

export const STATUS_NOTIFICATION = 'pallasite/status';

export interface ServerStatus {
  /** Target TPU chip, e.g. "v6e". */
  readonly target: string;
  /** Where workers run, e.g. "local". */
  readonly backend: string;
  /** Worker state: "idle", "starting", "checking", "crashed", ... (the server's words). */
  readonly worker: string;
  /** Whether this folder may run its kernels in a worker (compiler tiers). */
  readonly trusted: boolean;
  /** The tiers run on open/save, when the server says. */
  readonly tiers?: readonly number[];
}

/** The notification's payload if it has the expected shape, else undefined (and nothing is shown). */
export function parseStatus(raw: unknown): ServerStatus | undefined {
  if (typeof raw !== 'object' || raw === null) {
    return undefined;
  }
  const r = raw as Record<string, unknown>;
  if (typeof r['target'] !== 'string' || typeof r['worker'] !== 'string' || typeof r['trusted'] !== 'boolean') {
    return undefined;
  }
  const tiers = r['tiers'];
  return {
    target: r['target'],
    backend: typeof r['backend'] === 'string' ? r['backend'] : 'local',
    worker: r['worker'],
    trusted: r['trusted'],
    ...(Array.isArray(tiers) && tiers.every((t) => typeof t === 'number') ? { tiers: tiers as number[] } : {}),
  };
}

const BUSY = new Set(['starting', 'checking', 'compiling', 'running', 'restarting']);
const FAILED = new Set(['crashed', 'failed', 'unavailable', 'error']);

/** The codicon that shows the worker state. */
export function workerIcon(worker: string): string {
  if (BUSY.has(worker)) {
    return '$(sync~spin)';
  }
  if (FAILED.has(worker)) {
    return '$(error)';
  }
  return '$(circuit-board)';
}

/** e.g. "$(circuit-board) v6e · local · idle" or "… · $(workspace-untrusted) untrusted". */
export function statusText(status: ServerStatus): string {
  const parts = [`${workerIcon(status.worker)} ${status.target}`, status.backend, status.worker];
  if (!status.trusted) {
    parts.push('$(workspace-untrusted) untrusted');
  }
  return parts.join(' · ');
}

export function statusTooltip(status: ServerStatus): string {
  return [
    `Pallasite: verdicts for TPU ${status.target}`,
    `Workers run: ${status.backend}`,
    `Worker: ${status.worker}`,
    ...(status.tiers === undefined ? [] : [`Tiers on open/save: ${status.tiers.join(', ')}`]),
    status.trusted
      ? 'Folder trusted: compiler tiers run this folder\'s kernels in a pallasite worker.'
      : 'Folder not trusted: only tier 0 (source rules) runs; nothing from this folder is executed.',
  ].join('\n');
}

/** A worker state the user should notice (the item gets the error background). */
export function isAlarming(status: ServerStatus): boolean {
  return FAILED.has(status.worker);
}

/** The client's own states, before any notification arrives. */
export type ClientState = 'starting' | 'running' | 'stopped' | 'not installed';

export function clientStateText(state: ClientState): string {
  switch (state) {
    case 'starting':
      return '$(sync~spin) pallasite';
    case 'running':
      return '$(circuit-board) pallasite';
    case 'stopped':
      return '$(debug-stop) pallasite stopped';
    case 'not installed':
      return '$(error) pallasite not installed';
  }
}
