"""Work functions the integration tests delegate to (importable by entrypoint)."""

from __future__ import annotations

from actors import Brief, Context, Report


def echo(brief: Brief, ctx: Context) -> Report:
    """Return the scope, with one finding."""
    return Report(output=brief.scope, findings=[f"echoed {brief.scope!r}"])


def steady(brief: Brief, ctx: Context) -> Report:
    """Heartbeat every 20 ms until cancelled (or for `inputs["beats"]` beats)."""
    beats = (brief.inputs or {}).get("beats", 10_000) if isinstance(brief.inputs, dict) else 10_000
    for n in range(beats):
        ctx.heartbeat(f"beat {n}")
        ctx.sleep(0.02)
    return Report(output=beats)


def chatty(brief: Brief, ctx: Context) -> Report:
    """Send each word of the scope as a partial result, then return at once."""
    for word in brief.scope.split():
        ctx.partial(word)
    return Report(output=brief.scope)
