"""An attempt's end, step by step (`Supervisor.end_attempt`): its steps run in the order
`Supervisor.END_STEPS` names, each finding what the steps before it did, and what is told
of it (events, a sub-delegation's cancel, the settlement) comes in that order."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors import Brief, Context, Status
from actors.clock import FakeClock
from supervisor.core.supervisor import Supervisor
from supervisor.testing import sync
from tests.conftest import Recorder, ZeusFactory

WAIT = 20.0  # a safety bound on waits, never the thing asserted

# The step each of `END_STEPS` names, as the method that carries it out.
METHODS = {"let_go": "_let_go", "read_end": "_read_end", "record_end": "_record_end",
           "tell_end": "_tell_end", "orphan_children": "_cancel_children",
           "follow_end": "_follow_end"}


class Steps:
    """The steps of each `end_attempt` call, by attempt id, as they ran (Zeus's thread),
    and what each found that the steps before it must have done."""

    def __init__(self, recorder: Recorder) -> None:
        self.ran: dict[str, list[str]] = {}
        self.broken: list[str] = []
        self._recorder = recorder
        self._ending: list[str] = []  # the attempt whose end is being carried out

    def check(self, step: str, sup: Supervisor, args: tuple[Any, ...]) -> None:
        if not self._ending:
            return  # (a cancel's own `_cancel_children`, outside any attempt's end)
        attempt_id = self._ending[-1]
        if "follow_end" in self.ran[attempt_id]:
            return  # what the step that follows does (a settlement cancels children too)
        self.ran[attempt_id].append(step)
        d = args[0]
        told = {e["event"] for e in self._recorder.events if e.get("attempt_id") == attempt_id}
        if step != "let_go" and (attempt_id in sup.tree.live or d.current is not None):
            self.broken.append(f"{step}: the attempt still runs")
        if step in ("tell_end", "orphan_children", "follow_end") and (
                not d.attempts or d.attempts[-1].id != attempt_id):
            self.broken.append(f"{step}: the attempt's record is not kept yet")
        if step in ("orphan_children", "follow_end") and not (
                told & {"attempt.completed", "attempt.failed"}):
            self.broken.append(f"{step}: the attempt's end is not told yet")
        if d.state == "settled":
            self.broken.append(f"{step}: the delegation settled before its attempt's end")

    def wrap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for step, name in METHODS.items():
            original = getattr(Supervisor, name)
            monkeypatch.setattr(Supervisor, name, self._spy(step, original))
        end = Supervisor.end_attempt

        def end_attempt(sup: Supervisor, d: Any, a: Any, *args: Any, **kwargs: Any) -> None:
            self._ending.append(a.id)
            self.ran[a.id] = []
            try:
                end(sup, d, a, *args, **kwargs)
            finally:
                self._ending.pop()

        monkeypatch.setattr(Supervisor, "end_attempt", end_attempt)

    def _spy(self, step: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def spy(sup: Supervisor, *args: Any, **kwargs: Any) -> Any:
            if step == "orphan_children" or not self._ending or args[1].id == self._ending[-1]:
                self.check(step, sup, args)
            return original(sup, *args, **kwargs)

        return spy


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch, recorder: Recorder) -> Iterator[Steps]:
    spy = Steps(recorder)
    spy.wrap(monkeypatch)
    yield spy
    assert spy.broken == []


def test_the_named_steps_are_the_methods_that_run_them() -> None:
    assert tuple(METHODS) == Supervisor.END_STEPS
    assert all(callable(getattr(Supervisor, name)) for name in METHODS.values())


@pytest.mark.parametrize("ending", ["returns", "raises", "times out"])
def test_every_end_runs_the_steps_in_their_order(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder, steps: Steps, ending: str
) -> None:
    """Each end runs `END_STEPS` in order; a stopped one tells its kill (`record_end`),
    then its end (`tell_end`), then its delegation's settlement (`follow_end`)."""
    running = threading.Event()

    def work(brief: Brief, ctx: Context) -> str:
        if ending == "raises":
            raise ValueError("the agent's own failure")
        if ending == "times out":
            running.set()
            ctx.sleep(600)
        return "done"

    zeus = make_zeus({"t": {"timeout_s": 30, "heartbeat": {"stale_after_s": 1000}}},
                     works={"t": work})
    handle = zeus.dispatch(Brief(agent="t", scope="s"))
    if ending == "times out":
        assert running.wait(WAIT)
        sync(zeus)
        clock.advance(30)
    summary = handle.result(WAIT)
    expected = {"returns": Status.completed, "raises": Status.failed,
                "times out": Status.timed_out}[ending]
    assert summary.status is expected
    assert list(steps.ran) == [summary.attempts[0].id]
    assert tuple(steps.ran[summary.attempts[0].id]) == Supervisor.END_STEPS
    if ending == "times out":
        told = [e["event"] for e in recorder.events
                if e["event"] in ("attempt.killed", "attempt.failed", "delegation.settled")]
        assert told == ["attempt.killed", "attempt.failed", "delegation.settled"]
        assert summary.attempts[0].killed is not None
