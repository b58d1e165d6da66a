"""A worker's attempts, run in this process through the worker's own code (`_Child`), its
Finished written to a pipe read here."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Brief, Context
from actors import wire as _wire
from actors.backends import frames
from actors.backends.base import ChildSpec
from actors.backends.jobs import encode_job
from actors.backends.process import worker as _worker
from actors.clock import FakeClock
from actors.protocol import Finished

CONTEXTS: list[weakref.ref[Context]] = []


def keeps_a_weak_reference(brief: Brief, ctx: Context) -> str:
    CONTEXTS.append(weakref.ref(ctx))
    return brief.scope


class _Fd:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


@pytest.fixture
def child() -> Iterator[tuple[Any, int]]:
    """A worker's `_Child` (its threads not started) and the read end of what it sends."""
    jobs_r, jobs_w = os.pipe()
    out_r, out_w = os.pipe()
    yield _worker._Child(_Fd(jobs_r), _Fd(jobs_r), _Fd(out_w)), out_r
    for fd in (jobs_r, jobs_w, out_r, out_w):
        os.close(fd)


def _job(n: int) -> frames.Run:
    clock = FakeClock()  # no real deadline: the worker's backstop (it kills) is not armed
    spec = ChildSpec(
        agent="a", delegation_id=f"d{n}", attempt=1, attempt_id=f"d{n}-a1",
        brief=Brief(agent="a", scope=f"scope {n}"), deadline=clock.now() + 60, clock=clock,
        work=keeps_a_weak_reference,
    )  # fmt: skip
    job, _ = encode_job(spec)
    work = _wire.dumps_work(keeps_a_weak_reference)
    data = frames.run_frame(spec.attempt_id, frames.work_part(False, 0, work), job)
    frame = frames.read_job(data)
    assert isinstance(frame, frames.Run)
    return frame


def test_an_attempt_s_objects_are_freed_as_it_ends_not_left_to_the_collector(
    child: tuple[Any, int],
) -> None:
    worker, out = child
    reader = _wire.FrameReader(out)
    CONTEXTS.clear()
    gc.collect()
    gc.disable()
    try:
        for n in range(3):
            worker._run(_job(n))
            sent = [frames.read_report(data) for data in reader.read() or []]
            while not isinstance(sent[-1], Finished):
                sent += [frames.read_report(data) for data in reader.read() or []]
            # First that it took the job (its clocks start there), last how it ended.
            assert [type(m) for m in sent] == [frames.StartedAt, Finished]
            finished = sent[-1]
            assert isinstance(finished, Finished) and finished.value == f"scope {n}"
            assert CONTEXTS[n]() is None  # no reference cycle kept it
    finally:
        gc.enable()


def test_a_job_taken_late_keeps_its_running_time_up_to_its_cap() -> None:
    """docs/design.md, "An attempt's clock": the worker moves the deadline and kill-by time
    it was sent on by its wait, never past the delegation's whole deadline."""
    clock = FakeClock()
    spec = ChildSpec(agent="a", delegation_id="d", attempt=1, attempt_id="d-a1",
                     brief=Brief(agent="a", scope="s"), deadline=clock.now() + 10, clock=clock,
                     deadline_cap=clock.now() + 12)  # fmt: skip
    data, _ = encode_job(spec)
    job = frames.read_job(frames.run_frame("d-a1", frames.work_part(False, 0, b""), data))
    assert isinstance(job, frames.Run)
    from actors.backends.jobs import decode_job

    sent = decode_job(job.job)._replace(hard_stop=None)
    assert sent.reckoned_at is not None and sent.deadline - sent.reckoned_at == pytest.approx(10)
    assert sent.cap - sent.reckoned_at == pytest.approx(12)
    assert sent.started(sent.reckoned_at) == sent  # taken at once: as sent
    late = sent.started(sent.reckoned_at + 1.5)
    assert late.deadline - sent.reckoned_at == pytest.approx(11.5)  # its 10 s from its start
    capped = sent._replace(hard_stop=sent.deadline + 3.5).started(sent.reckoned_at + 5)
    assert capped.deadline == sent.cap  # no later than its delegation's deadline
    assert capped.hard_stop == pytest.approx(sent.cap + 3.5)  # the same distance past it
