"""The policy models routing.yml is made of: frozen pydantic models, one per section.

`supervisor.routing` re-exports them; the checks of a file and its dialects
import them from here, so that none of them imports `routing`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from actors.limits import Seconds

__all__ = [
    "AGENT_DEFAULT_KEYS",
    "AGENT_NAME",
    "OWNER",
    "AgentPolicy",
    "Backoff",
    "BudgetPolicy",
    "Frozen",
    "HeartbeatPolicy",
    "IntensityPolicy",
    "PricingPolicy",
    "RayPolicy",
    "ResultPolicy",
    "RetryOn",
    "RetryPolicy",
    "ShutdownPolicy",
    "StorePolicy",
    "SupervisorPolicy",
    "agent_name_problem",
]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Backoff(StrEnum):
    none = "none"
    fixed = "fixed"
    exponential = "exponential"


class RetryOn(StrEnum):
    transient = "transient"
    timeout = "timeout"
    stale = "stale"
    crash = "crash"
    lost = "lost"  # the supervisor died; its child was confirmed gone on recovery


class RetryPolicy(Frozen):
    max_retries: int = Field(default=0, ge=0, description="Retries on the same agent.")
    backoff: Backoff = Backoff.exponential
    initial_s: Seconds = Field(default=1.0, ge=0, description="The first wait, in seconds.")
    factor: float = Field(default=2.0, ge=1, description="Each wait is the last one times this.")
    max_s: Seconds = Field(default=30.0, gt=0, description="No wait is longer than this.")
    # Fraction of each wait drawn at random, +/- (0.2 means 80%..120% of the wait).
    jitter: float = Field(default=0.2, ge=0, le=1)
    on: tuple[RetryOn, ...] = Field(
        default=tuple(RetryOn), description="The attempt outcomes that are retried."
    )
    # An agent CLI's attempt stopped (deadline, stale) or ended transient or crash, that
    # printed a session id, is retried by continuing that session (None: yes for a CLI).
    resume_session: bool | None = Field(
        default=None, description="Retry a stopped CLI attempt by resuming its session."
    )


class HeartbeatPolicy(Frozen):
    # Invariant (checked when a file is loaded): stale_after_s > interval_s.
    interval_s: Seconds = Field(default=1.0, gt=0, description="Seconds between heartbeats.")
    stale_after_s: Seconds = Field(
        default=10.0, gt=0, description="No progress for this long: the attempt is stale."
    )
    # Inside `with ctx.tool(...)`: a long tool call reports nothing. None: 3 x stale_after_s.
    # Invariant (checked when a file is loaded): stale_in_tool_s >= stale_after_s.
    stale_in_tool_s: float | None = Field(
        default=None, gt=0, description="Stale threshold while a tool call is in progress."
    )

    @property
    def in_tool_s(self) -> float:
        """The stale threshold inside a long tool call."""
        return self.stale_in_tool_s if self.stale_in_tool_s is not None else 3 * self.stale_after_s


class ShutdownPolicy(Frozen):
    # Cooperative cancel -> grace_s -> SIGTERM -> term_s -> SIGKILL. 0 means "kill at once".
    grace_s: Seconds = Field(default=2.0, ge=0)
    term_s: Seconds = Field(default=0.5, ge=0)


class BudgetPolicy(Frozen):
    max_calls: int | None = Field(default=None, ge=0)
    max_input_tokens: int | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=0)
    max_cost: float | None = Field(default=None, ge=0)


class PricingPolicy(Frozen):
    """What a token costs: a charge that carries tokens but no cost is priced with this."""

    input_per_mtok: float = Field(default=0.0, ge=0, description="Cost per million input tokens.")
    output_per_mtok: float = Field(
        default=0.0, ge=0, description="Cost per million output tokens."
    )
    cached_input_per_mtok: float | None = Field(
        default=None, ge=0,
        description="Cost per million cached input tokens (null: as input_per_mtok).",
    )


class ResultPolicy(Frozen):
    max_chars: int | None = Field(default=None, gt=0)
    overflow: Literal["truncate", "artifact"] = "truncate"
    schema_: str | None = Field(
        default=None, alias="schema", description="A pydantic model, 'pkg.module:Model'."
    )
    artifact_dir: str | None = None

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class AgentPolicy(Frozen):
    """One agent's effective policy (defaults already merged in)."""

    role: str | None = None
    kind: Literal["leaf", "orchestrator"] = Field(
        default="leaf", description="Only orchestrators may delegate (ctx.delegate)."
    )
    timeout_s: Seconds = Field(default=120.0, gt=0, description="Each attempt's deadline.")
    spawn_timeout_s: Seconds = Field(
        default=60.0, gt=0,
        description="How long an attempt's child may take to start running the work (a "
        "slot, the fork server, a node, its imports); past it the attempt is a crash.",
    )
    retry: RetryPolicy = RetryPolicy()
    fallback: str | None = Field(
        default=None, description="An agent to try when retries are spent, or 'zeus' (the owner)."
    )
    partial_ok: bool = False
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    session_max: int = Field(default=0, ge=0, description="Warm sessions kept for this agent.")
    isolation: Literal["thread", "process", "ray"] = "thread"
    resources: dict[str, float] | None = Field(
        default=None, description="Ray isolation: what an attempt asks of a node (num_cpus, ...)."
    )
    heartbeat: HeartbeatPolicy = HeartbeatPolicy()
    shutdown: ShutdownPolicy = ShutdownPolicy()
    budget: BudgetPolicy = BudgetPolicy()
    pricing: PricingPolicy | None = None
    result: ResultPolicy = ResultPolicy()
    retry_after_tool_calls: bool = False
    read_only: bool = False
    stateful: bool = False
    idempotent: bool = Field(
        default=False,
        description="Safe to run again when a crash of the supervisor left its outcome unknown.",
    )
    review_by: str | None = Field(default=None, description="The agent that reviews a `task`.")
    entrypoint: str | None = Field(default=None, description="The work function, 'pkg.module:fn'.")
    command: tuple[str, ...] | None = Field(
        default=None, min_length=1, description="A command agent: the program and its arguments."
    )
    speaks: Literal["lines", "jsonl", "claude", "codex", "gemini", "opencode", "cursor"] = Field(
        default="lines",
        description="What a command's standard output carries: plain lines, Zeus's JSON "
        "lines, or an agent CLI's event stream (the CLI names build its invocation).",
    )
    args: tuple[str, ...] = Field(
        default=(), description="An agent CLI's extra flags, after the ones Zeus speaks with."
    )
    require_summary: bool = Field(
        default=False,
        description="A final text without a <subtask_summary> block is an error.",
    )
    exit_grace_s: Seconds = Field(
        default=10.0, gt=0,
        description="An agent CLI still alive this long after its result is stopped.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Added to the environment its program runs with; ${VAR} in a value is "
        "the host's VAR (empty when unset).",
    )
    inputs_via: Literal["argv", "stdin", "file"] = Field(
        default="argv",
        description="How a command agent receives the inputs: `{inputs}` in argv (readable "
        "by every local user), the first line of stdin, or an owner-only file.",
    )
    can_delegate_to: tuple[str, ...] | None = None  # None: any agent
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_work_source(self) -> AgentPolicy:
        if self.entrypoint is not None and (self.command is not None or self.speaks_cli):
            raise ValueError("give either `entrypoint` or `command`/`speaks`, not both")
        return self

    @property
    def speaks_cli(self) -> bool:
        """Whether it is an agent CLI (`speaks: claude`, ...): a command Zeus builds."""
        return self.speaks not in ("lines", "jsonl")

    @property
    def runs_program(self) -> bool:
        """Whether its attempts run a program (a `command:`, or an agent CLI)."""
        return self.command is not None or self.speaks_cli


class IntensityPolicy(Frozen):
    max_restarts: int = Field(default=20, ge=0)
    within_s: Seconds = Field(default=60.0, gt=0)
    # agent: a circuit per agent (its restarts stop, nothing else is touched);
    # supervisor: OTP's escalation (the supervisor gives up on its open delegations).
    scope: Literal["agent", "supervisor"] = "agent"


class RayPolicy(Frozen):
    # null: start a local Ray (unless one runs in this process); "auto", "host:port" or
    # "ray://host:port": join that cluster. `init` goes to `ray.init` as it is.
    address: str | None = None
    init: dict[str, Any] = Field(default_factory=dict)
    connect_timeout_s: float = Field(default=10.0, gt=0)


class StorePolicy(Frozen):
    """Where delegations outlive the supervisor's process (docs/design.md, the store)."""

    path: str | None = Field(
        default=None, description="The SQLite store, or a postgresql:// URL; null: memory only."
    )
    # normal: survives any crash of the host process; full: also a power loss.
    synchronous: Literal["normal", "full"] = "normal"
    keep_days: float = Field(
        default=30.0, gt=0, allow_inf_nan=False,
        description="Settled delegations are pruned after this many days.",
    )
    # A PostgreSQL store (`path` a postgresql:// URL): each host's lease, judged by the
    # database's clock; docs/design.md, "The store".
    lease_s: float = Field(
        default=10.0, gt=0, allow_inf_nan=False,
        description="A host's lease on a shared PostgreSQL store, in seconds.",
    )


class SupervisorPolicy(Frozen):
    max_depth: int = Field(default=2, ge=1, description="Levels of delegation below the host.")
    max_concurrent: int = Field(default=64, ge=1)
    keep_settled: int = Field(
        default=10_000, ge=0, description="Settled delegations `zeus.handle(id)` still finds."
    )
    intensity: IntensityPolicy = IntensityPolicy()
    budget: BudgetPolicy = BudgetPolicy()
    ray: RayPolicy = RayPolicy()
    store: StorePolicy = StorePolicy()
    # How long a child whose supervisor is gone will wait to be picked up; None: 30 s with
    # a store, 0 without (`orphan_grace(stored)`); docs/design.md, "Reattach".
    orphan_grace_s: Seconds | None = Field(
        default=None, ge=0, description="Seconds an orphaned child waits to be picked up."
    )
    # With a store: how many host crashes one delegation may be lost in and still run
    # again (a lost attempt never uses up `retry.max_retries`); docs/design.md, "The store".
    max_recoveries: int = Field(
        default=10, ge=0, description="Host crashes a delegation may be lost in and rerun."
    )

    def orphan_grace(self, stored: bool) -> float:
        """The orphan grace in force: as set, else 30 s with a store and 0 without."""
        if self.orphan_grace_s is not None:
            return float(self.orphan_grace_s)
        return 30.0 if stored else 0.0


# The keys `defaults:` may set: all but those that belong to one agent.
AGENT_DEFAULT_KEYS = set(AgentPolicy.model_fields) - {"entrypoint", "command", "metadata"}
# `fallback: zeus` gives a failure back to the owner, so no agent may be called zeus.
OWNER = "zeus"
# An agent's name becomes part of delegation ids, artifact file names and log lines.
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def agent_name_problem(name: str) -> str | None:
    """Why `name` cannot name an agent (`found X; allowed: Y`), or None when it can."""
    if AGENT_NAME.fullmatch(name):
        return None
    return (f"found {name!r}; allowed: an agent name of letters, digits, '_', '.' and '-' "
            "that starts with a letter or digit")

