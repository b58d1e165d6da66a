"""Checks of a command agent's `command` that `zeus validate` makes before anything runs.

`command_problems` lists the `{name}`s that no attempt can fill (refused: the
agent could never start): unknown ones, and `{inputs}` when the inputs go by
standard input. `shell_warning` says when brief text would be pasted
into a script that a shell or an interpreter parses (`sh -c "echo {scope}"`):
whoever writes the brief could then run commands. Placeholders are safe as
separate arguments (`sh -c 'echo "$1"' sh {scope}`), which is what the warning
suggests. `cli_warning` says when a command that speaks plain lines (or `jsonl`)
runs one of the agent CLIs Zeus speaks: its stream would be read as lines, its
session, tools and spend unseen.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.backends.command.child import BRIEF_TEXT_PLACEHOLDERS, PLACEHOLDER, PLACEHOLDERS
from actors.speaks import CLI_PROGRAMS

__all__ = ["agent_cli_in", "cli_warning", "command_problems", "shell_warning",
           "unknown_placeholders"]

# Programs that run their `-c` (or `-e`) argument as code.
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh",
                     "busybox"})
_CODE_FLAGS = {
    **dict.fromkeys(_SHELLS, "c"),
    **dict.fromkeys(("python", "python3", "{python}", "pypy", "pypy3"), "c"),
    **dict.fromkeys(("perl", "ruby", "node", "nodejs", "deno"), "e"),
}


def unknown_placeholders(command: Sequence[str]) -> list[tuple[int, str]]:
    """`(argument index, name)` of each `{name}` that `command_argv` cannot fill."""
    return [
        (index, match.group(1))
        for index, arg in enumerate(command)
        for match in PLACEHOLDER.finditer(arg)
        if match.group(1) not in PLACEHOLDERS
    ]


def command_problems(command: Sequence[str], inputs_via: object) -> list[tuple[int, str]]:
    """`(argument index, message)` for each placeholder of `command` no attempt could fill."""
    found = [
        (index, f"unknown placeholder {{{name}}}; allowed: "
                f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        for index, name in unknown_placeholders(command)
    ]
    if inputs_via == "stdin":
        found += [
            (index, "found {inputs} with inputs_via: stdin; the inputs arrive as the first "
                    "line of standard input, so remove {inputs} (or use inputs_via: file, "
                    "where {inputs} is the file's path)")
            for index, arg in enumerate(command)
            if "{inputs}" in arg
        ]
    return sorted(found)


def _program(command: Sequence[str]) -> tuple[str, int]:
    """The program's base name and its index, looking through `env [VAR=value ...]`."""
    index = 0
    while index < len(command):
        name = command[index].rsplit("/", 1)[-1]
        if name == "env" or (index > 0 and "=" in command[index]
                             and not command[index].startswith("-")):
            index += 1
            continue
        return name, index
    return "", index


def shell_warning(command: Sequence[str]) -> str | None:
    """Why `command` lets a brief's text run as code, or None when it does not."""
    program, at = _program(command)
    flag = _CODE_FLAGS.get(program) or _CODE_FLAGS.get(program.rstrip("0123456789."))
    if flag is None:
        return None
    args = list(command[at + 1:])
    if program == "busybox" and args:
        args = args[1:]  # busybox sh -c ...
    for index, arg in enumerate(args):
        if not arg.startswith("-") or arg.startswith("--"):
            return None  # the first operand: no -c before it
        if flag in arg[1:] and index + 1 < len(args):
            script = args[index + 1]
            names = sorted({m.group(1) for m in PLACEHOLDER.finditer(script)}
                           & BRIEF_TEXT_PLACEHOLDERS)
            if not names:
                return None
            shown = ", ".join("{" + n + "}" for n in names)
            return (
                f"{program} -{flag} runs its script through a parser, and the script holds "
                f"{shown}: a brief's text would run as code; pass it as a separate argument "
                "instead, e.g. [sh, -c, 'echo \"$1\"', sh, '{scope}']"
            )
    return None


# The agent CLIs by program (`speaks:` name of each), and by the npm package that a
# package runner (`npx -y @openai/codex`) starts.
_CLIS = {program: speaks for speaks, program in CLI_PROGRAMS.items()}
_CLI_PACKAGES = {"@anthropic-ai/claude-code": "claude", "@openai/codex": "codex",
                 "@google/gemini-cli": "gemini", "opencode-ai": "opencode"}
_RUNNERS = frozenset({"npx", "pnpx", "bunx", "pnpm", "yarn", "bun", "npm"})


def agent_cli_in(command: Sequence[str]) -> str | None:
    """The agent CLI `command` runs (its `speaks:` name), or None: its program is one of
    them (`claude`, `/opt/bin/codex`, `cursor-agent`), a package runner starts one's npm
    package (`npx -y @openai/codex@0.171`), or a shell's `-c` script starts with one."""
    program, at = _program(command)
    if program in _CLIS:
        return _CLIS[program]
    args = list(command[at + 1:])
    if program in _RUNNERS:
        return next((_CLI_PACKAGES[name] for name in map(_package_name, args)
                     if name in _CLI_PACKAGES), None)
    if _CODE_FLAGS.get(program) == "c" and program not in ("python", "python3", "{python}",
                                                           "pypy", "pypy3"):
        for index, arg in enumerate(args[:-1]):
            if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
                words = args[index + 1].split()
                words = words[1:] if words[:1] == ["exec"] else words
                return agent_cli_in(words) if words else None
    return None


def _package_name(arg: str) -> str:
    """An npm package argument without its version: `@openai/codex@0.171` -> `@openai/codex`."""
    scoped = arg.startswith("@")
    return ("@" if scoped else "") + arg[scoped:].partition("@")[0]


def cli_warning(command: Sequence[str], speaks: str) -> str | None:
    """Why a command that speaks `speaks` (`lines` or `jsonl`) should speak its CLI
    instead, or None when it runs none of them."""
    cli = agent_cli_in(command)
    if cli is None:
        return None
    return (f"this runs {cli} as plain {'lines' if speaks == 'lines' else 'JSON lines'}: set "
            f"speaks: {cli}, and Zeus reads its stream (its session, tool calls and spend) "
            "and passes the arguments it speaks with; command: then names only the program "
            "or its wrapper (docs/agent-clis.md)")
