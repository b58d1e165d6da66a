"""The owner's messages for a delegation's child (`handle.send`), on Zeus's side.

A message goes to the running attempt at once; one sent between attempts
waits here for the next attempt. Owned by the actor's thread.
"""

from __future__ import annotations

from actors.backends import ChildHandle
from actors.mail import Mail

__all__ = ["PendingMail"]


class PendingMail:
    """Messages waiting for a delegation's next attempt, by delegation id."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[Mail]] = {}

    def post(self, delegation_id: str, child: ChildHandle | None, mail: Mail) -> None:
        """Hand `mail` to the running `child`, or keep it for the next attempt (child None)."""
        if child is None:
            self._waiting.setdefault(delegation_id, []).append(mail)
        else:
            child.put_mail(mail)  # a backend without a mailbox drops it (the base's default)

    def flush(self, delegation_id: str, child: ChildHandle) -> None:
        """A new attempt started: it gets what waited for it, in order."""
        for mail in self._waiting.pop(delegation_id, ()):
            child.put_mail(mail)

    def drop(self, delegation_id: str) -> int:
        """The delegation settled, or its next attempt reads no mail (an agent CLI): what
        still waits is dropped. How many messages were."""
        return len(self._waiting.pop(delegation_id, ()))
