/**
 * The command palette entries and the server commands behind them.
 *
 * The server lists its commands in `executeCommandProvider.commands` of its initialize result;
 * a palette entry is shown only while the running server advertises the command it forwards to
 * (a `when` clause on a context key per server command). The table below is the single source for
 * package.json's `contributes.commands` / `menus.commandPalette` (scripts/sync-manifest.mjs).
 */

export interface PaletteCommand {
  /** VS Code command id (what package.json contributes). */
  readonly id: string;
  /** The server command it sends with workspace/executeCommand. */
  readonly server: string;
  readonly title: string;
  /** Only offered for an open Python file. */
  readonly needsPythonFile: boolean;
}

export const CATEGORY = 'Pallasite';

export const PALETTE: readonly PaletteCommand[] = [
  { id: 'pallasite.check', server: 'pallasite.check', title: 'Check This File', needsPythonFile: true },
  {
    id: 'pallasite.checkTier3',
    server: 'pallasite.check',
    title: 'Check This File Including Tier 3 (TPU Interpret Mode)',
    needsPythonFile: true,
  },
  { id: 'pallasite.selectTarget', server: 'pallasite.selectTarget', title: 'Select Target TPU Chip', needsPythonFile: false },
  { id: 'pallasite.trustFolder', server: 'pallasite.trustFolder', title: 'Trust This Folder (Run Its Kernels in a Worker)', needsPythonFile: false },
];

/** The context key that says whether the running server advertises `serverCommand`. */
export function contextKey(serverCommand: string): string {
  const name = serverCommand.startsWith('pallasite.') ? serverCommand.slice('pallasite.'.length) : serverCommand;
  return `pallasite.advertises.${name}`;
}

/** The `when` clause of a palette entry. */
export function whenClause(entry: PaletteCommand): string {
  const parts = [contextKey(entry.server)];
  if (entry.needsPythonFile) {
    parts.push('editorLangId == python');
  }
  return parts.join(' && ');
}

/** The command ids a server advertises, read defensively from its initialize result. */
export function advertisedCommands(initializeResult: unknown): string[] {
  const capabilities = (initializeResult as { capabilities?: unknown } | undefined)?.capabilities;
  const provider = (capabilities as { executeCommandProvider?: unknown } | undefined)?.executeCommandProvider;
  const commands = (provider as { commands?: unknown } | undefined)?.commands;
  if (!Array.isArray(commands)) {
    return [];
  }
  return commands.filter((c): c is string => typeof c === 'string');
}

/** The palette entries that lead somewhere with this server. */
export function availablePalette(advertised: readonly string[]): PaletteCommand[] {
  return PALETTE.filter((entry) => advertised.includes(entry.server));
}

/**
 * Every context key the extension sets, with its value: true for each advertised command (future
 * server commands included), false for palette commands this server does not have. `undefined`
 * advertised (no server running) turns every palette key off.
 */
export function contextValues(advertised: readonly string[]): Record<string, boolean> {
  const values: Record<string, boolean> = {};
  for (const entry of PALETTE) {
    values[contextKey(entry.server)] = false;
  }
  for (const command of advertised) {
    values[contextKey(command)] = true;
  }
  return values;
}

/** What the editor knows when a palette command runs. */
export interface CommandContext {
  /** URI of the active editor's document, if any. */
  readonly documentUri?: string;
  /** URI of the workspace folder of that document (or the first folder). */
  readonly folderUri?: string;
}

/**
 * Arguments for the server command behind a palette entry, run with no arguments of its own.
 * `undefined`: the command cannot run here (e.g. "check this file" with no file open); the
 * caller says so instead of sending a request that does nothing.
 *
 * Server contract (server/lsp.py): pallasite.check(uri, options?) with options.tier3 true to add
 * the TPU interpret-mode run; pallasite.selectTarget(chip); pallasite.trustFolder(folderUri?).
 */
export function paletteArguments(id: string, context: CommandContext, chip?: string): unknown[] | undefined {
  switch (id) {
    case 'pallasite.check':
      return context.documentUri === undefined ? undefined : [context.documentUri];
    case 'pallasite.checkTier3':
      return context.documentUri === undefined ? undefined : [context.documentUri, { tier3: true }];
    case 'pallasite.selectTarget':
      return chip === undefined ? undefined : [chip];
    case 'pallasite.trustFolder':
      return context.folderUri === undefined ? [] : [context.folderUri];
    default:
      return [];
  }
}

/** The `contributes.commands` and `menus.commandPalette` blocks for package.json. */
export function manifestCommands(): {
  commands: { command: string; title: string; category: string; enablement: string }[];
  commandPalette: { command: string; when: string }[];
} {
  return {
    commands: PALETTE.map((entry) => ({
      command: entry.id,
      title: entry.title,
      category: CATEGORY,
      enablement: contextKey(entry.server),
    })),
    commandPalette: PALETTE.map((entry) => ({ command: entry.id, when: whenClause(entry) })),
  };
}
