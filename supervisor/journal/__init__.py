"""The journal: events written (events), read and followed (reader), the tree rebuilt
from them (replay), and the sweep of children a crashed supervisor left (sweep).
"""

from supervisor.journal.reader import (
    Attempt,
    Delegation,
    Event,
    Journal,
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
    "Attempt",
    "Delegation",
    "Event",
    "Journal",
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
