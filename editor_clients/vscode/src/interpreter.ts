/**
 * How the extension starts the server: which command line, chosen from the settings and the
 * Python extension's selected interpreter, and what to tell the user when it is not installed.
 *
 * Order: `pallasite.serverPath` (a `pallasite` executable), then `pallasite.interpreter` (an
 * explicit choice), then the interpreter selected in the Python extension, then `python3`
 * (`python` on Windows). Pure functions; extension.ts asks VS Code for the inputs.
 */

export type LaunchSource = 'pallasite.serverPath' | 'pallasite.interpreter' | 'Python extension' | 'default';

export interface LaunchPlan {
  /** The executable to spawn. */
  readonly command: string;
  /** Arguments that make it the language server over stdio. */
  readonly args: readonly string[];
  /** Arguments that make it print its version (the "is it installed?" probe). */
  readonly versionArgs: readonly string[];
  /** Where the command came from, for messages. */
  readonly source: LaunchSource;
  /** The Python interpreter involved, if the command is one. */
  readonly python?: string;
}

export interface LaunchInputs {
  readonly serverPath: string;
  readonly interpreter: string;
  /** The Python extension's active interpreter for this folder, if that extension is present. */
  readonly pythonExtension?: string;
  readonly platform: string;
  readonly workspaceFolder?: string;
  readonly home?: string;
}

const MODULE_ARGS = ['-m', 'pallasite.server.cli'] as const;

/** `${workspaceFolder}`, `${userHome}` and a leading `~` in a configured path. */
export function expandPath(path: string, vars: { workspaceFolder?: string; home?: string }): string {
  let out = path.trim();
  if (vars.home !== undefined) {
    out = out.replace(/^~(?=$|[\\/])/, vars.home).replace(/\$\{userHome\}/g, vars.home);
  }
  if (vars.workspaceFolder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, vars.workspaceFolder);
  }
  return out;
}

export function defaultPython(platform: string): string {
  return platform === 'win32' ? 'python' : 'python3';
}

export function resolveLaunch(inputs: LaunchInputs): LaunchPlan {
  const vars = {
    ...(inputs.workspaceFolder === undefined ? {} : { workspaceFolder: inputs.workspaceFolder }),
    ...(inputs.home === undefined ? {} : { home: inputs.home }),
  };
  const serverPath = expandPath(inputs.serverPath, vars);
  if (serverPath !== '') {
    return { command: serverPath, args: ['serve'], versionArgs: ['--version'], source: 'pallasite.serverPath' };
  }
  const configured = expandPath(inputs.interpreter, vars);
  const [python, source]: [string, LaunchSource] =
    configured !== ''
      ? [configured, 'pallasite.interpreter']
      : inputs.pythonExtension !== undefined && inputs.pythonExtension.trim() !== ''
        ? [inputs.pythonExtension.trim(), 'Python extension']
        : [defaultPython(inputs.platform), 'default'];
  return {
    command: python,
    args: [...MODULE_ARGS, 'serve'],
    versionArgs: [...MODULE_ARGS, '--version'],
    source,
    python,
  };
}

/** The command line as a user would type it (for messages). */
export function commandLine(command: string, args: readonly string[]): string {
  const quote = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
  return [command, ...args].map(quote).join(' ');
}

const SOURCE_WORDS: Record<LaunchSource, string> = {
  'pallasite.serverPath': 'set by pallasite.serverPath',
  'pallasite.interpreter': 'set by pallasite.interpreter',
  'Python extension': 'selected in the Python extension',
  default: 'the default; set pallasite.interpreter or select one in the Python extension',
};

/**
 * The message shown when the version probe fails: what was run, what it said, and the command
 * that installs pallasite into that interpreter.
 */
export function installAdvice(plan: LaunchPlan, detail: string): string {
  const probe = commandLine(plan.command, plan.versionArgs);
  const said = detail.trim().split('\n').filter((l) => l.trim() !== '').slice(-1)[0] ?? 'no output';
  if (plan.python === undefined) {
    return (
      `Pallasite: the server at ${plan.command} (${SOURCE_WORDS[plan.source]}) did not start: ` +
      `\`${probe}\` failed (${said}). Fix pallasite.serverPath, or clear it to use a Python interpreter.`
    );
  }
  const pip = commandLine(plan.python, ['-m', 'pip', 'install']);
  return (
    `Pallasite is not installed for ${plan.python} (${SOURCE_WORDS[plan.source]}): \`${probe}\` failed (${said}). ` +
    `Install it from your pallasite checkout with \`${pip} /path/to/pallasite\` (pallasite is on no package index; ` +
    `\`${pip} -e .\` inside the checkout for development), then reload the window.`
  );
}

/**
 * Why the plan may not run yet, or undefined if it may. In a folder VS Code does not trust, a
 * server executable inside that folder (e.g. its own .venv) is the folder's code: wait for trust.
 */
export function launchBlocked(plan: LaunchPlan, folderTrusted: boolean, workspaceFolder?: string): string | undefined {
  if (folderTrusted || workspaceFolder === undefined) {
    return undefined;
  }
  const root = workspaceFolder.replace(/[\\/]+$/, '');
  const command = plan.command;
  const inside = command === root || command.startsWith(`${root}/`) || command.startsWith(`${root}\\`);
  if (!inside) {
    return undefined;
  }
  return (
    `Pallasite: not starting ${command} (${SOURCE_WORDS[plan.source]}): it lies inside this folder, which VS Code ` +
    'does not trust yet. Trust the folder (Manage Workspace Trust) to start the pallasite server.'
  );
}
