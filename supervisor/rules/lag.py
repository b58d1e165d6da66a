"""How late Zeus's mailbox runs: a pure record of how long timer messages waited.

Every attempt's timer message (`AttemptDue`) says when it fell due; the actor
notes, as it handles one, how long after that it got to it. That delay is the
timer thread's plus the mailbox's, which is what a deadline overshoots by.
Past `WARN_S` Zeus emits `supervisor.mailbox_lag`, at most once per `WARN_EVERY_S`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WARN_EVERY_S", "WARN_S", "MailboxLag"]

WARN_S = 0.5  # a deadline handled this late is worth an event
WARN_EVERY_S = 5.0  # and one such event per this long is enough


@dataclass(frozen=True, slots=True)
class MailboxLag:
    last_s: float = 0.0  # the lag of the last timer message handled
    max_s: float = 0.0  # the largest lag seen
    samples: int = 0
    warned_at: float = float("-inf")  # when the last event went out (clock time)

    def observe(
        self, due_at: float, now: float, *, warn_s: float = WARN_S, every_s: float = WARN_EVERY_S
    ) -> tuple[MailboxLag, bool]:
        """The record after a message due at `due_at` was handled at `now`; True: emit."""
        lag = max(0.0, now - due_at)
        warn = lag >= warn_s and now - self.warned_at >= every_s
        return (
            MailboxLag(lag, max(self.max_s, lag), self.samples + 1,
                       now if warn else self.warned_at),
            warn,
        )

    def snapshot(self) -> dict[str, float | int]:
        """What `zeus.tree()` shows under `mailbox_lag`."""
        return {"last_s": round(self.last_s, 6), "max_s": round(self.max_s, 6),
                "samples": self.samples}
