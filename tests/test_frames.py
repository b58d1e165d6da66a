"""The seam's declared parts: every frame read back as it was made, and the child-handle base."""

from __future__ import annotations

import pytest

from actors import AttemptOutcome
from actors import wire as _wire
from actors.backends import ChildHandle, CommandChild, ProcessChild, ThreadChild, frames
from actors.mail import Mail
from actors.models import Usage
from actors.protocol import Charge, Finished, Heartbeat, Partial, ToolCall


def test_a_run_frame_reads_back_with_its_work_part_and_job() -> None:
    data = frames.run_frame("d1-a1", frames.work_part(True, 7, b"work"), b"the job")
    frame = frames.read_job(data)
    assert isinstance(frame, frames.Run)
    assert (frame.attempt_id, frame.flush, frame.token, frame.work) == ("d1-a1", True, 7, b"work")
    assert bytes(frame.job) == b"the job"
    kept = frames.read_job(frames.run_frame("d1-a2", frames.work_part(False, 7, b""), b"j"))
    assert isinstance(kept, frames.Run) and kept.work == b"" and bytes(kept.job) == b"j"
    assert frames.read_job(frames.STOP_FRAME) is frames.STOP


def test_control_frames_read_back_as_their_types() -> None:
    assert frames.read_control(frames.cancel_frame("d-a1")) == frames.Cancel("d-a1")
    assert frames.read_control(frames.cancel_frame("d-a1", "timeout")) == frames.Cancel(
        "d-a1", "timeout")  # the cause travels: a later Zeus learns it from the child
    assert frames.read_control(frames.mail_frame("d-a1", b"\0x\0")) == frames.MailTo(
        "d-a1", b"\0x\0")  # a NUL in the message stays in it
    assert frames.read_control(frames.reply_frame(2**40, b"r")) == frames.Reply(2**40, b"r")
    assert frames.read_control(b"?") is None


@pytest.mark.parametrize("message", [
    Heartbeat("d-a1", 3, "looking", liveness=True),
    Partial("d-a1", 1, {"item": 1}),
    Charge("d-a1", 2, Usage(calls=1, cost=0.5)),
    ToolCall("d-a1", 4, "grep", True),
    Finished("d-a1", AttemptOutcome.completed, value=[1, 2], pid=5, progress=9),
])
def test_report_frames_read_back_equal(message: object) -> None:
    assert frames.read_report(frames.report_frame(message)) == message  # type: ignore[arg-type]


def test_a_delegation_and_a_placement_read_back_as_their_types() -> None:
    assert frames.read_report(frames.delegate_frame(3, {"agent": "a"}, 2)) == frames.Delegate(
        3, {"agent": "a"}, 2)
    assert frames.read_report(frames.placed_frame(42, "10.0.0.1/abc")) == frames.PlacedAt(
        42, "10.0.0.1/abc")


def test_a_waiting_workers_hello_reads_back_and_jobs_are_told_from_control_frames() -> None:
    hello = frames.Hello(42, 1.5e9, "apollo", "apollo-1-a1", True, "s1")
    assert frames.read_hello(frames.hello_frame(hello)) == hello
    with pytest.raises(ValueError, match="not a hello"):
        frames.read_hello(frames.report_frame(Heartbeat("d-a1", 1)))
    jobs = [frames.run_frame("d-a1", frames.work_part(False, 0, b""), b"j"), frames.STOP_FRAME]
    control = [frames.cancel_frame("d-a1"), frames.mail_frame("d-a1", b"m"),
               frames.reply_frame(1, b"r")]  # fmt: skip
    assert [frames.is_job(f) for f in jobs + control] == [True, True, False, False, False]


def test_a_result_that_cannot_cross_names_its_type() -> None:
    finished = Finished("d-a1", AttemptOutcome.completed, value=(x for x in "ab"))
    with pytest.raises(_wire.CrossingError, match="the result \\(a generator\\)"):
        frames.finished_frame(finished)


def test_every_handle_derives_from_the_declared_base() -> None:
    for cls in (ThreadChild, ProcessChild, CommandChild):
        assert issubclass(cls, ChildHandle)


def test_a_handle_must_define_the_four_required_members_and_gets_the_defaults() -> None:
    class NoKill(ChildHandle):
        pid = None
        killable = False

        def cancel(self) -> None:
            pass

    with pytest.raises(TypeError, match="kill"):
        NoKill()  # type: ignore[abstract]

    class Minimal(NoKill):
        def kill(self) -> None:
            pass

    child = Minimal()
    assert (child.alive, child.pid_start_time, child.node, child.placing) == (
        False, None, None, False)
    assert dict(child.journal_fields) == {}
    child.put_mail(Mail("dropped"))  # a backend without a mailbox drops the message
