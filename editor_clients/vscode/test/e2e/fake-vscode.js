// A small stand-in for the `vscode` module, enough for the bundled extension and
// vscode-languageclient to start a real `pallasite serve` and talk to it in plain Node.
// It records what the extension shows (status bar, messages, context keys, diagnostics) so
// run-e2e.js can assert on it. Anything not modelled is a no-op returning a disposable.
'use strict';

const path = require('node:path');
const { pathToFileURL, fileURLToPath } = require('node:url');

const recorded = {
  contexts: {},
  messages: [],
  statusItems: [],
  diagnostics: new Map(),
  quickPicks: [],
  inputBoxes: [],
  openedDocuments: [],
  shownDocuments: [],
  output: [],
};

class Disposable {
  constructor(fn) { this._fn = fn; }
  static from(...items) { return new Disposable(() => items.forEach((d) => d && d.dispose && d.dispose())); }
  dispose() { if (this._fn) { this._fn(); this._fn = undefined; } }
}

class EventEmitter {
  constructor() {
    this._listeners = new Set();
    this.event = (listener, thisArg, disposables) => {
      const bound = thisArg ? listener.bind(thisArg) : listener;
      this._listeners.add(bound);
      const d = new Disposable(() => this._listeners.delete(bound));
      if (Array.isArray(disposables)) disposables.push(d);
      return d;
    };
  }
  fire(value) { for (const l of [...this._listeners]) l(value); }
  dispose() { this._listeners.clear(); }
}

const noEvent = () => new Disposable();

class Uri {
  constructor(scheme, fsPath) { this.scheme = scheme; this.fsPath = fsPath; this.path = fsPath; }
  static file(p) { return new Uri('file', path.resolve(p)); }
  static parse(s) { return s.startsWith('file:') ? new Uri('file', fileURLToPath(s)) : new Uri(s.split(':')[0], s); }
  toString() { return this.scheme === 'file' ? pathToFileURL(this.fsPath).href : this.fsPath; }
  with() { return this; }
  toJSON() { return this.toString(); }
}

class Position { constructor(line, character) { this.line = line; this.character = character; } }
class Range {
  constructor(a, b, c, d) {
    if (typeof a === 'number') { this.start = new Position(a, b); this.end = new Position(c, d); }
    else { this.start = a; this.end = b; }
  }
}
class Diagnostic {
  constructor(range, message, severity) { this.range = range; this.message = message; this.severity = severity; }
}
class CancellationTokenSource {
  constructor() {
    const emitter = new EventEmitter();
    this._emitter = emitter;
    this.token = { isCancellationRequested: false, onCancellationRequested: emitter.event };
  }
  cancel() { this.token.isCancellationRequested = true; this._emitter.fire(); }
  dispose() {}
}
class CancellationError extends Error {}
class ThemeColor { constructor(id) { this.id = id; } }

// Any class the converters need but this file does not model: keeps its arguments.
const genericClass = (name) => class { constructor(...args) { this.kind = name; this.args = args; } };
const enumProxy = () => new Proxy({}, { get: (_t, key) => (typeof key === 'string' ? key : undefined) });

const LANGUAGES = { '.py': 'python', '.md': 'markdown', '.diff': 'diff' };

// A file's document.
function makeDocument(file) {
  const fs = require('node:fs');
  const text = fs.readFileSync(file, 'utf8');
  const doc = {
    uri: Uri.file(file), fileName: file, languageId: LANGUAGES[path.extname(file)] || 'plaintext', version: 1,
    isClosed: false, isDirty: false, isUntitled: false, eol: 1,
    get lineCount() { return text.split('\n').length; },
    getText: () => text,
  };
  return doc;
}

// messageAnswer: the title of the button to press when a message offers it (the server's trust
// question is a window/showMessageRequest, which the language client shows as a message).
function create({ folder, file, settings: userSettings, defaults = {}, quickPickAnswer, inputBoxAnswer, messageAnswer }) {
  // Like VS Code, `get` answers the contributed default for any key the user did not set.
  const settings = { ...defaults, ...userSettings };
  const document = makeDocument(file);
  const folderUri = Uri.file(folder);
  const workspaceFolder = { uri: folderUri, name: path.basename(folder), index: 0 };
  const configChanged = new EventEmitter();
  const registered = new Map();

  const getConfiguration = (section) => {
    const prefix = section ? `${section}.` : '';
    const values = Object.fromEntries(Object.entries(settings).filter(([k]) => k.startsWith(prefix))
      .map(([k, v]) => [k.slice(prefix.length), v]));
    const explicit = new Set(Object.keys(userSettings).filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length)));
    const nested = {};
    for (const [key, value] of Object.entries(settings)) {
      let node = nested;
      const parts = key.split('.');
      for (const part of parts.slice(0, -1)) node = node[part] ??= {};
      node[parts[parts.length - 1]] = value;
    }
    return {
      get: (key, fallback) => {
        if (key in values) return values[key];
        let node = section ? nested[section] : nested;
        for (const part of key.split('.')) node = node === undefined ? undefined : node[part];
        return node === undefined ? fallback : node;
      },
      has: (key) => key in values,
      inspect: (key) => (explicit.has(key) ? { key, defaultValue: defaults[prefix + key], globalValue: values[key] }
        : { key, defaultValue: defaults[prefix + key] }),
      update: async () => undefined,
    };
  };

  const title = (item) => (typeof item === 'string' ? item : item && item.title);
  const show = (level) => async (message, ...items) => {
    const buttons = items.filter((i) => typeof i === 'string' || (i && typeof i.title === 'string'));
    recorded.messages.push({ level, message, items: buttons.map(title) });
    return buttons.find((i) => messageAnswer !== undefined && title(i) === messageAnswer);
  };
  const editor = { document, selection: { active: new Position(0, 0) } };

  let windowApi;
  const api = {
    version: '1.91.0',
    Disposable, EventEmitter, Uri, Position, Range, Diagnostic, CancellationTokenSource, CancellationError, ThemeColor,
    StatusBarAlignment: { Left: 1, Right: 2 },
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    LogLevel: { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 },
    DiagnosticSeverity: { Error: 0, Warning: 1, Information: 2, Hint: 3 },
    ViewColumn: { Active: -1, Beside: -2, One: 1, Two: 2 },
    workspace: {
      workspaceFolders: [workspaceFolder],
      isTrusted: true,
      onDidGrantWorkspaceTrust: noEvent,
      textDocuments: [document],
      notebookDocuments: [],
      getConfiguration,
      getWorkspaceFolder: () => workspaceFolder,
      onDidChangeConfiguration: configChanged.event,
      onDidOpenTextDocument: noEvent, onDidCloseTextDocument: noEvent, onDidChangeTextDocument: noEvent,
      onDidSaveTextDocument: noEvent, onWillSaveTextDocument: noEvent, onDidChangeWorkspaceFolders: noEvent,
      onDidOpenNotebookDocument: noEvent, onDidCloseNotebookDocument: noEvent, onDidChangeNotebookDocument: noEvent,
      onDidSaveNotebookDocument: noEvent,
      onDidCreateFiles: noEvent, onDidRenameFiles: noEvent, onDidDeleteFiles: noEvent,
      onWillCreateFiles: noEvent, onWillRenameFiles: noEvent, onWillDeleteFiles: noEvent,
      createFileSystemWatcher: () => ({ onDidCreate: noEvent, onDidChange: noEvent, onDidDelete: noEvent, dispose() {} }),
      applyEdit: async () => true,
      openTextDocument: async (options) => {
        const opened = { uri: new Uri('untitled', `Untitled-${recorded.openedDocuments.length + 1}`),
          languageId: options.language, getText: () => options.content, isUntitled: true };
        recorded.openedDocuments.push({ language: options.language, content: options.content });
        return opened;
      },
    },
    window: {
      activeTextEditor: editor,
      visibleTextEditors: [editor],
      tabGroups: { all: [], onDidChangeTabs: noEvent, onDidChangeTabGroups: noEvent },
      onDidChangeVisibleTextEditors: noEvent, onDidChangeActiveTextEditor: noEvent,
      createOutputChannel: (name) => {
        const log = (level) => (line) => recorded.output.push(`${level}: ${line}`);
        return {
          name, logLevel: 3, onDidChangeLogLevel: noEvent, append: log('append'), appendLine: log('line'),
          replace() {}, clear() {}, show() {}, hide() {}, dispose() {},
          trace: log('trace'), debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error'),
        };
      },
      createStatusBarItem: (id) => {
        const item = { id, text: '', tooltip: undefined, command: undefined, backgroundColor: undefined, shown: false,
          show() { this.shown = true; }, hide() { this.shown = false; }, dispose() {} };
        recorded.statusItems.push(item);
        return item;
      },
      showErrorMessage: show('error'),
      showWarningMessage: show('warning'),
      showInformationMessage: show('info'),
      showQuickPick: async (items, options) => {
        recorded.quickPicks.push({ items, placeHolder: options && options.placeHolder });
        return quickPickAnswer;
      },
      // A Uri (the language client's window/showDocument) opens that file in the active editor.
      showTextDocument: async (docOrUri, options) => {
        const doc = docOrUri instanceof Uri ? makeDocument(docOrUri.fsPath) : docOrUri;
        recorded.shownDocuments.push({ uri: doc.uri.toString(), languageId: doc.languageId,
          viewColumn: options && options.viewColumn, preserveFocus: options && options.preserveFocus });
        const shown = { document: doc, selection: { active: new Position(0, 0) } };
        if (docOrUri instanceof Uri) windowApi.activeTextEditor = shown;
        return shown;
      },
      showInputBox: async (options) => {
        const problem = inputBoxAnswer === undefined || !options.validateInput ? undefined : options.validateInput(inputBoxAnswer);
        recorded.inputBoxes.push({ prompt: options.prompt, answer: inputBoxAnswer, problem });
        return problem ? undefined : inputBoxAnswer;
      },
      withProgress: (_options, task) => task({ report() {} }, new CancellationTokenSource().token),
    },
    commands: {
      registerCommand: (id, fn) => {
        if (registered.has(id)) throw new Error(`command '${id}' already exists`);
        registered.set(id, fn);
        return new Disposable(() => registered.delete(id));
      },
      executeCommand: async (id, ...args) => {
        if (id === 'setContext') { recorded.contexts[args[0]] = args[1]; return undefined; }
        const fn = registered.get(id);
        if (!fn) throw new Error(`command '${id}' not found`);
        return fn(...args);
      },
      getCommands: async () => [...registered.keys()],
    },
    languages: {
      getDiagnostics: (uri) => recorded.diagnostics.get(uri.toString()) || [],
      match: (selector, doc) => ([].concat(selector).some((s) => (typeof s === 'string' ? s : s.language) === doc.languageId) ? 10 : 0),
      createDiagnosticCollection: (name) => ({
        name,
        set: (uri, diagnostics) => { recorded.diagnostics.set(uri.toString(), diagnostics || []); },
        delete: (uri) => recorded.diagnostics.delete(uri.toString()),
        clear: () => recorded.diagnostics.clear(),
        forEach() {}, get: (uri) => recorded.diagnostics.get(uri.toString()), has: () => false, dispose() {},
      }),
    },
    extensions: { getExtension: () => undefined },
    env: { appName: 'fake-vscode', language: 'en', machineId: 'test', openExternal: async () => true },
  };
  windowApi = api.window;
  // Classes the language client's converters use but this test never inspects; enums as names.
  const CLASSES = ['CallHierarchyIncomingCall', 'CallHierarchyItem', 'CallHierarchyOutgoingCall', 'CodeAction',
    'CodeLens', 'Color', 'ColorInformation', 'ColorPresentation', 'CompletionItem', 'CompletionList',
    'DiagnosticRelatedInformation', 'DocumentHighlight', 'DocumentLink', 'DocumentSymbol', 'FoldingRange', 'Hover',
    'InlayHint', 'InlayHintLabelPart', 'InlineCompletionItem', 'InlineCompletionList', 'InlineValueEvaluatableExpression',
    'InlineValueText', 'InlineValueVariableLookup', 'LinkedEditingRanges', 'Location', 'MarkdownString',
    'ParameterInformation', 'RelativePattern', 'SelectionRange', 'SemanticTokens', 'SemanticTokensEdit',
    'SemanticTokensEdits', 'SemanticTokensLegend', 'SignatureHelp', 'SignatureInformation', 'SnippetString',
    'SnippetTextEdit', 'SymbolInformation', 'TabInputCustom', 'TabInputNotebook', 'TabInputText', 'TabInputTextDiff',
    'TextEdit', 'TypeHierarchyItem', 'WorkspaceEdit'];
  const ENUMS = ['CodeActionTriggerKind', 'CompletionItemKind', 'CompletionItemTag', 'CompletionTriggerKind', 'DiagnosticTag',
    'DocumentHighlightKind', 'FileType', 'FoldingRangeKind', 'InlayHintKind', 'InlineCompletionTriggerKind',
    'SignatureHelpTriggerKind', 'SymbolKind', 'SymbolTag', 'TextDocumentSaveReason'];
  for (const name of CLASSES) api[name] = genericClass(name);
  for (const name of ENUMS) api[name] = enumProxy();
  const kind = (value) => ({ value, append: (part) => kind(value ? `${value}.${part}` : part), contains: () => false,
    intersects: () => false });
  api.CodeActionKind = Object.assign(genericClass('CodeActionKind'), { Empty: kind(''), QuickFix: kind('quickfix'),
    Refactor: kind('refactor'), Source: kind('source'), SourceOrganizeImports: kind('source.organizeImports') });
  // Unmodelled namespaces members: register*/on* become no-ops returning disposables.
  for (const ns of ['workspace', 'window', 'languages']) {
    api[ns] = new Proxy(api[ns], {
      get: (target, key) => (key in target || typeof key !== 'string' ? target[key] : () => new Disposable()),
    });
  }
  const module = new Proxy(api, {
    get: (target, key) => {
      if (key in target || typeof key !== 'string') return target[key];
      return /^[A-Z]/.test(key) ? (key.endsWith('Kind') || key.endsWith('Tag') || key.endsWith('Reason') || key.endsWith('Mode') || key.endsWith('Trigger') || key.endsWith('Severity') ? enumProxy() : genericClass(key)) : undefined;
    },
  });
  return { module, recorded, registered, document, editor, window: windowApi, fireConfigurationChange: (keys) =>
    configChanged.fire({ affectsConfiguration: (k) => keys.some((c) => c === k || c.startsWith(`${k}.`)) }) };
}

module.exports = { create };
