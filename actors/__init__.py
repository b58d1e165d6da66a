"""The child side of Zeus, for agent code: the brief a work function gets, the
`Context` it reports through, what it returns, and the errors it raises or meets.

Backend writers find the seam, the message protocol and the backends in
`actors.backends`. `actors` never imports `supervisor`.
"""

from actors.context import Context, Fence
from actors.errors import Cancelled, DelegationRefused, TransientError
from actors.models import AttemptOutcome, AttemptRecord, Brief, Report, Status, Summary, Usage
from actors.run import WorkFunction

__all__ = [
    "AttemptOutcome",
    "AttemptRecord",
    "Brief",
    "Cancelled",
    "Context",
    "DelegationRefused",
    "Fence",
    "Report",
    "Status",
    "Summary",
    "TransientError",
    "Usage",
    "WorkFunction",
]
