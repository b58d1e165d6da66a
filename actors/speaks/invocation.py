"""How Zeus runs an agent CLI: its argv from what it speaks, and its prompt.

The argv is, in this order: the program (the CLI's usual name looked up on
`PATH`, or `command:`, which replaces the program and never the arguments Zeus
speaks with), the arguments that make it speak its stream (with the prompt,
`--resume ID` for a follow-up in its session, and, for Claude, its own budget
backstop), then the agent's `args:`. docs/agent-clis.md shows each CLI's line;
the CLIs' own parsers accept options after the prompt, and Codex's `resume`
subcommand comes last, after the user's flags, since they belong to `exec`.
OpenCode's prompt comes last too, after `--`, cut at its spaces
(`opencode_message` says why).

The prompt (`{prompt}`) is the role framing, the brief as a `SUBTASK BRIEF`
block, what the previous attempt left, and the instruction to close the reply
with a `<subtask_summary>` block (docs/formats.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actors.models import Brief
from actors.speaks.totals import SessionTotals

__all__ = [
    "CLI_PROGRAMS",
    "SPEAKS",
    "Invocation",
    "cli_argv",
    "opencode_message",
    "prompt_text",
    "refused_budget",
]

# What `speaks:` may name. `lines` is a plain command's default; `jsonl` is Zeus's own
# line protocol; the others are agent CLIs, each with the program's usual name.
CLI_PROGRAMS = {
    "claude": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "opencode": "opencode",
    "cursor": "cursor-agent",
}
SPEAKS = ("lines", "jsonl", *CLI_PROGRAMS)

_SUMMARY_TEMPLATE = """\
<subtask_summary>
Status: completed | blocked | partial | timed_out
Agent: {agent}
Scope: <what was requested>

Changes:
- <file> — <what changed>

Findings:
- <key finding>

Validation:
- <test results or verification>

Risks / Follow-up:
- <issues discovered>
</subtask_summary>"""


@dataclass(frozen=True, slots=True)
class Invocation:
    """What an agent CLI is run with, besides its brief (picklable: a worker builds the
    argv too). `budget_usd`: what may still be spent, passed to a CLI that takes a budget
    of its own as its backstop (Claude's `--max-budget-usd`)."""

    speaks: str
    program: tuple[str, ...] = ()  # `command:`; empty: the CLI's usual name
    args: tuple[str, ...] = ()
    resume: str | None = None  # the CLI's session id to continue
    budget_usd: float | None = None
    # What the resumed session's earlier runs were charged, for a CLI whose totals run
    # across its session (Codex's tokens, Claude's cost); None: not known (a new session).
    prior: SessionTotals | None = None


def cli_argv(invocation: Invocation, prompt: str) -> list[str]:
    """The argv that runs `invocation` on `prompt`, before `args:` placeholders are filled."""
    speaks = invocation.speaks
    program = list(invocation.program) or [CLI_PROGRAMS[speaks]]
    resume = invocation.resume
    user = list(invocation.args)
    if speaks == "claude":
        # --include-partial-messages: each reply's output tokens as they grow (its
        # `assistant` lines carry only the reply's start, output_tokens 1).
        own = ["-p", prompt, "--output-format", "stream-json", "--verbose",
               "--include-partial-messages"]
        if resume is not None:
            own += ["--resume", resume]
        if invocation.budget_usd is not None:
            own += ["--max-budget-usd", _usd(invocation.budget_usd)]
        return [*program, *own, *user]
    if speaks == "codex":
        tail = ["resume", resume, prompt] if resume is not None else [prompt]
        return [*program, "exec", "--json", "--skip-git-repo-check", *user, *tail]
    if speaks == "gemini":
        own = ["-p", prompt, "--output-format", "stream-json"]
        if resume is not None:
            own += ["--resume", resume]
        return [*program, *own, *user]
    if speaks == "opencode":
        own = ["run", "--format", "json"]
        if resume is not None:
            own += ["-s", resume]
        return [*program, *own, *user, *opencode_message(prompt)]
    if speaks == "cursor":
        own = ["-p", "--output-format", "stream-json"]
        if resume is not None:
            own += ["--resume", resume]
        return [*program, *own, *user, prompt]
    raise ValueError(f"speaks: {speaks!r} is not an agent CLI; known: {', '.join(CLI_PROGRAMS)}")


def refused_budget(invocation: Invocation) -> str | None:
    """Why `invocation` cannot start on what its cost cap leaves (None: it can): Claude
    refuses `--max-budget-usd 0`, and less than half a hundredth of a cent is passed as 0."""
    left = invocation.budget_usd
    if invocation.speaks != "claude" or left is None or _usd(left) != "0":
        return None
    return (f"${max(0.0, left):.6f} of its cost cap is left, less than claude accepts "
            "(--max-budget-usd must be more than 0), so it was not started")


def opencode_message(prompt: str) -> list[str]:
    """The arguments that give OpenCode's `run` the prompt as it is, `--` among them.

    Its `run` joins its message arguments with a space after wrapping each one that holds
    a space in double quotes (`"..."`, inner quotes escaped: packages/opencode/src/cli/cmd/
    run.ts, 1.18), so the prompt as one argument would reach the model quoted: cut at its
    spaces, no word holds one, and joined again they are the prompt. Its argument parser
    (yargs) then has two ways to spoil a word: before `--`, a word that starts with `-` is
    an option; after it, a word that reads as a number is passed on as one, and `run`
    fails ("G.includes is not a function"). So `--` goes after the last word that reads
    as a number: exact whenever no word starting with `-` comes before that one. When one
    does, each number after `--` is joined to the word before it, and OpenCode shows that
    pair in quotes. (Its other ways in, standard input and `--file`, are not open to Zeus:
    the CLI's standard input is /dev/null, and a file is an attachment, not the message.)"""
    words = prompt.split(" ")
    last_number = max((n for n, word in enumerate(words) if _yargs_number(word)), default=-1)
    first_option = next((n for n, word in enumerate(words) if word.startswith("-")), len(words))
    cut = last_number + 1 if last_number < first_option else first_option
    after: list[str] = []
    for word in words[cut:]:
        if after and (_yargs_number(word) or _yargs_number(after[-1])):
            after[-1] += " " + word  # a number, or the word after a first one ("-1")
        else:
            after.append(word)
    return [*words[:cut], "--", *after]


def _yargs_number(word: str) -> bool:
    """Whether yargs-parser reads `word` as a number (its `isNumber`)."""
    if re.fullmatch(r"0x[0-9a-f]+", word, re.IGNORECASE):
        return True
    if re.match(r"0[^.]", word):
        return False
    return re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?", word) is not None


def _usd(amount: float) -> str:
    """A budget in dollars as the CLI reads it (never negative, cents kept)."""
    return f"{max(0.0, amount):.4f}".rstrip("0").rstrip(".") or "0"


def prompt_text(brief: Brief, *, agent: str, framing: str = "",
                previous_error: str | None = None,
                previous_partials: Sequence[Any] = (), continued: bool = False,
                earlier_tools: Sequence[str] = (), blocker: str | None = None,
                note: str | None = None, in_session: bool = False) -> str:
    """The prompt an agent CLI (or a `{prompt}` placeholder) is given for `brief`.
    `continued`: it resumes the session its stopped attempt ran in, so it is told why that
    one stopped and asked to go on; `earlier_tools`: the side-effect tool calls earlier
    attempts made (`Name(detail)`), named to a fresh one so that it checks before it acts.
    `blocker` and `note`: a person resumed the delegation once it was blocked, and said
    `note` (`zeus.resume(id, note=...)`): both are quoted, as the agent's own words where
    the prompt goes on the session it was blocked in (`in_session`)."""
    parts = [framing.strip()] if framing.strip() else []
    parts.append(brief.model_copy(update={"agent": agent}).render()
                 if brief.agent != agent else brief.render())
    if continued:
        why = f" ({previous_error})" if previous_error else ""
        parts.append(f"Your previous run of this subtask, in this session, was stopped{why}. "
                     "What you did is done: do not redo it. Go on from where you stopped, "
                     "finish the scope, and report.")
    elif previous_error:
        parts.append(f"A previous attempt of this subtask ended: {previous_error}")
    if (blocker is not None or note is not None) and not continued:
        parts.append(_answered(blocker, note, in_session=in_session))
    if earlier_tools and not continued:
        ran = "; ".join(earlier_tools[-20:])
        parts.append(f"A previous attempt ran {ran}. What it changed may be in place: check "
                     "before you act, and do not do again what is done.")
    if previous_partials:
        found = "\n".join(f"- {_one_line(item)}" for item in previous_partials[-50:])
        parts.append(f"What previous attempts found so far:\n{found}")
    parts.append(
        "When you are done, or cannot go on, end your reply with this block, filled in "
        "(Status: completed when the scope is done; blocked when you cannot go on without "
        "a decision or something you lack, the blocker under Risks / Follow-up; partial "
        "when only part is done; timed_out when you ran out of time):\n"
        + _SUMMARY_TEMPLATE.format(agent=agent)
    )
    return "\n\n".join(parts)


def _answered(blocker: str | None, note: str | None, *, in_session: bool) -> str:
    """What a prompt says of the blocker a person answered, and of the answer."""
    said = f": {blocker.rstrip(' .')}" if blocker else ""
    was = f"You reported that you were blocked{said}" if in_session else (
        f"This subtask was blocked{said}")
    answer = (f"A person answered: {note.strip().rstrip('.')}" if note and note.strip()
              else "A person looked into it and lets you go on, with no note")
    return f"{was}. {answer}. Go on with the scope and report."


def _one_line(item: Any) -> str:
    text = item if isinstance(item, str) else json.dumps(item, default=str, ensure_ascii=False)
    return " ".join(text.split())[:500]
