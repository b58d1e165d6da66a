"""What a program's standard error says of how it failed, for an attempt's error.

A CLI's standard error is mostly noise when it fails: Gemini prints its banners on
every run ("256-color support not detected", "YOLO mode is enabled", "Ripgrep is not
available"), Claude its "no stdin data received in 3s", Codex its "Reading additional
input from stdin...". `what_failed` keeps what says what went wrong: the known
banners and terminal colours dropped, then the lines that name an error (an `Error`,
`failed`, `denied`, `refused`, `not found`, an HTTP 401, 403, 429 or 5xx,
`Overloaded`, ...) where there are any, else the last lines; a few lines, cut short.
"""

from __future__ import annotations

import re

__all__ = ["BANNERS", "STDERR_LINES", "what_failed"]

#: Lines the agent CLIs print on standard error whatever happens (part of the line: each
#: matches the lines that hold it).
BANNERS = (
    "256-color support not detected",  # Gemini
    "YOLO mode is enabled",  # Gemini, with --approval-mode yolo
    "Ripgrep is not available",  # Gemini
    "no stdin data received in",  # Claude, on a standard input left open
    "Reading additional input from stdin",  # Codex, on a standard input that is no terminal
    "Refusing to create helper binaries under temporary dir",  # Codex, a CODEX_HOME in /tmp
)
STDERR_LINES = 5  # the most lines kept

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_FAILED = re.compile(
    r"error|failed|failure|fatal|denied|refused|not found|no such|cannot|could not|"
    r"unable to|invalid|unauthori[sz]ed|forbidden|overloaded|rate.?limit|quota|"
    r"timed? ?out|traceback|exception|interrupt|panic|abort|segmentation fault|"
    r"out of memory|unavailable|"
    r"\b(?:HTTP|status|code)\W{0,3}(?:401|403|429|5\d\d)\b|"  # a status, not any number
    r"\b(?:401|403|429|5\d\d) (?:Unauthorized|Forbidden|Too Many|Internal|Bad Gateway|"
    r"Service Unavailable|Gateway Timeout)|"
    r"\bE(?:CONNRESET|CONNREFUSED|NOTFOUND|TIMEDOUT|ACCES)\b",
    re.IGNORECASE,
)


def what_failed(text: str, limit: int) -> str:
    """The lines of standard error `text` that say what failed, at most `STDERR_LINES` of
    them and `limit` characters (the end kept): its error lines where it has any, else its
    last lines, never a known banner; "" when nothing is left."""
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines()]
    lines = [line for line in lines if line and not any(b in line for b in BANNERS)]
    failed = [line for line in lines if _FAILED.search(line)]
    kept = "\n".join((failed or lines)[-STDERR_LINES:])
    return kept[-limit:].strip()
