"""The child's own mailbox: `handle.send` / `zeus.send` in, `ctx.receive()` out."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import pytest

from actors import Brief, Cancelled, Context, Status, TransientError
from actors.clock import FakeClock
from supervisor import Routing, Zeus
from supervisor.testing import sync
from tests._support import eventually
from tests.conftest import Recorder, ZeusFactory


def listen(brief: Brief, ctx: Context) -> list[Any]:
    """Reports once, then collects messages until one says "stop"."""
    ctx.heartbeat("listening")
    got: list[Any] = []
    while True:
        message = ctx.receive(timeout=10)
        if message == "stop" or message is None:
            return got
        got.append(message)


def test_a_thread_child_receives_what_its_owner_sends(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"listen": listen})
    handle = zeus.dispatch(Brief(agent="listen", scope="x"))
    assert handle.send({"steer": "left"}) is True
    assert zeus.send(handle.id, ["two"]) is True
    assert handle.send("stop") is True
    summary = handle.result(10)
    assert summary.output == [{"steer": "left"}, ["two"]]
    assert handle.send("late") is False  # settled


def test_receive_with_no_message_is_none_at_once(make_zeus: ZeusFactory) -> None:
    def peek(brief: Brief, ctx: Context) -> Any:
        return [ctx.receive(), ctx.receive(timeout=0.01)]

    zeus = make_zeus(works={"peek": peek})
    assert zeus.dispatch(Brief(agent="peek", scope="x")).result(10).output == [None, None]


def test_a_message_sent_between_attempts_goes_to_the_next(
    clock: FakeClock, make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def flaky(brief: Brief, ctx: Context) -> Any:
        if ctx.attempt == 1:
            raise TransientError("once")
        return ctx.receive(timeout=10)

    zeus = make_zeus(
        agents={"flaky": {"retry": {"max_retries": 1, "initial_s": 5, "jitter": 0}}},
        works={"flaky": flaky},
    )
    handle = zeus.dispatch(Brief(agent="flaky", scope="x"))
    recorder.wait_for("retry.scheduled")
    assert handle.send("for attempt two") is True  # nobody runs: kept for the next attempt
    sync(zeus)
    clock.advance(5)
    assert handle.result(10).output == "for attempt two"


def test_receive_waiting_for_a_message_is_cancellable(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def wait_forever(brief: Brief, ctx: Context) -> Any:
        waiting.set()
        try:
            return ctx.receive(timeout=None)  # a cancel before or while it waits ends it
        except Cancelled:
            ended.set()
            raise

    waiting, ended = threading.Event(), threading.Event()
    zeus = make_zeus(works={"w": wait_forever})
    handle = zeus.dispatch(Brief(agent="w", scope="x"))
    assert waiting.wait(10)
    handle.cancel()
    assert handle.result(10).status is Status.cancelled
    assert ended.is_set()


# -- process and command children ---------------------------------------------------------


def process_routing(**agents: dict[str, Any]) -> Routing:
    return Routing.from_dict({"version": 1, "agents": agents})


@pytest.mark.process
@pytest.mark.realtime
def test_a_process_child_receives_what_its_owner_sends() -> None:
    with Zeus.start(process_routing(listen={"isolation": "process"}),
                    agents={"listen": listen}) as zeus:
        handle = zeus.dispatch(Brief(agent="listen", scope="x"))
        assert handle.send({"n": 1}) is True
        assert handle.send(("a", 2.5)) is True
        assert handle.send("stop") is True
        summary = handle.result(20)
    assert summary.status is Status.completed, summary.error
    assert summary.output == [{"n": 1}, ("a", 2.5)]


@pytest.mark.process
@pytest.mark.realtime
def test_a_message_that_cannot_cross_is_a_type_error_and_the_child_goes_on() -> None:
    with Zeus.start(process_routing(listen={"isolation": "process"}),
                    agents={"listen": listen}) as zeus:
        handle = zeus.dispatch(Brief(agent="listen", scope="x"))
        with pytest.raises(TypeError, match="cannot cross the process boundary"):
            handle.send(x for x in "ab")  # a generator: neither pickle nor dill takes it
        assert handle.send("fine") is True
        assert handle.send("stop") is True
        summary = handle.result(20)
    assert summary.status is Status.completed
    assert summary.output == ["fine"]


ECHO_STDIN = (
    "import sys\n"
    "for line in sys.stdin:\n"
    "    if line.strip() == '\"stop\"':\n"
    "        break\n"
    "    print(line.strip(), flush=True)\n"
)


@pytest.mark.process
@pytest.mark.realtime
def test_a_command_agent_gets_each_message_as_a_json_line_on_stdin() -> None:
    routing = process_routing(cat={"command": [sys.executable, "-c", ECHO_STDIN]})
    with Zeus.start(routing) as zeus:
        handle = zeus.dispatch(Brief(agent="cat", scope="x"))
        with pytest.raises(TypeError, match="JSON-serializable"):
            handle.send({1, 2})
        assert handle.send({"steer": "left"}) is True
        assert eventually(lambda: bool(zeus.tree()["delegations"]))
        assert handle.send("stop") is True
        summary = handle.result(20)
    assert summary.status is Status.completed, summary.error
    assert summary.partial_results == []  # a completed command's lines are its output
    assert [json.loads(line) for line in summary.output.splitlines()] == [{"steer": "left"}]
