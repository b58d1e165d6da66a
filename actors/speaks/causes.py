"""Why an agent CLI could not serve, read from what it said: its error result, its last
error line, its standard error (docs/agent-clis.md, "When the agent cannot serve").

A failure that is not the task's is one of two kinds:
- `transient`: the vendor's API was overloaded, rate limited, answered 5xx, or the
  connection dropped. Retried with backoff, then the fallback.
- `unavailable`: the CLI cannot serve this run at all (a refused key, a model that does not
  exist; a program not on PATH and an untrusted folder are told apart where they happen).
  No retry: straight to the fallback, with the cause and its fix in the error.
Anything else a CLI reports as an error stays the task's own (`error`: no retry, no
fallback). A pure function of the text, tested by a table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from actors.models import AttemptOutcome

__all__ = ["VendorCause", "Verdict", "vendor_cause", "vendor_verdict"]

VendorCause = Literal["transient", "unavailable"]

# (pattern, the fix to name) for a CLI that cannot serve, first match wins.
_UNAVAILABLE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), fix) for pattern, fix in (
        (r"\b401\b|invalid[ _-]?(x-)?api[ _-]?key|incorrect api key|api key not valid"
         r"|authentication[ _]?(error|failed)|unauthori[sz]ed|not logged in|please run /login"
         r"|invalid bearer token|missing api key|no api key",
         "check the API key in the agent's env: (or the CLI's own login)"),
        (r"\bmodel\b[^\n]{0,80}\b(not found|does not exist|is not supported|not available)\b"
         r"|\b(unknown|invalid|unsupported) model\b|no such model|model_not_found",
         "check the model named in the agent's args: (or the CLI's config)"),
        (r"\b403\b|permission[_ ]denied|forbidden|billing|credit balance is too low"
         r"|insufficient[_ ]quota",
         "check the account behind the API key: it may not use this API or model"),
        (r"exhausted your (capacity|quota)|quota (exceeded|will reset)|usage limit",
         "its quota is spent: wait until it resets, or give the agent a fallback:"),
    )
)
_TRANSIENT = re.compile(
    r"\b529\b|overloaded|\b429\b|rate[ _-]?limit|too many requests|resource[_ ]exhausted"
    r"|\b50[0234]\b|internal server error|bad gateway|service unavailable|gateway time-?out"
    r"|\bECONN(RESET|REFUSED|ABORTED)\b|\bETIMEDOUT\b|socket hang up|fetch failed"
    r"|connection (error|reset|refused|closed|dropped|lost)|stream (disconnected|error)"
    r"|network error|other side closed|request timed out",
    re.IGNORECASE,
)


def vendor_cause(text: str | None) -> tuple[VendorCause, str | None] | None:
    """The kind of vendor failure `text` tells of, with the fix to name for `unavailable`
    (None for `transient`); None when it tells of none (the failure is the task's)."""
    if not text:
        return None
    for pattern, fix in _UNAVAILABLE:
        if pattern.search(text):
            return "unavailable", fix
    if _TRANSIENT.search(text):
        return "transient", None
    return None


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a run ended, from its stream and its exit: its outcome, its value (the final
    text, the script's result, or the whole output of `lines`), and what went wrong."""

    outcome: AttemptOutcome
    value: Any = None
    error: str | None = None
    error_type: str | None = None


def vendor_verdict(said: str, error: str) -> Verdict | None:
    """A failure whose words (`said`) tell of the vendor, not the task: a `transient` or
    `unavailable` verdict with `error`, and for the latter its fix; None otherwise."""
    cause = vendor_cause(said)
    if cause is None:
        return None
    kind, fix = cause
    if kind == "transient":
        return Verdict(AttemptOutcome.transient, error=error, error_type="VendorTransient")
    return Verdict(AttemptOutcome.unavailable, error=f"{error}: {fix}", error_type="Unavailable")
