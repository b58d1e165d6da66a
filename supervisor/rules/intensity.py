"""Restart intensity: more than `max_restarts` restarts within `within_s` is a storm."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.routing import IntensityPolicy

__all__ = ["RestartWindow"]


@dataclass(frozen=True, slots=True)
class RestartWindow:
    restarts: tuple[float, ...] = ()  # clock times of the restarts still inside the window

    def record(self, now: float, policy: IntensityPolicy) -> RestartWindow:
        """The window after one more restart at `now` (old ones slide out)."""
        kept = tuple(t for t in self.restarts if now - t < policy.within_s)
        return RestartWindow((*kept, now))

    def exceeded(self, policy: IntensityPolicy) -> bool:
        return len(self.restarts) > policy.max_restarts
