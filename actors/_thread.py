"""Thread children: each attempt runs its work function in a daemon thread of its own."""

from __future__ import annotations

import threading

from actors._backend import ChildSpec, Send
from actors._context import Context
from actors._run import run_work

__all__ = ["ThreadBackend", "ThreadChild"]


class ThreadChild:
    """A running thread attempt. A thread cannot be killed, only asked and then fenced."""

    def __init__(self, spec: ChildSpec, send: Send) -> None:
        if spec.work is None:
            raise ValueError(f"agent {spec.agent!r} has no work function for a thread child")
        self._spec = spec
        self._cancel = threading.Event()
        self.context = Context(
            brief=spec.brief,
            agent=spec.agent,
            delegation_id=spec.delegation_id,
            attempt=spec.attempt,
            attempt_id=spec.attempt_id,
            deadline=spec.deadline,
            clock=spec.clock,
            send=send,
            cancel_event=self._cancel,
            heartbeat_interval_s=spec.heartbeat_interval_s,
            session=spec.session,
            previous_partials=list(spec.previous_partials),
            depth=spec.depth,
            framing=spec.framing,
        )
        self._send = send
        self.thread = threading.Thread(
            target=self._run, name=f"zeus-child-{spec.attempt_id}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        """Runs in the child's own thread; its last act is sending `Finished`."""
        assert self._spec.work is not None
        self._send(run_work(self._spec.work, self._spec.brief, self.context))

    @property
    def pid(self) -> int | None:
        return None

    @property
    def killable(self) -> bool:
        return False

    def cancel(self) -> None:
        self._cancel.set()

    def kill(self) -> None:
        """A thread cannot be killed; Zeus fences it instead."""


class ThreadBackend:
    """Starts thread children."""

    def start(self, spec: ChildSpec, send: Send) -> ThreadChild:
        child = ThreadChild(spec, send)
        child.start()
        return child

    def close(self) -> None:
        pass
