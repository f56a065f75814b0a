/**
 * The status bar item's content, from the server's `pallasite/status` notification
 * ({target, backend, worker, trusted, files}) or from the client's own state before the server runs.
 * `files` carries each open kernel document's last verdict in the server's words; the item shows the
 * active editor's. Pure functions: what to show is decided here, VS Code only displays it.
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
  /** Each open kernel document's last verdict, in the server's words. */
  readonly files?: readonly FileVerdict[];
}

/** One document's last verdict: "checking", the compile verdict of its last check, or tier 0's count. */
export interface FileVerdict {
  readonly uri: string;
  /** "checking", "ok", "error", "unknown" or "tier0" (the server's). */
  readonly state: string;
  /** Short words for the status bar, e.g. "not compiled: 1 error(s): PLS001". */
  readonly verdict: string;
  /** The long form for the tooltip. */
  readonly detail: string;
}

function parseFiles(raw: unknown): FileVerdict[] | undefined {
  if (!Array.isArray(raw)) {
    return undefined;
  }
  return raw.filter(
    (f): f is FileVerdict =>
      typeof f === 'object' &&
      f !== null &&
      ['uri', 'state', 'verdict', 'detail'].every((k) => typeof (f as Record<string, unknown>)[k] === 'string'),
  );
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
  const files = parseFiles(r['files']);
  return {
    target: r['target'],
    backend: typeof r['backend'] === 'string' ? r['backend'] : 'local',
    worker: r['worker'],
    trusted: r['trusted'],
    ...(Array.isArray(tiers) && tiers.every((t) => typeof t === 'number') ? { tiers: tiers as number[] } : {}),
    ...(files === undefined ? {} : { files }),
  };
}

/** The verdict of the document `uri` (the active editor's), if the server sent one. */
export function fileVerdict(status: ServerStatus, uri: string | undefined): FileVerdict | undefined {
  return uri === undefined ? undefined : status.files?.find((f) => f.uri === uri);
}

const VERDICT_ICONS: Record<string, string> = { ok: '$(pass)', error: '$(error)', checking: '$(sync~spin)' };

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

/**
 * e.g. "$(circuit-board) v6e · local · idle", "… · $(workspace-untrusted) untrusted", then the active
 * document's last verdict ("… · $(error) not compiled: 1 error(s): PLS001") when `uri` has one.
 */
export function statusText(status: ServerStatus, uri?: string): string {
  const parts = [`${workerIcon(status.worker)} ${status.target}`, status.backend, status.worker];
  if (!status.trusted) {
    parts.push('$(workspace-untrusted) untrusted');
  }
  const verdict = fileVerdict(status, uri);
  if (verdict !== undefined) {
    const icon = VERDICT_ICONS[verdict.state];
    parts.push(icon === undefined ? verdict.verdict : `${icon} ${verdict.verdict}`);
  }
  return parts.join(' · ');
}

export function statusTooltip(status: ServerStatus, uri?: string): string {
  const verdict = fileVerdict(status, uri);
  return [
    ...(verdict === undefined ? [] : [`This file: ${verdict.detail}`]),
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
