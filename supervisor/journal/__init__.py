"""The journal: events written (events), read and followed (reader), the tree rebuilt
from them (replay, into the records of runs), and the sweep of children a crashed
supervisor left (sweep).
"""

from supervisor.journal.reader import (
    TrackingRow,
    follow,
    load,
    no_events,
    parse_line,
    read_events,
    tracking_rows,
)
from supervisor.journal.replay import Journal
from supervisor.journal.runs import (
    Event,
    ReplayedAttempt,
    ReplayedDelegation,
    ReplayedTool,
    Run,
    TimeoutEntry,
)
from supervisor.journal.sweep import (
    SweepAction,
    SweepResult,
    SweepTarget,
    process_start_time,
    sweep,
    sweep_targets,
)

__all__ = [
    "Event",
    "Journal",
    "ReplayedAttempt",
    "ReplayedDelegation",
    "ReplayedTool",
    "Run",
    "SweepAction",
    "SweepResult",
    "SweepTarget",
    "TimeoutEntry",
    "TrackingRow",
    "follow",
    "load",
    "no_events",
    "parse_line",
    "process_start_time",
    "read_events",
    "sweep",
    "sweep_targets",
    "tracking_rows",
]
