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
  /** A further condition on the palette entry (a when-clause term). */
  readonly alsoWhen?: string;
  /** Acts on the step-by-step plan / diff document in the active editor (also in its title bar). */
  readonly needsPlanDocument?: boolean;
  /** The title bar icon (a codicon), for entries shown there. */
  readonly icon?: string;
}

/** Context key set from `pallasite/status`: the folder already runs its kernels in a worker. */
export const TRUSTED_KEY = 'pallasite.folderTrusted';

export const CATEGORY = 'Pallasite';

/** Every check tier: 0 source rules, 1 lowering, 2 TPU compiler, 3 TPU interpret mode. */
export const ALL_TIERS: readonly number[] = [0, 1, 2, 3];

export const PALETTE: readonly PaletteCommand[] = [
  { id: 'pallasite.check', server: 'pallasite.check', title: 'Check This File', needsPythonFile: true },
  {
    id: 'pallasite.checkTier3',
    server: 'pallasite.check',
    title: 'Check This File With All Tiers, Including Tier 3 (TPU Interpret Mode)',
    needsPythonFile: true,
  },
  { id: 'pallasite.selectTarget', server: 'pallasite.selectTarget', title: 'Select Target TPU Chip', needsPythonFile: false },
  {
    id: 'pallasite.trustFolder',
    server: 'pallasite.trustFolder',
    title: 'Trust This Folder (Run Its Kernels in a Worker)',
    needsPythonFile: false,
    alsoWhen: `!${TRUSTED_KEY}`,
  },
  {
    id: 'pallasite.checkScript',
    server: 'pallasite.check',
    title: 'Check as Script',
    needsPythonFile: true,
  },
  { id: 'pallasite.explainFinding', server: 'pallasite.explain', title: 'Explain Finding', needsPythonFile: false },
  { id: 'pallasite.optimize', server: 'pallasite.optimize', title: 'Optimize This Kernel', needsPythonFile: true },
  {
    id: 'pallasite.optimizeStep',
    server: 'pallasite.optimize',
    title: 'Optimize This Kernel Step by Step',
    needsPythonFile: true,
  },
  {
    id: 'pallasite.optimize.approve',
    server: 'pallasite.optimize.approve',
    title: 'Approve Plan / Candidate',
    needsPythonFile: false,
    needsPlanDocument: true,
    icon: '$(check)',
  },
  {
    id: 'pallasite.optimize.revise',
    server: 'pallasite.optimize.revise',
    title: 'Revise (Your Edits to This Document Are the Instruction)',
    needsPythonFile: false,
    needsPlanDocument: true,
    icon: '$(edit)',
  },
  {
    id: 'pallasite.optimize.stop',
    server: 'pallasite.optimize.stop',
    title: 'Stop Optimizing',
    needsPythonFile: false,
    needsPlanDocument: true,
    icon: '$(debug-stop)',
  },
  { id: 'pallasite.search', server: 'pallasite.search', title: 'Search for a Faster Kernel', needsPythonFile: true },
];

/**
 * Step mode's documents: the server writes each plan / candidate diff to
 * `.pallasite/plans/<run>-<iteration>.md|.diff` and opens it with window/showDocument.
 */
export const PLAN_DOCUMENT = /[\\/]\.pallasite[\\/]plans[\\/][^\\/]+$/;

/** The when-clause term for "the active editor holds a plan document" (either path separator). */
export const PLAN_DOCUMENT_WHEN = 'resourcePath =~ /\\.pallasite.plans./';

/** Whether a file path (or a URI's path) is a step-mode plan / diff document. */
export function isPlanDocument(path: string): boolean {
  return PLAN_DOCUMENT.test(path);
}

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
  if (entry.needsPlanDocument === true) {
    parts.push(PLAN_DOCUMENT_WHEN);
  }
  if (entry.alsoWhen !== undefined) {
    parts.push(entry.alsoWhen);
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
 * server commands included), false for palette commands this server does not have and for every
 * command an earlier server advertised (`previously`). An empty `advertised` (no server running)
 * turns them all off.
 */
export function contextValues(advertised: readonly string[], previously: readonly string[] = []): Record<string, boolean> {
  const values: Record<string, boolean> = {};
  for (const entry of PALETTE) {
    values[contextKey(entry.server)] = false;
  }
  for (const command of previously) {
    values[contextKey(command)] = false;
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
  /** The finding code to explain (from the diagnostic at the cursor, or typed by the user). */
  readonly findingCode?: string;
  /** URI of the active editor's document when it is a step-mode plan / diff document. */
  readonly planUri?: string;
  /** That document's text as the editor holds it (sent with revise: unsaved edits count). */
  readonly planText?: string;
}

/**
 * Arguments for the server command behind a palette entry, run with no arguments of its own.
 * `undefined`: the command cannot run here (e.g. "check this file" with no file open); the
 * caller says so instead of sending a request that does nothing.
 *
 * Server contract (server/lsp.py): pallasite.check(uri) runs the configured tiers,
 * pallasite.check({uri, tiers}) the given ones (tier 3: the TPU interpret-mode run);
 * pallasite.check({uri, script: true}) runs the file's __main__ and checks every pallas_call it
 * makes; pallasite.selectTarget(chip); pallasite.trustFolder(folderUri?) (no argument: every
 * folder); pallasite.explain(code) answers the catalog's markdown for a finding code.
 * server/editor/optimize_lsp.py: pallasite.optimize({uri, mode: 'auto' | 'step', iterations?}) answers
 * when the run ends; in step mode the server shows each plan / diff with window/showDocument and
 * waits for pallasite.optimize.approve / .revise / .stop({uri: <that document>}); revise takes the
 * document's `text` (else the file) as the new plan. server/editor/search_lsp.py: pallasite.search({uri}).
 */
export function paletteArguments(id: string, context: CommandContext, chip?: string): unknown[] | undefined {
  switch (id) {
    case 'pallasite.check':
      return context.documentUri === undefined ? undefined : [context.documentUri];
    case 'pallasite.checkTier3':
      return context.documentUri === undefined ? undefined : [{ uri: context.documentUri, tiers: ALL_TIERS }];
    case 'pallasite.selectTarget':
      return chip === undefined ? undefined : [chip];
    case 'pallasite.trustFolder':
      return context.folderUri === undefined ? [] : [context.folderUri];
    case 'pallasite.checkScript':
      return context.documentUri === undefined ? undefined : [{ uri: context.documentUri, script: true }];
    case 'pallasite.explainFinding':
      return context.findingCode === undefined ? undefined : [context.findingCode];
    case 'pallasite.optimize':
      return context.documentUri === undefined ? undefined : [{ uri: context.documentUri, mode: 'auto' }];
    case 'pallasite.optimizeStep':
      return context.documentUri === undefined ? undefined : [{ uri: context.documentUri, mode: 'step' }];
    case 'pallasite.optimize.approve':
    case 'pallasite.optimize.stop':
      return context.planUri === undefined ? undefined : [{ uri: context.planUri }];
    case 'pallasite.optimize.revise':
      return context.planUri === undefined
        ? undefined
        : [{ uri: context.planUri, ...(context.planText === undefined ? {} : { text: context.planText }) }];
    case 'pallasite.search':
      return context.documentUri === undefined ? undefined : [{ uri: context.documentUri }];
    default:
      return [];
  }
}

/**
 * Whether a call of a palette command came without arguments of its own, to be filled from the
 * editor as for the palette: none at all (the palette, a key binding), or what VS Code passes from
 * a menu - the editor title bar passes the document's URI (then its editor group). A server
 * command's own arguments are strings and plain objects such as `{uri: "file:///..."}`, never a URI.
 */
export function fromMenuOrPalette(args: readonly unknown[]): boolean {
  return args.length === 0 || isUriLike(args[0]);
}

/** A vscode.Uri (or its JSON form): scheme and path, as strings. */
export function isUriLike(value: unknown): value is { scheme: string; path: string } {
  if (typeof value !== 'object' || value === null) {
    return false;
  }
  const v = value as Record<string, unknown>;
  return typeof v.scheme === 'string' && typeof v.path === 'string';
}

/**
 * What to tell the user when a palette command cannot run where it was invoked (its arguments
 * came back undefined for want of a file or a plan document).
 */
export function missingContextMessage(id: string): string | undefined {
  const entry = PALETTE.find((e) => e.id === id);
  if (entry?.needsPlanDocument === true) {
    return 'Pallasite: open the plan or diff document of a step-by-step run (.pallasite/plans/...) first.';
  }
  if (entry?.needsPythonFile === true) {
    return 'Pallasite: open a Python kernel file first.';
  }
  return undefined;
}

/** The `contributes.commands`, `menus.commandPalette` and `menus["editor/title"]` blocks for package.json. */
export function manifestCommands(): {
  commands: { command: string; title: string; category: string; enablement: string; icon?: string }[];
  commandPalette: { command: string; when: string }[];
  editorTitle: { command: string; when: string; group: string }[];
} {
  return {
    commands: PALETTE.map((entry) => ({
      command: entry.id,
      title: entry.title,
      category: CATEGORY,
      enablement: contextKey(entry.server),
      ...(entry.icon === undefined ? {} : { icon: entry.icon }),
    })),
    commandPalette: PALETTE.map((entry) => ({ command: entry.id, when: whenClause(entry) })),
    // The plan / diff documents get Approve, Revise and Stop in their title bar.
    editorTitle: PALETTE.filter((entry) => entry.needsPlanDocument === true).map((entry, i) => ({
      command: entry.id,
      when: whenClause(entry),
      group: `navigation@${i + 1}`,
    })),
  };
}

/**
 * What to tell the user after a server command: the server answers `{ok: false, message}` when it
 * could not do it (file not open, folder not trusted, unknown chip). undefined: nothing to say.
 */
export function commandProblem(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null) {
    return undefined;
  }
  const r = result as { ok?: unknown; message?: unknown };
  if (r.ok !== false) {
    return undefined;
  }
  return typeof r.message === 'string' && r.message !== '' ? `Pallasite: ${r.message}` : 'Pallasite: the command failed.';
}

/** A finding code as the server names them: PLS and three digits. */
export const FINDING_CODE = /^PLS\d{3}$/;

/** The subset of a VS Code diagnostic used to pick the finding to explain. */
export interface DiagnosticLike {
  readonly range: { readonly start: { line: number; character: number }; readonly end: { line: number; character: number } };
  readonly code?: string | number | { value: string | number } | undefined;
  readonly source?: string | undefined;
}

function codeOf(diagnostic: DiagnosticLike): string | undefined {
  const raw = typeof diagnostic.code === 'object' && diagnostic.code !== null ? diagnostic.code.value : diagnostic.code;
  return typeof raw === 'string' && FINDING_CODE.test(raw) ? raw : undefined;
}

function contains(range: DiagnosticLike['range'], line: number, character: number): boolean {
  const after = line > range.start.line || (line === range.start.line && character >= range.start.character);
  const before = line < range.end.line || (line === range.end.line && character <= range.end.character);
  return after && before;
}

/**
 * The finding code to explain for a cursor position: a pallasite diagnostic whose range holds the
 * cursor, else the first one on the cursor's line. undefined: none there (ask the user instead).
 */
export function findingCodeAt(diagnostics: readonly DiagnosticLike[], line: number, character: number): string | undefined {
  const ours = diagnostics.filter((d) => codeOf(d) !== undefined);
  const hit = ours.find((d) => contains(d.range, line, character)) ?? ours.find((d) => d.range.start.line <= line && line <= d.range.end.line);
  return hit === undefined ? undefined : codeOf(hit);
}

/** What the user typed in the "which finding?" box, normalised; undefined with a reason if it is not a code. */
export function typedFindingCode(text: string): { code?: string; problem?: string } {
  const code = text.trim().toUpperCase();
  return FINDING_CODE.test(code) ? { code } : { problem: `Pallasite: "${text}" is not a finding code; give one such as PLS001.` };
}

/**
 * The markdown document to show for a `pallasite.explain` answer (`{ok: true, code, title, markdown}`),
 * or undefined when the answer is not one (its `{ok: false, message}` is shown by commandProblem).
 */
export function explanationMarkdown(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null) {
    return undefined;
  }
  const r = result as { ok?: unknown; markdown?: unknown };
  return r.ok === true && typeof r.markdown === 'string' && r.markdown !== '' ? r.markdown : undefined;
}

/**
 * The settings to open after a server command, when its answer names them (`{ok: true, settings:
 * "pallasite.agent"}`: "Set up an LLM provider…"); undefined otherwise.
 */
export function settingsToOpen(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null) {
    return undefined;
  }
  const r = result as { ok?: unknown; settings?: unknown };
  return r.ok === true && typeof r.settings === 'string' && r.settings.startsWith('pallasite') ? r.settings : undefined;
}
