"""How an agent CLI's failure is sorted by what it said (actors/speaks/causes.py): the
vendor's (`transient`, `unavailable` with its fix) or the task's own (None)."""

from __future__ import annotations

import pytest

from actors.speaks.causes import vendor_cause

TRANSIENT = [
    # Claude 2.1.328's result against an overloaded API (its real transcript)
    "API Error: 529 Overloaded. This is a server-side issue, usually temporary",
    'API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}',
    # Codex 0.171's turn.failed
    "unexpected status 529 <unknown status code>: scripted error 529, url: "
    "http://127.0.0.1:42463/v1/responses",
    "stream disconnected before completion: error sending request for url",
    "This request would exceed the rate limit for your organization",
    "API Error: 429 Too Many Requests",
    "Request failed: ConnectError: [unavailable] read ECONNRESET",
    "API Error: 503 Service Unavailable",
    "fetch failed",
]
UNAVAILABLE = {
    "Invalid API key · Please run /login": "API key",
    "API Error: 401 {\"type\":\"authentication_error\"}": "API key",
    "The model `gpt-9` does not exist or you do not have access to it.": "model",
    "model: claude-nope not found": "model",
    "Your credit balance is too low to access the Anthropic API": "account",
    "[API Error: You have exhausted your capacity on this model. Your quota will reset "
    "after 4h12m9s.]": "quota",
}
THE_TASKS = [
    None, "",
    "error_during_execution",
    "Maximum session turns exceeded",
    "TypeError: 'NoneType' object is not iterable",
    "Model stream ended with an invalid chunk or missing finish reason.",
    "claude exited 1 before its stream's result: Error: write EPIPE",
    "the port 5029 was taken",  # a number that holds 502 is no 502
]


@pytest.mark.parametrize("text", TRANSIENT)
def test_an_overloaded_rate_limited_or_dropped_api_is_transient(text: str) -> None:
    assert vendor_cause(text) == ("transient", None)


@pytest.mark.parametrize(("text", "fix_names"), UNAVAILABLE.items())
def test_a_refused_key_a_missing_model_or_a_spent_quota_is_unavailable_with_its_fix(
        text: str, fix_names: str) -> None:
    cause = vendor_cause(text)
    assert cause is not None and cause[0] == "unavailable"
    assert fix_names in (cause[1] or "")


@pytest.mark.parametrize("text", THE_TASKS)
def test_anything_else_is_the_tasks_own(text: str | None) -> None:
    assert vendor_cause(text) is None
