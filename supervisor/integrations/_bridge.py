"""How the integrations wait on Zeus: the one seam to swap.

Every integration goes through these functions and nothing else of the way a
host waits (`await_summary`, `await_group`: a handle cancels its delegation when
the task awaiting it is cancelled: docs/design.md, "Async hosts") or steers a
running child (`send`).
A delegation's events are the handle's own (`handle.events()`), as for any host.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

from actors import Summary
from supervisor.core.handle import AWAITER_CANCELLED, GroupHandle, Handle
from supervisor.core.zeus import Zeus

__all__ = [
    "AWAITER_CANCELLED",
    "await_group",
    "await_summary",
    "send",
    "wait_summary",
]


async def await_summary(handle: Handle) -> Summary:
    """The summary, awaited without blocking the loop.

    Cancelling the awaiting task cancels the delegation with `AWAITER_CANCELLED`,
    and the `CancelledError` goes on up (a handle does this itself: docs/design.md, "Async hosts").
    """
    return await handle


async def await_group(group: GroupHandle) -> list[Summary]:
    """Every summary of a group, in brief order; cancelling the task cancels the group."""
    return await group


async def wait_summary(handle: Handle, timeout_s: float | None) -> Summary | None:
    """The summary, or None when `timeout_s` runs out first. Only waits: neither the
    timeout nor cancelling the awaiting task cancels the delegation: it waits on a copy
    of the handle's future, which nothing cancels but this wait (a shielded handle would
    still be cancelled with its loop's leftover tasks when the loop closes)."""
    copy: concurrent.futures.Future[Summary] = concurrent.futures.Future()

    def settled(summary: Summary) -> None:  # Zeus's thread, or this one if settled already
        if copy.set_running_or_notify_cancel():
            copy.set_result(summary)

    handle.add_done_callback(settled)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(copy), timeout_s)
    except TimeoutError:
        return None


def send(zeus: Zeus, delegation_id: str, message: object) -> bool:
    """Put `message` in the running child's mailbox (`ctx.receive`); False once settled.

    `UnknownDelegation` for an id Zeus never had; `TypeError` for a message that
    cannot cross to the child."""
    return zeus.send(delegation_id, message)
