"""routing.yml: the agents' policies, as frozen pydantic models.

`Routing.load(path)` and `Routing.from_dict(data)` merge `defaults:` into each
agent and validate everything; a bad file raises `RoutingError` naming the
file, the key path and the line.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from supervisor.errors import RoutingError, UnknownAgent

__all__ = [
    "AgentPolicy",
    "Backoff",
    "BudgetPolicy",
    "HeartbeatPolicy",
    "IntensityPolicy",
    "ResultPolicy",
    "RetryOn",
    "RetryPolicy",
    "Routing",
    "ShutdownPolicy",
    "SupervisorPolicy",
]


class _Frozen(BaseModel):
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


class RetryPolicy(_Frozen):
    max_retries: int = Field(default=0, ge=0)
    backoff: Backoff = Backoff.exponential
    initial_s: float = Field(default=1.0, ge=0)
    factor: float = Field(default=2.0, ge=1)
    max_s: float = Field(default=30.0, gt=0)
    # Fraction of each wait drawn at random, +/- (0.2 means 80%..120% of the wait).
    jitter: float = Field(default=0.2, ge=0, le=1)
    on: tuple[RetryOn, ...] = tuple(RetryOn)


class HeartbeatPolicy(_Frozen):
    interval_s: float = Field(default=1.0, gt=0)
    stale_after_s: float = Field(default=10.0, gt=0)


class ShutdownPolicy(_Frozen):
    # Cooperative cancel -> grace_s -> SIGTERM -> term_s -> SIGKILL. 0 means "kill at once".
    grace_s: float = Field(default=2.0, ge=0)
    term_s: float = Field(default=0.5, ge=0)


class BudgetPolicy(_Frozen):
    max_calls: int | None = Field(default=None, ge=0)
    max_input_tokens: int | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=0)
    max_cost: float | None = Field(default=None, ge=0)


class ResultPolicy(_Frozen):
    max_chars: int | None = Field(default=None, gt=0)
    overflow: Literal["truncate", "artifact"] = "truncate"
    schema_: str | None = Field(default=None, alias="schema")
    artifact_dir: str | None = None

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class AgentPolicy(_Frozen):
    """One agent's effective policy (defaults already merged in)."""

    role: str | None = None
    kind: Literal["leaf", "orchestrator"] = "leaf"
    timeout_s: float = Field(default=120.0, gt=0)
    retry: RetryPolicy = RetryPolicy()
    fallback: str | None = None  # an agent name, or "zeus": back to the owner
    partial_ok: bool = False
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    session_max: int = Field(default=0, ge=0)
    isolation: Literal["thread", "process"] = "thread"
    heartbeat: HeartbeatPolicy = HeartbeatPolicy()
    shutdown: ShutdownPolicy = ShutdownPolicy()
    budget: BudgetPolicy = BudgetPolicy()
    result: ResultPolicy = ResultPolicy()
    retry_after_tool_calls: bool = False
    read_only: bool = False
    stateful: bool = False
    review_by: str | None = None
    entrypoint: str | None = None
    command: tuple[str, ...] | None = None
    can_delegate_to: tuple[str, ...] | None = None  # None: any agent
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_work_source(self) -> AgentPolicy:
        if self.entrypoint is not None and self.command is not None:
            raise ValueError("give either `entrypoint` or `command`, not both")
        return self


class IntensityPolicy(_Frozen):
    max_restarts: int = Field(default=20, ge=0)
    within_s: float = Field(default=60.0, gt=0)


class SupervisorPolicy(_Frozen):
    max_depth: int = Field(default=2, ge=1)
    max_concurrent: int = Field(default=64, ge=1)
    intensity: IntensityPolicy = IntensityPolicy()
    budget: BudgetPolicy = BudgetPolicy()


_AGENT_DEFAULT_KEYS = set(AgentPolicy.model_fields) - {"entrypoint", "command", "metadata"}


class Routing(_Frozen):
    """The whole routing file: supervisor limits and each agent's effective policy."""

    version: Literal[1] = 1
    supervisor: SupervisorPolicy = SupervisorPolicy()
    defaults: dict[str, Any] = Field(default_factory=dict)
    agents: dict[str, AgentPolicy] = Field(default_factory=dict)
    source: str | None = None
    dialect: Literal["native", "pantheon"] = "native"

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str | None = None) -> Routing:
        """Validate a routing mapping; `defaults:` is merged into every agent."""
        if not isinstance(data, dict):
            raise RoutingError(f"{source or 'routing'}: expected a mapping at the top level")
        defaults = data.get("defaults") or {}
        agents_raw = data.get("agents") or {}
        merged = {
            name: _deep_merge(defaults, raw or {}) for name, raw in dict(agents_raw).items()
        }
        try:
            routing = cls.model_validate({**data, "agents": merged, "source": source})
        except ValidationError as exc:
            raise RoutingError(_describe(exc, source)) from None
        for name, policy in routing.agents.items():
            if policy.fallback not in (None, "zeus") and policy.fallback not in routing.agents:
                raise RoutingError(
                    f"{source or 'routing'}: agents.{name}.fallback: unknown agent "
                    f"{policy.fallback!r}; use one of {sorted(routing.agents)} or 'zeus'"
                )
        return routing

    @classmethod
    def load(cls, path: str | Path) -> Routing:
        """Read and validate a routing.yml file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RoutingError(f"{path}: cannot read: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise RoutingError(f"{path}: not valid YAML: {exc}") from None
        return cls.from_dict(data, source=str(path))

    def agent(self, name: str) -> AgentPolicy:
        """The effective policy of agent `name`; `UnknownAgent` names the ones that exist."""
        try:
            return self.agents[name]
        except KeyError:
            raise UnknownAgent(
                f"unknown agent {name!r}: routing defines {sorted(self.agents) or 'no agents'}; "
                "add it to routing.yml or zeus.register() it"
            ) from None

    def with_agent(self, name: str, policy: AgentPolicy | None = None) -> Routing:
        """A copy with agent `name` added (the defaults' policy when `policy` is None)."""
        if policy is None:
            policy = AgentPolicy.model_validate(self.defaults)
        return self.model_copy(update={"agents": {**self.agents, name: policy}})


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _describe(exc: ValidationError, source: str | None) -> str:
    lines = [f"{source or 'routing'}: {exc.error_count()} error(s)"]
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"])
        lines.append(f"  {path}: {err['msg']} (found {err.get('input')!r})")
    return "\n".join(lines)
