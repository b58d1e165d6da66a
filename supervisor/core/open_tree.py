"""The open tree: every open delegation, the attempts running now, the host's queue
and the threads fenced off. Owned by Zeus's actor thread: nothing here is locked."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator

from supervisor.core.state import Attempt, Delegation

__all__ = ["OpenTree"]


class OpenTree:
    """What is open now, and the walks over it. Every method runs in the actor's thread."""

    def __init__(self) -> None:
        self.delegations: dict[str, Delegation] = {}  # open ones, by id, in dispatch order
        self.live: dict[str, tuple[Delegation, Attempt]] = {}  # attempt id -> its owner
        self.queue: deque[str] = deque()  # the host's delegations waiting for a slot
        self.running_roots = 0  # the host's delegations holding a slot (max_concurrent)
        # attempt id -> its delegation: threads that did not stop, still running
        self.fenced: dict[str, Delegation] = {}
        # attempt id -> its owner: attempts let go when the host's lease was lost, whose
        # charges still count (written late) until their child's end comes
        self.lease_lost: dict[str, tuple[Delegation, Attempt]] = {}
        self.settled_count = 0

    def get(self, delegation_id: str) -> Delegation | None:
        return self.delegations.get(delegation_id)

    def owner(self, attempt_id: str) -> tuple[Delegation, Attempt] | None:
        """The delegation and attempt of a running attempt id; None once it ended."""
        return self.live.get(attempt_id)

    def add(self, d: Delegation) -> None:
        """A new delegation (under its parent, if it has one that is open)."""
        parent = self.delegations.get(d.parent_id) if d.parent_id else None
        if parent is not None:
            parent.children.append(d.id)
        self.delegations[d.id] = d

    def begin(self, d: Delegation) -> None:
        """`d` leaves the queue (or never entered it) and runs."""
        if d.depth == 1 and d.state == "queued":
            self.running_roots += 1
        d.state = "running"

    def next_queued(self, limit: int) -> Delegation | None:
        """The next queued delegation that may take a slot now, taken off the queue."""
        while self.queue and self.running_roots < limit:
            d = self.delegations.get(self.queue.popleft())
            if d is not None and d.state == "queued":
                return d
        return None

    def remove(self, d: Delegation) -> None:
        """`d` settled: off the queue or out of its slot, and out of the tree."""
        if d.state == "queued":
            with contextlib.suppress(ValueError):
                self.queue.remove(d.id)
        elif d.depth == 1:
            self.running_roots -= 1
        d.state = "settled"
        self.delegations.pop(d.id, None)
        self.settled_count += 1

    def ancestors(self, d: Delegation) -> Iterator[Delegation]:
        """`d`'s open ancestors, nearest first (a settled one ends the walk)."""
        parent_id = d.parent_id
        while parent_id is not None:
            parent = self.delegations.get(parent_id)
            if parent is None:
                return
            yield parent
            parent_id = parent.parent_id

    def open_children(self, d: Delegation) -> list[Delegation]:
        """What `d` delegated that is still open, in dispatch order."""
        found = (self.delegations.get(child_id) for child_id in d.children)
        return [child for child in found if child is not None]

    def waiting_on_children(self, d: Delegation) -> bool:
        """Whether `d`'s current attempt has a delegation of its own still open: it is
        waiting on it (in `ctx.delegate()`), and that child is watched by its own clock."""
        return any(child_id in self.delegations for child_id in d.children)

    def nudge_ancestors(self, d: Delegation, now: float) -> None:
        """Progress in `d`'s subtree is progress of every ancestor waiting on it."""
        for parent in self.ancestors(d):
            if parent.current is not None:
                parent.current.watch = parent.current.watch.nudge(now)
