"""How to run each real agent CLI offline against model_server.py.

    setup = cli_setup("codex", tmp_path / "home", server.url)
    subprocess.run([setup.program, *setup.args, *stream_args("codex", "say hi")],
                   env=os.environ | setup.env, stdin=subprocess.DEVNULL, cwd=work)

`cli_setup` writes the CLI's config into a fresh HOME and returns the program, the
arguments a headless run needs to be allowed a shell tool, the environment to add, and the
version pinned in package.json. Run them only inside the loopback-only namespace (netns.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.real_clis import netns

HERE = Path(__file__).resolve().parent
BIN = HERE / "node_modules" / ".bin"
CLIS = ("claude", "codex", "gemini", "opencode")
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex",
            "gemini": "@google/gemini-cli", "opencode": "opencode-ai"}
INSTALL = "npm install --prefix tests/real_clis"
MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5",
          "opencode": "local/scripted"}
BLOCKED_TEXT = """I ran it; the deploy needs a decision.

<subtask_summary>
Status: blocked
Agent: real-cli
Scope: Run echo hi
Id: real-cli-1

Changes: none

Findings:
- echo hi printed hi

Validation: none

Risks / Follow-up:
- blocker: the deploy key is missing; a person must provide it
</subtask_summary>"""
NO_TRAFFIC = {  # every switch that keeps a CLI from phoning home
    "claude": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
               "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
               "DISABLE_BUG_COMMAND": "1"},
    "codex": {},
    "gemini": {"GEMINI_CLI_NO_RELAUNCH": "true"},
    "opencode": {f"OPENCODE_DISABLE_{name}": "true"
                 for name in ("AUTOUPDATE", "MODELS_FETCH", "DEFAULT_PLUGINS", "LSP_DOWNLOAD",
                              "SHARE")},
}


@dataclass(frozen=True)
class CliSetup:
    """What Zeus is given as an agent's `command:`, `args:` and `env:`."""

    name: str
    program: str
    args: tuple[str, ...]
    env: dict[str, str]
    version: str
    home: Path


def version(name: str, root: Path = HERE) -> str:
    """The installed version of the CLI's npm package under `root`."""
    manifest = root / "node_modules" / PACKAGES[name] / "package.json"
    return json.loads(manifest.read_text(encoding="utf-8"))["version"]


def program(name: str, root: Path = HERE) -> Path:
    return root / "node_modules" / ".bin" / name


def missing() -> list[str]:
    """The CLIs not installed in node_modules/.bin."""
    return [name for name in CLIS if not program(name).exists()]


def why_not(doing: str = "the tests") -> str | None:
    """Why the real CLIs cannot run here for `doing` ("the tests", "the benchmark"),
    naming what would fix it; None if they can."""
    if absent := missing():
        return (f"the real agent CLIs ({', '.join(absent)}) are not installed: run "
                f"`{INSTALL}` as root")
    if reason := netns.unavailable():
        return f"{reason}: run {doing} as root (the CLIs install with `{INSTALL}`)"
    return None


def cli_setup(name: str, home: Path, url: str, *, root: Path = HERE) -> CliSetup:
    """Write `name`'s config into `home` (created) for the server at `url`."""
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local" / "share"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
           "NO_COLOR": "1", **NO_TRAFFIC[name]}
    args: tuple[str, ...]
    if name == "claude":
        env |= {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-offline"}
        args = ("--allowedTools", "Bash", "--model", MODELS[name])
    elif name == "codex":
        _write(home / ".codex" / "config.toml", _codex_config(url))
        env |= {"LOCAL_KEY": "offline", "CODEX_HOME": str(home / ".codex")}
        args = ("--dangerously-bypass-approvals-and-sandbox",)
    elif name == "gemini":
        _write(home / ".gemini" / "settings.json", json.dumps(GEMINI_SETTINGS, indent=2))
        env |= {"GEMINI_API_KEY": "offline", "GOOGLE_GEMINI_BASE_URL": url}
        args = ("--skip-trust", "--approval-mode", "yolo")
    elif name == "opencode":
        config = _opencode_config(url)
        _write(home / ".config" / "opencode" / "opencode.json", json.dumps(config, indent=2))
        args = ()
    else:
        raise ValueError(f"unknown CLI {name!r}; known: {', '.join(CLIS)}")
    return CliSetup(name, str(program(name, root)), args, env, version(name, root), home)


def without_shell(setup: CliSetup) -> tuple[str, ...]:
    """`setup`'s arguments without the one that allows Claude its shell tool: headless, a
    call of it is then denied (its result's `permission_denials`)."""
    args = list(setup.args)
    if "--allowedTools" in args:
        at = args.index("--allowedTools")
        del args[at:at + 2]
    return tuple(args)


def stream_args(name: str, prompt: str, *, resume: str | None = None,
                partial: bool = False) -> list[str]:
    """The arguments of one headless run in the CLI's stream mode (after `setup.args`)."""
    if name == "claude":
        extra = ["--include-partial-messages"] if partial else []
        again = ["--resume", resume] if resume else []
        return ["-p", prompt, "--output-format", "stream-json", "--verbose", *extra, *again]
    if name == "codex":
        again = ["resume", resume] if resume else []
        return ["exec", "--json", "--skip-git-repo-check", *again, prompt]
    if name == "gemini":
        again = ["--resume", resume] if resume else []
        return ["-p", prompt, "--output-format", "stream-json", *again]
    again = ["-s", resume] if resume else []
    return ["run", "--format", "json", *again, prompt]


def command(setup: CliSetup, prompt: str, **kwargs: object) -> list[str]:
    """The whole command line of a headless run; the codex subcommand comes first."""
    rest = stream_args(setup.name, prompt, **kwargs)  # type: ignore[arg-type]
    if setup.name in ("codex", "opencode"):
        return [setup.program, rest[0], *setup.args, *rest[1:]]
    return [setup.program, *setup.args, *rest]


@dataclass
class Run:
    """One finished headless run: its exit status, its stream's lines, its stderr."""

    returncode: int
    stdout: str
    stderr: str
    lines: list[dict[str, Any]] = field(default_factory=list)
    timed_out: bool = False

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("type") == kind]


def run(setup: CliSetup, prompt: str, cwd: Path, *, timeout: float = 60,
        **kwargs: object) -> Run:
    """Run the CLI headless once, standard input /dev/null, and parse its JSON lines. Past
    `timeout` its process group is killed and the run kept with `timed_out` set."""
    child = subprocess.Popen(command(setup, prompt, **kwargs), cwd=cwd,
                             env=os.environ | setup.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        stdout, stderr = child.communicate()
        timed_out = True
    lines = []
    for text in stdout.splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict):
            lines.append(line)
    return Run(child.returncode, stdout, stderr, lines, timed_out)


def session_id(name: str, lines: list[dict]) -> str | None:
    """The session id a run's stream names first."""
    keys = {"claude": "session_id", "codex": "thread_id", "gemini": "session_id",
            "opencode": "sessionID"}
    return next((line[keys[name]] for line in lines if keys[name] in line), None)


GEMINI_SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "ide": {"enabled": False},
    # GOOGLE_GEMINI_BASE_URL alone selects the "gateway" auth, which headless runs refuse.
    "security": {"auth": {"selectedType": "gemini-api-key"}},
}


def _codex_config(url: str) -> str:
    return f"""model = "{MODELS["codex"]}"
model_provider = "local"
check_for_update_on_startup = false

[model_providers.local]
name = "local"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "LOCAL_KEY"
requires_openai_auth = false

[analytics]
enabled = false

[feedback]
enabled = false
"""


def _opencode_config(url: str) -> dict:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
                               "options": {"baseURL": f"{url}/v1", "apiKey": "offline"},
                               "models": {"scripted": {"name": "Scripted",
                                                       "tool_call": True}}}},
        "model": MODELS["opencode"],
        "small_model": MODELS["opencode"],
        "autoupdate": False,
        "share": "disabled",
    }


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def agent(setup: CliSetup, **policy: Any) -> dict[str, Any]:
    """The routing of an agent that runs the CLI of `setup`, as a user writes it, with
    `policy` over a 60 s deadline, no retries and a quick shutdown."""
    return {"speaks": setup.name, "command": [setup.program], "args": list(setup.args),
            "env": setup.env, "timeout_s": 60, "retry": {"max_retries": 0},
            "shutdown": {"grace_s": 0.5, "term_s": 1.0}, **policy}


def processes_of(home: Path) -> list[psutil.Process]:
    """The live processes whose HOME is `home`: the CLI, its shells and their children."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get("HOME") == str(home):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
