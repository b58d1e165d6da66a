"""The journal: events written (events), read and followed (reader), the tree rebuilt
from them (replay, into the records of runs), and the sweep of children a crashed
supervisor left (sweep).
"""

from supervisor.journal.reader import (
    Event,
    Journal,
    ReplayedAttempt,
    ReplayedDelegation,
    Run,
    SweepAction,
    SweepResult,
    SweepTarget,
    TimeoutEntry,
    TrackingRow,
    follow,
    load,
    parse_line,
    process_start_time,
    read_events,
    sweep,
    sweep_targets,
    tracking_rows,
)

__all__ = [
    "Event",
    "Journal",
    "ReplayedAttempt",
    "ReplayedDelegation",
    "Run",
    "SweepAction",
    "SweepResult",
    "SweepTarget",
    "TimeoutEntry",
    "TrackingRow",
    "follow",
    "load",
    "parse_line",
    "process_start_time",
    "read_events",
    "sweep",
    "sweep_targets",
    "tracking_rows",
]
