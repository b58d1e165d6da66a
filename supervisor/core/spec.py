"""What a backend needs to start an attempt: the `ChildSpec` built from the delegation,
its new attempt and the routing. Built in Zeus's actor thread, before the child starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import AttemptOutcome
from actors.backends import ChildSpec
from actors.clock import Clock
from actors.speaks import Invocation, Pricing, SessionTotals
from supervisor.core.registry import Registry
from supervisor.core.state import Attempt, Delegation, previous_error
from supervisor.errors import SupervisorError
from supervisor.routing import AgentPolicy
from supervisor.rules.framing import FramingHeads, role_framing

__all__ = ["backend_name", "child_spec", "isolation_of", "work_of"]

WorkFn = Callable[..., Any]


def isolation_of(a: Attempt) -> str:
    """The backend an attempt runs on: a `command:` agent always runs as a process."""
    return backend_name(a.policy)


def backend_name(policy: AgentPolicy) -> str:
    """The backend an agent's attempts run on: its isolation's, but a `command:` agent
    always runs as a process."""
    return "process" if policy.runs_program else policy.isolation


def work_of(a: Attempt, registry: Registry) -> WorkFn | None:
    """What `a` runs in-process (None for a `command:` agent); `SupervisorError` if none."""
    if a.policy.runs_program:
        return None
    work = registry.work(a.agent)
    if work is None:
        raise SupervisorError(
            f"agent {a.agent!r} has no work function: zeus.register({a.agent!r}, fn) "
            "or give it an `entrypoint:` or `command:` in routing.yml"
        )
    return work


def child_spec(
    d: Delegation,
    a: Attempt,
    *,
    registry: Registry,
    clock: Clock,
    now: float,
    work: WorkFn | None,
    session: dict[str, Any] | None,
    budget_left: dict[str, float] | None,
    heads: FramingHeads | None = None,
    resume: str | None = None,
    continued: bool = False,
    prior: SessionTotals | None = None,
    epoch: int = 1,
) -> ChildSpec:
    """The spec of `d`'s attempt `a`, which runs `work` (None for a `command:` agent or an
    agent CLI; `resume`: the CLI's session id a follow-up continues, `prior` what that
    session was charged so far; `epoch`: the
    delegation's on its store, for `ctx.fence`)."""
    policy = a.policy
    answer = d.answer
    # The attempt that resumes a delegation a person answered: told of the blocker, not of
    # how its blocked attempt ended (it completed, saying it was blocked).
    answering = answer is not None and a.number == answer.after + 1
    previous = previous_error(d.attempts)
    if answering and d.attempts and d.attempts[-1].outcome is AttemptOutcome.completed:
        previous = None
    invocation = None
    if policy.speaks_cli:
        left = budget_left.get("cost") if budget_left else None
        invocation = Invocation(policy.speaks, program=policy.command or (), args=policy.args,
                                resume=resume, budget_usd=left, prior=prior)
    pricing = policy.pricing
    return ChildSpec(
        agent=d.agent,
        delegation_id=d.id,
        attempt=a.number,
        attempt_id=a.id,
        brief=d.brief if d.agent == d.brief.agent else d.brief.model_copy(
            update={"agent": d.agent}
        ),
        deadline=a.deadline,
        deadline_cap=d.deadline_cap,
        clock=clock,
        work=work,
        command=None if invocation is not None else policy.command,
        inputs_via=policy.inputs_via,
        speaks=policy.speaks,
        invocation=invocation,
        pricing=None if pricing is None else Pricing(
            pricing.input_per_mtok, pricing.output_per_mtok, pricing.cached_input_per_mtok),
        exit_grace_s=policy.exit_grace_s,
        env=policy.env or None,
        heartbeat_interval_s=policy.heartbeat.interval_s,
        term_s=policy.shutdown.term_s,
        grace_s=policy.shutdown.grace_s,
        session=session,
        session_key=d.brief.session,
        # Process agents keep at least one warm worker: no spawn per delegation.
        session_max=max(1, policy.session_max),
        resources=policy.resources,
        previous_partials=tuple(d.partials),
        depth=d.depth,
        framing=role_framing(d.agent, policy, registry.routing, d.depth,
                             a.deadline - now, d.usage, heads=heads),
        previous_error=previous,
        continues_session=continued and not answering,
        earlier_tools=tuple(d.tools_run),
        previous_blocker=None if answer is None else answer.blocker,
        note=None if answer is None else answer.note,
        reasoning_effort=policy.reasoning_effort,
        budget_left=budget_left,
        epoch=epoch,
    )
