"""The restart governor: restart intensity, as each agent's circuit (`scope: agent`) or
as the supervisor's storm limit (`scope: supervisor`). It counts restarts and *returns*
a verdict; acting on it (settling, stopping siblings) is its caller's. Owned by Zeus's
actor thread."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.routing import IntensityPolicy
from supervisor.rules.circuit import admit_restart, circuit_reason
from supervisor.rules.intensity import RestartWindow

__all__ = ["RestartGovernor", "RestartVerdict"]


@dataclass(frozen=True, slots=True)
class RestartVerdict:
    """Whether one more restart may start; if not, why, and what the refusal means."""

    allowed: bool
    reason: str | None = None  # why it was refused, in a sentence
    tripped: bool = False  # this refusal opened the circuit, or exceeded the storm limit
    restarts: int = 0  # restarts inside the window, for `supervisor.intensity_exceeded`
    give_up: bool = False  # scope supervisor: give up on every delegation under it


ALLOWED = RestartVerdict(True)


class RestartGovernor:
    """Restart windows by agent (scope agent) or by supervising delegation (scope
    supervisor, keyed by its id, None for the host's delegations)."""

    def __init__(self) -> None:
        self._windows: dict[str | None, RestartWindow] = {}
        self._open_circuits: set[str] = set()  # agents whose restarts are refused for now

    def admit(
        self, agent: str, parent_id: str | None, now: float, intensity: IntensityPolicy
    ) -> RestartVerdict:
        """Count one restart of a delegation of `agent` under `parent_id`."""
        if intensity.scope == "supervisor":
            return self._storm(agent, parent_id, now, intensity)
        admission = admit_restart(self._windows.get(agent, RestartWindow()), now, intensity,
                                  was_open=agent in self._open_circuits)
        self._windows[agent] = admission.window
        if admission.allowed:
            self._open_circuits.discard(agent)
            return ALLOWED
        self._open_circuits.add(agent)
        return RestartVerdict(False, circuit_reason(agent, intensity), admission.tripped,
                              len(admission.window.restarts))

    def _storm(
        self, agent: str, parent_id: str | None, now: float, intensity: IntensityPolicy
    ) -> RestartVerdict:
        """OTP's escalation: the restart that exceeds the limit is recorded, the window
        starts over, and the supervisor gives up on what it supervises."""
        window = self._windows.get(parent_id, RestartWindow()).record(now, intensity)
        if not window.exceeded(intensity):
            self._windows[parent_id] = window
            return ALLOWED
        self._windows[parent_id] = RestartWindow()
        return RestartVerdict(False, circuit_reason(agent, intensity), tripped=True,
                              restarts=len(window.restarts), give_up=True)

    def forget(self, delegation_id: str) -> None:
        """A delegation settled: the window of the restarts under it goes with it."""
        self._windows.pop(delegation_id, None)
