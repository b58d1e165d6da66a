"""The child side of Zeus: the Context a work function reports through, the
message protocol, and the isolation backends that run attempts.

`actors` never imports `supervisor`.
"""

from actors._backend import Backend, ChildHandle, ChildSpec, Send
from actors._clock import Clock, FakeClock, SystemClock, Timer
from actors._command import CommandChild
from actors._context import Context
from actors._errors import Cancelled, DelegationRefused, TransientError
from actors._models import AttemptOutcome, AttemptRecord, Brief, Report, Status, Summary, Usage
from actors._osproc import process_start_time
from actors._process import ProcessBackend, ProcessChild
from actors._protocol import (
    Charge,
    ChildMessage,
    DelegateRequest,
    Finished,
    Heartbeat,
    Partial,
    Placed,
    ToolCall,
)
from actors._run import WorkFunction, classify_exception, run_work
from actors._thread import ThreadBackend, ThreadChild

__all__ = [
    "AttemptOutcome",
    "AttemptRecord",
    "Backend",
    "Brief",
    "Cancelled",
    "Charge",
    "ChildHandle",
    "ChildMessage",
    "ChildSpec",
    "Clock",
    "CommandChild",
    "Context",
    "DelegateRequest",
    "DelegationRefused",
    "FakeClock",
    "Finished",
    "Heartbeat",
    "Partial",
    "Placed",
    "ProcessBackend",
    "ProcessChild",
    "Report",
    "Send",
    "Status",
    "Summary",
    "SystemClock",
    "ThreadBackend",
    "ThreadChild",
    "Timer",
    "ToolCall",
    "TransientError",
    "Usage",
    "WorkFunction",
    "classify_exception",
    "process_start_time",
    "run_work",
]
