"""The settings tree: typed, defaulted, validated once, exported as a JSON Schema.

One spelling everywhere: camelCase keys, in the editor's ``pallasite`` section (initialization
options, ``workspace/configuration``) and in ``[tool.pallasite]`` of pyproject.toml, e.g.::

    [tool.pallasite]
    target = "v5e"
    tiers = [0, 1]
    severity = { PLS010 = "off" }
    check = { debounceMs = 300, timeLimitS = 30 }

Each field below is declared with ``setting(default, doc, ...)``; the doc string becomes the
schema's ``description``. ``parse_settings`` keeps every valid key, and for a bad one returns a
warning naming the key, the bad value and the default used instead (that key only).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.codes import CODES
from ..analysis.types import DEFAULT_CHIP, SEVERITIES, TIERS

from ..engine.checker import TARGETS  # the chips the checker accepts (jax-free module)

SEVERITY_LEVELS: tuple[str, ...] = (*SEVERITIES, "off")
SECTION = "pallasite"


def setting(default: Any, doc: str, *, choices: tuple | None = None, minimum: float | None = None,
            maximum: float | None = None) -> Any:
    """A dataclass field carrying its description and constraints for validation and the schema."""
    meta = {"doc": doc, "choices": choices, "minimum": minimum, "maximum": maximum}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    if dataclasses.is_dataclass(default):
        return field(default_factory=lambda: default, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class CheckSettings:
    """When checks run and what they may use."""

    onOpen: bool = setting(True, "Run the compiler tiers when a kernel file is opened (trusted folders only).")
    onSave: bool = setting(True, "Run the compiler tiers when a kernel file is saved (trusted folders only).")
    debounceMs: int = setting(150, "Milliseconds of quiet typing before tier 0 (source rules) re-runs.",
                              minimum=0, maximum=10000)
    timeLimitS: float = setting(300.0, "Seconds one worker request may take before its worker is stopped: a "
                                       "compiler check (a file's tiers 1-3), and in every agent command (optimize, "
                                       "search, eval, tune) the judging of one candidate (its test, estimate or "
                                       "timing). The one time limit of a request; --request-time-limit overrides it.",
                                minimum=1, maximum=3600)
    strict: bool = setting(False, "`pallasite check` exit status: fail when a file was not fully checked "
                                  "(a tier skipped, a time or memory limit hit, no task), not only on errors.")
    cpuDevices: int = setting(8, "Virtual CPU devices a check worker starts with (for meshes, shard_map and "
                                 "sharded inputs); a file that sets its own XLA_FLAGS device count gets its own.",
                              minimum=1, maximum=4096)
    memoryMb: int = setting(4096, "Memory (RSS, MiB) a check worker may use before it is stopped.",
                            minimum=256, maximum=1048576)
    maxFileMb: float = setting(8.0, "Past this size (millions of characters) the source rules (tier 0) do not "
                                    "run on a file, and the server says so.", minimum=0.1, maximum=1000)
    callers: bool = setting(True, "A kernel file with no task whose own code shows no shapes is checked through "
                                  "a call found in the workspace: its tests and the modules that import it are "
                                  "found and run in the check worker (trusted folders only).")
    locate: bool = setting(True, "After tier 3 finds wrong, NaN or unwritten outputs, find the statement that makes "
                                 "them so (small mechanical edits, each re-run at tier 3's reduced size), in the "
                                 "background after the check: the finding moves there with the edit as a verified "
                                 "fix. On the command line: `pallasite check --locate`.")
    locateBudgetS: float = setting(60.0, "Seconds the locate step may spend trying edits of one file, on a warm "
                                         "worker.", minimum=1, maximum=3600)


@dataclass(frozen=True)
class WorkerSettings:
    """The process that imports and compiles the user's kernels."""

    interpreter: str = setting("", "Python interpreter of your project, used to run check workers "
                                   "(it needs jax, and libtpu for tier 2). Empty: the Python running pallasite.")
    sandbox: str = setting("auto", "Run local workers in a PID/mount namespace (`unshare`), where kernel code "
                                   "sees only its own processes: auto: where the system allows it; on: "
                                   "required (checks fail with the reason when it is missing); off: never.",
                           choices=("auto", "on", "off"))


@dataclass(frozen=True)
class TrustSettings:
    """Which folders may have their code executed by check workers (tiers 1-3). Only the user
    gives trust: the server ignores these keys in a project's pyproject.toml (see USER_ONLY)."""

    mode: str = setting("ask", "ask: ask once per folder before running its code; always: trust every "
                               "folder; never: run tier 0 only and never ask. Editor settings only "
                               "(ignored in pyproject.toml).",
                        choices=("ask", "always", "never"))
    folders: list = setting([], "Folders trusted to run their kernels in a pallasite worker (absolute paths). "
                                "Answers to the trust question are remembered in the user trust store too. "
                                "Editor settings only (ignored in pyproject.toml).")


@dataclass(frozen=True)
class BackendSettings:
    """Where timing and profiling workers run (checks compile deviceless, on this machine)."""

    kind: str = setting("local", "Where Time/Profile run: local, ssh (a host reached by ssh or any launcher "
                                 "command line) or ray (a Ray cluster).", choices=("local", "ssh", "ray"))
    host: str = setting("", "ssh: the host (user@host) that runs `ssh HOST pallasite worker`.")
    command: str = setting("", "ssh: the whole launcher command line instead of `ssh HOST`; {worker} marks where "
                               "the worker command goes, e.g. gcloud compute tpus tpu-vm ssh NAME --zone Z "
                               "--command \"{worker}\".")
    remoteWorker: str = setting("pallasite worker", "ssh: the worker command on the host, e.g. "
                                                    "~/venv/bin/pallasite worker.")
    rayAddress: str = setting("", "ray: the cluster address (empty: RAY_ADDRESS, else a local cluster).")
    rayResources: dict = setting({}, "ray: the resources each worker holds, e.g. {\"TPU\": 4}.")

    def remote(self) -> Any:
        """These settings as the engine's ``BackendSettings`` (engine/workers/remote.py)."""
        from ..engine.workers.remote import BackendSettings as Remote

        return Remote(kind=self.kind, host=self.host or None, command=self.command or None,
                      remote_worker=self.remoteWorker or "pallasite worker", ray_address=self.rayAddress or None,
                      ray_resources={str(k): float(v) for k, v in self.rayResources.items()})


@dataclass(frozen=True)
class AgentSettings:
    """The LLM behind "Fix with agent" and `pallasite fix`, and the budgets of one action. API keys
    are never settings: they are read from the environment (GEMINI_API_KEY / GOOGLE_API_KEY,
    OPENAI_API_KEY, or the variable named by apiKeyEnv)."""

    provider: str = setting("", "LLM provider: gemini (google-genai), openai (any OpenAI-compatible endpoint: "
                                "OpenAI, vLLM, Ollama, llama.cpp, Gemini's OpenAI endpoint), scripted (queued "
                                "replies from scriptedFile, for demos and tests). Empty: agent fixes are off.",
                            choices=("", "gemini", "openai", "scripted"))
    model: str = setting("", "Model name; empty: gemini-2.5-pro for gemini, gpt-4.1 for openai.")
    baseUrl: str = setting("", "Endpoint URL, e.g. http://127.0.0.1:11434/v1 for Ollama (openai), or a Gemini "
                               "API endpoint override (gemini). Empty: the provider's own service.")
    apiKeyEnv: str = setting("", "Name of the environment variable holding the API key (the key itself is never "
                                 "a setting). Empty: GEMINI_API_KEY or GOOGLE_API_KEY (gemini), OPENAI_API_KEY "
                                 "(openai).")
    vertexProject: str = setting("", "gemini through Vertex AI: the Google Cloud project (application default "
                                     "credentials). Empty: the Gemini API with an API key.")
    vertexLocation: str = setting("us-central1", "gemini through Vertex AI: the region.")
    maxRounds: int = setting(3, "Proposals per fix action: a rejected one is fed back with its error.",
                             minimum=1, maximum=20)
    maxTokens: int = setting(200000, "Tokens (input + output + thinking) one fix action may use in all.",
                             minimum=1000, maximum=100000000)
    maxSeconds: float = setting(300.0, "Seconds one fix action may take (model calls and checks together).",
                                minimum=5, maximum=7200)
    requestTimeoutS: float = setting(120.0, "Seconds one model call may take.", minimum=1, maximum=3600)
    retries: int = setting(2, "Retries of a model call after HTTP 408/429/5xx or a connection error (the SDK's "
                              "own retry mechanism, set explicitly).", minimum=0, maximum=10)
    maxChangedLines: int = setting(40, "A proposed edit changing more lines than this is rejected as not minimal.",
                                   minimum=1, maximum=10000)
    docsPassages: int = setting(3, "Offline docs passages retrieved into the prompt (0: none).",
                                minimum=0, maximum=20)
    priceInputPerMTok: float = setting(0.0, "USD per million input tokens, for the cost shown after each action "
                                            "(0: cost unknown).", minimum=0, maximum=10000)
    priceOutputPerMTok: float = setting(0.0, "USD per million output and thinking tokens (0: cost unknown).",
                                        minimum=0, maximum=10000)
    scriptedFile: str = setting("", "scripted provider: a JSON file holding the list of replies to give in turn.")
    optimizeWinner: str = setting("newFile", "Where \"Optimize\" puts the winning kernel: newFile writes "
                                             "<name>.optimized.py beside the original and opens it; edit replaces "
                                             "the document (a versioned edit; if you changed the document during the "
                                             "run, the new file is written instead).", choices=("newFile", "edit"))
    allowUnconfined: bool = setting(False, "Run model-written code (proposed fixes, optimize and search candidates, "
                                           "proposed tests) even where no confined worker can be made (no "
                                           "namespaces: no unshare, macOS, an ssh or Ray worker, worker.sandbox = "
                                           "\"off\"). It then runs with your rights: it could read, change or "
                                           "delete any file you can and use the network. Editor settings only "
                                           "(ignored in pyproject.toml).")
    optimizeFixRounds: int = setting(1, "\"Optimize\": verified-fixer rounds for a candidate that fails to "
                                        "compile (0: a failed compile goes straight back to the planner).",
                                     minimum=0, maximum=5)

    def provider_config(self, name: str | None = None) -> Any:
        """These settings as the agents' ``ProviderConfig`` (``name`` overrides the provider)."""
        from ..agents.llm.providers import ProviderConfig

        return ProviderConfig(name=self.provider if name is None else name, model=self.model, base_url=self.baseUrl,
                              api_key_env=self.apiKeyEnv, vertex_project=self.vertexProject,
                              vertex_location=self.vertexLocation, retries=self.retries,
                              timeout_s=self.requestTimeoutS, price_input_per_mtok=self.priceInputPerMTok,
                              price_output_per_mtok=self.priceOutputPerMTok, scripted_file=self.scriptedFile)

    def budgets(self) -> Any:
        from ..agents.fixer import Budgets

        return Budgets(max_rounds=self.maxRounds, max_tokens=self.maxTokens, max_seconds=self.maxSeconds,
                       request_timeout_s=self.requestTimeoutS, max_changed_lines=self.maxChangedLines)


@dataclass(frozen=True)
class Settings:
    """Everything pallasite reads from the editor or from [tool.pallasite]."""

    target: str = setting(DEFAULT_CHIP, "The TPU chip the verdicts are for.", choices=TARGETS)
    tiers: list = setting([0, 1, 2], "Check tiers run on open/save: 0 source rules, 1 Pallas lowering "
                                     "(CPU jaxlib), 2 the TPU compiler (libtpu, deviceless), "
                                     "3 interpret-mode run.")
    severity: dict = setting({}, "Per finding code: the severity to report it with "
                                 "(error, warning, information, hint) or 'off' to hide it, "
                                 "e.g. {\"PLS010\": \"off\"}.")
    tunables: dict = setting({}, "Autotune search space: tunable name -> candidate values, e.g. "
                                 "{\"bm\": [128, 256, 512]}; wins over TUNABLES in the kernel file.")
    check: CheckSettings = setting(CheckSettings(), "When checks run and what they may use.")
    worker: WorkerSettings = setting(WorkerSettings(), "The process that imports and compiles your kernels.")
    trust: TrustSettings = setting(TrustSettings(), "Which folders may run their code in a check worker.")
    backend: BackendSettings = setting(BackendSettings(), "Where timing and profiling workers run.")
    agent: AgentSettings = setting(AgentSettings(), "The LLM for agent-proposed fixes, and its budgets.")

    def interpreter(self) -> str:
        """The worker interpreter: the configured one, else the Python running pallasite."""
        return self.worker.interpreter or sys.executable

    def checker_key(self) -> tuple:
        """What a warm checker depends on: a change here needs a new checker."""
        return (self.target, tuple(self.tiers), tuple(sorted(self.severity.items())), self.check.timeLimitS,
                self.check.memoryMb, self.check.cpuDevices, self.interpreter(), self.backend.kind,
                self.worker.sandbox)

    def check_options(self, tiers: list[int] | None = None) -> Any:
        """These settings as the runner's ``CheckOptions`` (imported lazily: runner client side)."""
        from ..engine.checker import CheckOptions

        return CheckOptions(
            target=self.target,
            tiers=tuple(self.tiers if tiers is None else tiers),
            severity=dict(self.severity),
            time_limit_s=self.check.timeLimitS,
            memory_mb=self.check.memoryMb,
            interpreter=self.interpreter(),
            cpu_devices=self.check.cpuDevices,
            sandbox=self.worker.sandbox,
            allow_unconfined=self.agent.allowUnconfined,
            callers=self.check.callers,
            locate_budget_s=self.check.locateBudgetS,  # ``locate`` stays off: the editor runs the step in the
        )                                                # background (server/checks.py), MCP's check and
        #                                                  `check --locate` turn it on for their own checks


# --------------------------------------------------------------------------- validation


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_value(name: str, value: Any, fld: dataclasses.Field, tp: Any) -> str | None:
    """None if ``value`` is valid for the field; otherwise what is wrong with it."""
    meta = fld.metadata
    if tp is bool:
        if not isinstance(value, bool):
            return "expected true or false"
    elif tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return "expected an integer"
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "expected a number"
    elif tp is str:
        if not isinstance(value, str):
            return "expected a string"
    if meta.get("choices") and value not in meta["choices"]:
        return "expected one of " + ", ".join(map(str, meta["choices"]))
    if meta.get("minimum") is not None and value < meta["minimum"]:
        return f"expected at least {meta['minimum']}"
    if meta.get("maximum") is not None and value > meta["maximum"]:
        return f"expected at most {meta['maximum']}"
    if name == "tiers":
        if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                  and t in TIERS for t in value):
            return "expected a list of tiers from " + ", ".join(map(str, TIERS))
    if name == "tunables":
        if not isinstance(value, dict) or not all(
                isinstance(v, list) and v and all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in v)
                for v in value.values()):
            return "expected a table of tunable = [positive integers]"
    if name == "severity":
        if not isinstance(value, dict):
            return "expected a table of code = level"
        for code, level in value.items():
            if code not in CODES:
                return f"unknown finding code {code!r}"
            if level not in SEVERITY_LEVELS:
                return f"level of {code} must be one of " + ", ".join(SEVERITY_LEVELS)
    if name == "folders":
        if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
            return "expected a list of folder paths"
    if name == "rayResources":
        if not isinstance(value, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                                                  for v in value.values()):
            return "expected a table of resource = number, e.g. {\"TPU\": 4}"
    return None


@dataclass(frozen=True)
class SettingProblem:
    """One bad setting, in two words: ``editor`` (the language server shows it and uses the default,
    which it names) and ``command_line`` (a command stops at it, exit 2: what is wrong, where, what is
    allowed). ``str()`` is the editor's."""

    editor: str
    command_line: str

    def __str__(self) -> str:
        return self.editor


def _parse(cls: type, data: Any, prefix: str, source: str, warnings: list[SettingProblem]) -> Any:
    if not isinstance(data, dict):
        name = prefix.rstrip('.') or SECTION
        warnings.append(SettingProblem(
            f"{source}: setting '{name}' must be a table/object, got {data!r}; using the defaults for all of it.",
            f"{source}: setting '{name}' must be a table, got {data!r}"))
        return cls()
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = _field_types(cls)
    values: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in fields:
            guess = difflib.get_close_matches(_camel(key), list(fields), n=1)
            hint = f"; did you mean '{prefix}{guess[0]}'?" if guess else ""
            keys = hint or " (the keys here: " + ", ".join(f"'{prefix}{name}'" for name in fields) + ")"
            warnings.append(SettingProblem(f"{source}: unknown setting '{dotted}' ignored{hint}",
                                           f"{source}: unknown setting '{dotted}'{keys}"))
            continue
        fld, tp = fields[key], hints[key]
        if dataclasses.is_dataclass(tp):
            values[key] = _parse(tp, value, dotted + ".", source, warnings)
            continue
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        problem = _check_value(key, value, fld, tp)
        if problem:
            default = getattr(cls(), key)
            warnings.append(SettingProblem(f"{source}: invalid value {value!r} for '{dotted}' ({problem}); "
                                           f"using the default {default!r}.",
                                           f"{source}: invalid value {value!r} for '{dotted}' ({problem})"))
            continue
        values[key] = value
    return cls(**values)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def parse_settings(data: Any, source: str = "settings") -> tuple[Settings, list[str]]:
    """Settings from a ``pallasite`` section (a dict); every problem as a readable warning."""
    settings, problems = _parse_problems(data, source)
    return settings, [str(p) for p in problems]


def _parse_problems(data: Any, source: str) -> tuple[Settings, list[SettingProblem]]:
    problems: list[SettingProblem] = []
    if data is None:
        return Settings(), problems
    return _parse(Settings, data, "", source, problems), problems


def settings_to_json(settings: Settings) -> dict[str, Any]:
    """The settings as the JSON object the editor would send (camelCase keys)."""
    return dataclasses.asdict(settings)


# --------------------------------------------------------------------------- pyproject.toml


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` (a file or a folder)."""
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def read_tool_section(path: Path) -> tuple[Any, list[str]]:
    """The raw ``[tool.pallasite]`` value of a pyproject.toml (None if absent), and read problems."""
    section, problems = _read_tool_section(path)
    return section, [str(p) for p in problems]


def _read_tool_section(path: Path) -> tuple[Any, list[SettingProblem]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        return None, [SettingProblem(f"{path}: cannot read it ({err}); using the default settings.",
                                     f"{path}: cannot read it as TOML ({err})")]
    tool = data.get("tool", {})
    return (tool.get(SECTION) if isinstance(tool, dict) else None), []


# Settings only the user may give (editor settings, the user trust store): a project that could set
# them in its own pyproject.toml would grant itself the right to run its code when opened.
USER_ONLY = ("trust", "backend")
_USER_ONLY_WHY = {
    "trust": "trust cannot be granted by the project's own pyproject.toml; set it in your editor's pallasite "
             "settings, answer the trust question, or run the pallasite.trustFolder command.",
    "backend": "the programs a backend runs (the ssh launcher, the remote worker, the Ray cluster) are chosen in "
               "your editor's pallasite settings or on the command line, not by the project's pyproject.toml.",
}
# Agent keys only the user may give: a project could otherwise send its files (and, through
# apiKeyEnv, any secret of the environment) to an endpoint of its choosing. Budgets may come
# from the project.
USER_ONLY_AGENT = ("provider", "model", "baseUrl", "apiKeyEnv", "vertexProject", "vertexLocation", "scriptedFile",
                   "allowUnconfined")


def without_user_only(section: Any, source: str) -> tuple[Any, list[str]]:
    """A project file's ``[tool.pallasite]`` without the user-only keys, and one message per key
    dropped (naming it and where it can be given instead)."""
    if not isinstance(section, dict):
        return section, []
    kept, warnings = dict(section), []
    for key in USER_ONLY:
        if key not in kept:
            continue
        value = kept.pop(key)
        names = [f"{key}.{sub}" for sub in value] if isinstance(value, dict) and value else [key]
        for name in names:
            warnings.append(f"{source}: '{name}' ignored: {_USER_ONLY_WHY[key]}")
    kept, dropped = without_agent_endpoint(kept, source)
    return kept, warnings + dropped


def without_agent_endpoint(section: Any, source: str) -> tuple[Any, list[str]]:
    """A project file's section without the USER_ONLY_AGENT keys, and one message per key dropped."""
    agent = section.get("agent") if isinstance(section, dict) else None
    if not isinstance(agent, dict) or not any(k in agent for k in USER_ONLY_AGENT):
        return section, []
    kept = dict(section)
    kept["agent"] = {k: v for k, v in agent.items() if k not in USER_ONLY_AGENT}
    return kept, [f"{source}: 'agent.{name}' ignored: " + (
        "only you can let model-written code run unconfined; set it in your editor's pallasite settings, or pass "
        "--allow-unconfined." if name == "allowUnconfined" else
        "which model receives your code is chosen by you, not by the project's pyproject.toml; set it in your "
        "editor's pallasite settings, or pass it to `pallasite fix` (--provider, --model, --base-url).")
        for name in agent if name in USER_ONLY_AGENT]


@dataclass(frozen=True)
class ProjectSettings:
    """``[tool.pallasite]`` of a project as read: the settings (a bad key at its default), the
    ``problems`` (a file that is not TOML, an unknown key, a bad value: a command stops at them), and
    the ``notes`` (keys only the user may set, ignored: said, never an error)."""

    settings: Settings
    problems: tuple[SettingProblem, ...] = ()
    notes: tuple[str, ...] = ()
    source: Path | None = None  # the pyproject.toml read, if any


def read_project(start: Path) -> ProjectSettings:
    """``[tool.pallasite]`` of the nearest pyproject.toml; defaults (and nothing to say) if none."""
    path = find_pyproject(Path(start))
    if path is None:
        return ProjectSettings(Settings())
    section, problems = _read_tool_section(path)
    if section is None:
        return ProjectSettings(Settings(), tuple(problems), source=path)
    source = f"{path} [tool.{SECTION}]"
    section, dropped = without_agent_endpoint(section, source)
    settings, problems = _parse_problems(section, source)
    return ProjectSettings(settings, tuple(problems), tuple(dropped), source=path)


def load_project_settings(start: Path) -> tuple[Settings, list[str]]:
    """``[tool.pallasite]`` of the nearest pyproject.toml, every problem a warning (a bad key at its
    default, as the editor has it); defaults (and no warning) if none."""
    read = read_project(start)
    return read.settings, [*read.notes, *map(str, read.problems)]


class SettingsError(ValueError):
    """The project's ``[tool.pallasite]`` is wrong: a command stops (exit 2) rather than run with
    settings the user did not write. The message names the file, the key and what it takes."""


def settings_error(read: ProjectSettings) -> SettingsError:
    """The one error a command prints for ``read``'s problems."""
    return SettingsError("; ".join(p.command_line for p in read.problems) +
                         " (fix it there; `pallasite settings --schema` lists every key and the values it takes)")


# --------------------------------------------------------------------------- JSON Schema

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _property_schema(name: str, fld: dataclasses.Field, tp: Any) -> dict[str, Any]:
    meta = fld.metadata
    if dataclasses.is_dataclass(tp):
        schema = _object_schema(tp)
        schema["description"] = meta["doc"]
        return schema
    schema: dict[str, Any] = {"description": meta["doc"]}
    if tp in _JSON_TYPES:
        schema["type"] = _JSON_TYPES[tp]
    if name == "tiers":
        schema.update(type="array", items={"type": "integer", "enum": list(TIERS)}, uniqueItems=True)
    elif name == "severity":
        schema.update(type="object", propertyNames={"pattern": r"^PLS\d{3}$"},
                      additionalProperties={"type": "string", "enum": list(SEVERITY_LEVELS)})
    elif name == "tunables":
        schema.update(type="object", additionalProperties={
            "type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1})
    elif name == "folders":
        schema.update(type="array", items={"type": "string"})
    elif name == "rayResources":
        schema.update(type="object", additionalProperties={"type": "number", "minimum": 0})
    if meta.get("choices"):
        schema["enum"] = list(meta["choices"])
    if meta.get("minimum") is not None:
        schema["minimum"] = meta["minimum"]
    if meta.get("maximum") is not None:
        schema["maximum"] = meta["maximum"]
    default = fld.default if fld.default is not dataclasses.MISSING else fld.default_factory()
    schema["default"] = default
    return schema


def _object_schema(cls: type) -> dict[str, Any]:
    hints = _field_types(cls)
    props = {f.name: _property_schema(f.name, f, hints[f.name]) for f in dataclasses.fields(cls)}
    return {"type": "object", "description": (cls.__doc__ or "").strip(), "properties": props,
            "additionalProperties": False}


def json_schema() -> dict[str, Any]:
    """The ``pallasite`` settings section as a JSON Schema (draft 2020-12)."""
    schema = _object_schema(Settings)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://pallasite.dev/schema/settings.json", "title": "pallasite settings", **schema}


def flat_schema() -> dict[str, Any]:
    """Dotted keys (``pallasite.check.debounceMs``) -> leaf schema, the shape VS Code's
    ``contributes.configuration.properties`` wants."""
    out: dict[str, Any] = {}

    def walk(obj: dict[str, Any], prefix: str) -> None:
        for key, sub in obj["properties"].items():
            if sub.get("type") == "object" and "properties" in sub:
                walk(sub, f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = sub

    walk(_object_schema(Settings), SECTION + ".")
    return out


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"check.debounceMs": 5}`` -> ``{"check": {"debounceMs": 5}}`` (dotted keys from editors)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        parts = re.sub(rf"^{SECTION}\.", "", key).split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if isinstance(value, dict) and isinstance(node.get(parts[-1]), dict):
            node[parts[-1]].update(value)
        else:
            node[parts[-1]] = value
    return out
