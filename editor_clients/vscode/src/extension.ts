/**
 * The VS Code extension: starts `pallasite serve` with the user's Python, keeps the palette in
 * step with the commands the server advertises, forwards them with workspace/executeCommand, and
 * shows the server's `pallasite/status` in the status bar. Step-by-step optimize's plan / diff
 * documents are opened by the language client (window/showDocument); Approve / Revise / Stop in
 * their title bar act on the active editor's document. No feature logic lives here: every
 * decision is a pure function in the sibling modules (unit-tested without VS Code).
 */

import { execFile } from 'node:child_process';
import { homedir } from 'node:os';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
  TransportKind,
} from 'vscode-languageclient/node';
import {
  PALETTE,
  TRUSTED_KEY,
  advertisedCommands,
  commandProblem,
  contextValues,
  explanationMarkdown,
  findingCodeAt,
  fromMenuOrPalette,
  isPlanDocument,
  isUriLike,
  missingContextMessage,
  paletteArguments,
  settingsToOpen,
  typedFindingCode,
  type CommandContext,
} from './commands';
import { chipChoices } from './configSchema';
import { type LaunchPlan, installAdvice, launchBlocked, resolveLaunch } from './interpreter';
import { explicitSection, reactionTo, serverKeys } from './settings';
import {
  STATUS_NOTIFICATION,
  type ClientState,
  clientStateText,
  isAlarming,
  parseStatus,
  type ServerStatus,
  statusText,
  statusTooltip,
} from './status';

const PROBE_TIMEOUT_MS = 30_000;

let client: LanguageClient | undefined;
let statusItem: vscode.StatusBarItem;
let output: vscode.LogOutputChannel;
let chips: string[] = [];
let settingKeys: string[] = [];
let lastStatus: ServerStatus | undefined;
let canSelectTarget = false;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel('Pallasite', { log: true });
  statusItem = vscode.window.createStatusBarItem('pallasite.status', vscode.StatusBarAlignment.Left, 10);
  statusItem.name = 'Pallasite';
  chips = chipChoices(context.extension.packageJSON);
  settingKeys = serverKeys(context.extension.packageJSON?.contributes?.configuration?.properties ?? {});
  context.subscriptions.push(
    output,
    statusItem,
    vscode.commands.registerCommand('pallasite.showOutput', () => output.show()),
  );

  // Palette entries whose id is a server command are registered by the language client itself
  // (it registers every advertised command); the others forward to one.
  for (const entry of PALETTE.filter((e) => e.id !== e.server)) {
    context.subscriptions.push(
      vscode.commands.registerCommand(entry.id, async () => {
        const args = await argumentsFor(entry.id);
        if (args === undefined) {
          return undefined;
        }
        const result: unknown = await vscode.commands.executeCommand(entry.server, ...args);
        if (entry.id === 'pallasite.explainFinding') {
          await showExplanation(result);
        }
        return result;
      }),
    );
  }
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      const reaction = reactionTo((key) => event.affectsConfiguration(key));
      if (reaction === 'restart') {
        await restart();
      } else if (reaction === 'resend' && client?.state === State.Running) {
        await client.sendNotification(DidChangeConfigurationNotification.type, {
          settings: { pallasite: currentSection() },
        });
      }
    }),
  );
  context.subscriptions.push(vscode.workspace.onDidGrantWorkspaceTrust(() => void restart()));
  // the status bar shows the active document's verdict: follow the active editor
  context.subscriptions.push(vscode.window.onDidChangeActiveTextEditor(() => showStatus()));
  const python = await pythonExtension();
  const onPythonChange = python?.environments?.onDidChangeActiveEnvironmentPath;
  if (onPythonChange !== undefined) {
    context.subscriptions.push(onPythonChange(() => void restart()));
  }
  await start();
}

export async function deactivate(): Promise<void> {
  await stop();
}

async function start(): Promise<void> {
  showClientState('starting');
  const plan = await launchPlan();
  const blocked = launchBlocked(plan, vscode.workspace.isTrusted, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath);
  if (blocked !== undefined) {
    output.warn(blocked);
    showClientState('stopped', blocked);
    return; // started again from onDidGrantWorkspaceTrust
  }
  output.info(`starting the server: ${plan.command} ${plan.args.join(' ')} (${plan.source})`);
  const failure = await probe(plan);
  if (failure !== undefined) {
    const message = installAdvice(plan, failure);
    output.error(message);
    showClientState('not installed', message);
    const choice = await vscode.window.showErrorMessage(message, 'Open Settings', 'Show Output');
    if (choice === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'pallasite.interpreter');
    } else if (choice === 'Show Output') {
      output.show();
    }
    return;
  }
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const serverOptions: ServerOptions = {
    command: plan.command,
    args: [...plan.args],
    transport: TransportKind.stdio,
    options: folder === undefined ? {} : { cwd: folder },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'python' },
      { scheme: 'untitled', language: 'python' },
    ],
    outputChannel: output,
    initializationOptions: currentSection(),
    middleware: {
      executeCommand: async (command, args, next) => {
        let sent = args;
        // From the palette (no arguments) or a menu (the title bar passes its document's URI):
        // the server's arguments come from the editor.
        if (fromMenuOrPalette(args) && PALETTE.some((e) => e.id === command)) {
          const filled = await argumentsFor(command, isUriLike(args[0]) ? String(args[0]) : undefined);
          if (filled === undefined) {
            return undefined;
          }
          sent = filled;
        }
        const result: unknown = await next(command, sent);
        const problem = commandProblem(result);
        if (problem !== undefined) {
          void vscode.window.showWarningMessage(problem);
        }
        const settings = settingsToOpen(result);
        if (settings !== undefined) {
          void vscode.commands.executeCommand('workbench.action.openSettings', settings);
        }
        return result;
      },
      workspace: {
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          if (!Array.isArray(answers)) {
            return answers;
          }
          return answers.map((answer: unknown, i: number) => {
            const item = params.items[i];
            return item?.section === 'pallasite'
              ? currentSection(item.scopeUri === undefined ? undefined : vscode.Uri.parse(item.scopeUri))
              : answer;
          });
        },
      },
    },
  };
  const created = new LanguageClient('pallasite', 'Pallasite', serverOptions, clientOptions);
  client = created;
  // The client restarts a crashed server by itself: palette keys follow every state change.
  created.onDidChangeState((event) => {
    if (event.newState === State.Stopped) {
      void setContexts([]);
      showClientState('stopped');
    } else if (event.newState === State.Running) {
      void setContexts(advertisedCommands(created.initializeResult));
    }
  });
  created.onNotification(STATUS_NOTIFICATION, (raw: unknown) => {
    const status = parseStatus(raw);
    if (status === undefined) {
      output.warn(`ignored a ${STATUS_NOTIFICATION} notification of unexpected shape: ${JSON.stringify(raw)}`);
      return;
    }
    void vscode.commands.executeCommand('setContext', TRUSTED_KEY, status.trusted);
    lastStatus = status;
    canSelectTarget = advertisedCommands(created.initializeResult).includes('pallasite.selectTarget');
    showStatus();
  });
  try {
    await created.start();
  } catch (err) {
    const message = `Pallasite: the server did not start (${String(err)}). See the Pallasite output for its messages.`;
    output.error(message);
    showClientState('stopped', message);
    void vscode.window.showErrorMessage(message, 'Show Output').then((c) => c && output.show());
    return;
  }
  const advertised = advertisedCommands(created.initializeResult);
  output.info(`server commands: ${advertised.join(', ') || '(none)'}`);
  await setContexts(advertised);
  if (statusItem.text === clientStateText('starting')) {
    showClientState('running');
  }
}

async function stop(): Promise<void> {
  const running = client;
  client = undefined;
  await setContexts([]);
  if (running !== undefined && running.state !== State.Stopped) {
    await running.stop();
  }
}

async function restart(): Promise<void> {
  await stop();
  await start();
}

/** The last `pallasite/status`, with the active editor's document's verdict. */
function showStatus(): void {
  if (lastStatus === undefined) {
    return;
  }
  const uri = vscode.window.activeTextEditor?.document.uri.toString();
  statusItem.text = statusText(lastStatus, uri);
  statusItem.tooltip = statusTooltip(lastStatus, uri);
  statusItem.backgroundColor = isAlarming(lastStatus) ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  statusItem.command = canSelectTarget ? 'pallasite.selectTarget' : undefined;
  statusItem.show();
}

function showClientState(state: ClientState, tooltip?: string): void {
  lastStatus = undefined;
  statusItem.text = clientStateText(state);
  statusItem.tooltip = tooltip ?? 'Pallasite language server';
  statusItem.backgroundColor =
    state === 'not installed' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  statusItem.command = state === 'not installed' ? 'pallasite.showOutput' : undefined;
  statusItem.show();
}

let lastAdvertised: readonly string[] = [];

async function setContexts(advertised: readonly string[]): Promise<void> {
  const values = contextValues(advertised, lastAdvertised);
  lastAdvertised = advertised;
  for (const [key, value] of Object.entries(values)) {
    await vscode.commands.executeCommand('setContext', key, value);
  }
}

/** The settings the user set (not VS Code's defaults: those would hide [tool.pallasite]). */
function currentSection(scope?: vscode.Uri): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration('pallasite', scope ?? vscode.workspace.workspaceFolders?.[0]?.uri);
  return explicitSection(settingKeys, (key) => config.inspect(key));
}

/** Arguments for a palette command run without any; undefined (after telling the user) if it cannot run. */
async function argumentsFor(id: string, menuDocument?: string): Promise<unknown[] | undefined> {
  // A title-bar button acts on its own editor, which need not be the active one (split editors).
  const editor =
    (menuDocument === undefined
      ? undefined
      : vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === menuDocument)) ??
    vscode.window.activeTextEditor;
  const document = editor?.document.languageId === 'python' ? editor.document : undefined;
  const folder =
    (document && vscode.workspace.getWorkspaceFolder(document.uri)) ?? vscode.workspace.workspaceFolders?.[0];
  const plan = editor !== undefined && isPlanDocument(editor.document.uri.path) ? editor.document : undefined;
  if (plan !== undefined && id === 'pallasite.optimize.revise' && plan.isDirty) {
    // The server may read the file: save the user's edits first (their text is sent as well).
    const saved = await plan.save();
    if (!saved) {
      output.warn(`could not save ${plan.uri.fsPath}; its text is sent with the revise command anyway`);
    }
  }
  const context: CommandContext = {
    ...(document === undefined ? {} : { documentUri: document.uri.toString() }),
    ...(folder === undefined ? {} : { folderUri: folder.uri.toString() }),
    ...(plan === undefined ? {} : { planUri: plan.uri.toString(), planText: plan.getText() }),
  };
  let findingCode: string | undefined;
  if (id === 'pallasite.explainFinding') {
    findingCode = await findingToExplain(editor);
    if (findingCode === undefined) {
      return undefined;
    }
  }
  let chip: string | undefined;
  if (id === 'pallasite.selectTarget') {
    chip = await vscode.window.showQuickPick(chips, { placeHolder: 'TPU chip the verdicts are for' });
    if (chip === undefined) {
      return undefined;
    }
  }
  const args = paletteArguments(id, findingCode === undefined ? context : { ...context, findingCode }, chip);
  const missing = args === undefined ? missingContextMessage(id) : undefined;
  if (missing !== undefined) {
    void vscode.window.showInformationMessage(missing);
  }
  return args;
}

/** The code of the pallasite diagnostic at the cursor, else what the user types; undefined if cancelled. */
async function findingToExplain(editor: vscode.TextEditor | undefined): Promise<string | undefined> {
  if (editor !== undefined) {
    const cursor = editor.selection.active;
    const atCursor = findingCodeAt(vscode.languages.getDiagnostics(editor.document.uri), cursor.line, cursor.character);
    if (atCursor !== undefined) {
      return atCursor;
    }
  }
  const typed = await vscode.window.showInputBox({
    prompt: 'Pallasite: the finding code to explain',
    placeHolder: 'PLS001',
    validateInput: (text) => typedFindingCode(text).problem,
  });
  return typed === undefined ? undefined : typedFindingCode(typed).code;
}

/** Show a pallasite.explain answer as a markdown document (its {ok: false} message is already shown). */
async function showExplanation(result: unknown): Promise<void> {
  const markdown = explanationMarkdown(result);
  if (markdown === undefined) {
    return;
  }
  const document = await vscode.workspace.openTextDocument({ language: 'markdown', content: markdown });
  await vscode.window.showTextDocument(document, { preview: true, viewColumn: vscode.ViewColumn.Beside });
}

/** The subset of the Python extension's API used here. */
interface PythonApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment?(env: { path: string }): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
}

async function pythonExtension(): Promise<PythonApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonApi>('ms-python.python');
  if (ext === undefined) {
    return undefined;
  }
  try {
    return ext.isActive ? ext.exports : await ext.activate();
  } catch (err) {
    output.warn(`the Python extension did not activate (${String(err)}); using pallasite.interpreter or python3`);
    return undefined;
  }
}

async function selectedPython(): Promise<string | undefined> {
  const environments = (await pythonExtension())?.environments;
  if (environments === undefined) {
    return undefined;
  }
  try {
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const active = environments.getActiveEnvironmentPath(resource);
    const resolved = await environments.resolveEnvironment?.(active);
    return resolved?.executable?.uri?.fsPath ?? active.path;
  } catch (err) {
    output.warn(`could not read the Python extension's interpreter (${String(err)})`);
    return undefined;
  }
}

async function launchPlan(): Promise<LaunchPlan> {
  const config = vscode.workspace.getConfiguration('pallasite');
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const python = await selectedPython();
  return resolveLaunch({
    serverPath: config.get<string>('serverPath', ''),
    interpreter: config.get<string>('interpreter', ''),
    ...(python === undefined ? {} : { pythonExtension: python }),
    platform: process.platform,
    home: homedir(),
    ...(folder === undefined ? {} : { workspaceFolder: folder }),
  });
}

/** Run the version probe; undefined if it worked, else what went wrong. */
function probe(plan: LaunchPlan): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(plan.command, [...plan.versionArgs], { timeout: PROBE_TIMEOUT_MS }, (error, stdout, stderr) => {
      if (error === null) {
        output.info(`found ${stdout.trim()}`);
        resolve(undefined);
      } else {
        resolve(`${stderr}\n${error.message}`);
      }
    });
  });
}
