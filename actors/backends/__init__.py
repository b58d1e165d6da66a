"""For people who write backends: the seam (base: `Backend`, with what a store's
recovery hands a backend, `StoredChild`, and what it finds, `Found` and `WaitingChild`),
the messages a child sends (`actors.protocol`), the clock, and the backends Zeus ships,
one sub-package each but threads (thread): processes (process/, with the fork-server
launch, the worker and the warm pool; reattach: where workers that outlived their
supervisor wait, and how they are found), command agents (command/), both read by one
hub and stopped by one kill ladder (ladder), and Ray (ray/).
"""

from actors.backends.base import (
    Backend,
    ChildHandle,
    ChildSpec,
    Found,
    Send,
    StoredChild,
    WaitingChild,
)
from actors.backends.command.child import CommandChild
from actors.backends.process.backend import ProcessBackend
from actors.backends.process.child import ProcessChild
from actors.backends.process.reattach import (
    ReattachPlace,
    Waiting,
    existing_place,
    find_waiting,
    place_for_store,
    wait_for_listener,
)
from actors.backends.thread import ThreadBackend, ThreadChild
from actors.clock import Clock, FakeClock, SystemClock, Timer, TimerError
from actors.mail import Mail
from actors.osproc import ProcessTree, process_start_time
from actors.protocol import (
    Charge,
    ChildMessage,
    DelegateRequest,
    Finished,
    Heartbeat,
    Partial,
    Placed,
    Spawned,
    Started,
    ToolCall,
)
from actors.run import classify_exception, run_work

__all__ = [
    "Backend",
    "Charge",
    "ChildHandle",
    "ChildMessage",
    "ChildSpec",
    "Clock",
    "CommandChild",
    "DelegateRequest",
    "FakeClock",
    "Finished",
    "Found",
    "Heartbeat",
    "Mail",
    "Partial",
    "Placed",
    "ProcessBackend",
    "ProcessChild",
    "ProcessTree",
    "ReattachPlace",
    "Send",
    "Spawned",
    "Started",
    "StoredChild",
    "SystemClock",
    "ThreadBackend",
    "ThreadChild",
    "Timer",
    "TimerError",
    "ToolCall",
    "Waiting",
    "WaitingChild",
    "classify_exception",
    "existing_place",
    "find_waiting",
    "place_for_store",
    "process_start_time",
    "run_work",
    "wait_for_listener",
]
