"""What a delegation holds is released when it settles, not when its deadline would have passed.

A settled delegation may leave its summary behind (the host's handle holds it);
nothing else: not its brief, its inputs, its attempts or their contexts.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from actors import Brief, Context, Status
from supervisor import Routing, Zeus
from supervisor.testing import sync
from tests._support import WAIT_S, Gate
from tests.conftest import ZeusFactory


class _Blob:
    """10 KB of inputs that a weak reference can watch."""

    def __init__(self) -> None:
        self.data = bytes(10_000)


def _done(brief: Brief, ctx: Context) -> str:
    ctx.partial("p")
    return "ok"


def _dispatch_settled(zeus: Zeus, agent: str, count: int) -> list[weakref.ref[_Blob]]:
    refs = []
    handles = []
    for i in range(count):
        blob = _Blob()
        refs.append(weakref.ref(blob))
        handles.append(zeus.dispatch(Brief(agent=agent, scope=f"s{i}", inputs={"blob": blob})))
        del blob
    for handle in handles:
        assert handle.result(20).status is Status.completed
    del handles
    sync(zeus)
    return refs


def _alive(refs: list[weakref.ref[_Blob]]) -> int:
    gc.collect()
    return sum(ref() is not None for ref in refs)


def test_settled_delegations_release_their_inputs_long_before_their_deadline(
    make_zeus: ZeusFactory,
) -> None:
    zeus = make_zeus({"a": {"timeout_s": 3600, "heartbeat": {"stale_after_s": 3600}}},
                     works={"a": _done})
    refs = _dispatch_settled(zeus, "a", 300)
    # Pooled threads are idle now; none of them may keep its last attempt.
    assert _alive(refs) == 0


def test_a_delegation_cancelled_while_it_waits_releases_its_inputs(
    make_zeus: ZeusFactory,
) -> None:
    gate = Gate()  # woken by the cancel itself
    zeus = make_zeus({"w": {"timeout_s": 3600, "shutdown": {"grace_s": 3600}}},
                     works={"w": gate})
    blob = _Blob()
    ref = weakref.ref(blob)
    handle = zeus.dispatch(Brief(agent="w", scope="s", inputs={"blob": blob}))
    del blob
    assert gate.started.wait(WAIT_S)  # cancelled while it waits, not before it ran
    zeus.cancel(handle.id)
    assert handle.result(10).status is Status.cancelled
    del handle
    sync(zeus)
    gate.open()
    assert gate.stopped == ["cancelled"]
    assert _alive([ref]) == 0


@pytest.mark.realtime
def test_settled_delegations_release_their_inputs_on_the_real_clock() -> None:
    r = Routing.from_dict({"version": 1, "agents": {"a": {"timeout_s": 3600}}})
    with Zeus.start(r, agents={"a": _done}) as zeus:
        refs = _dispatch_settled(zeus, "a", 300)
        assert _alive(refs) == 0
