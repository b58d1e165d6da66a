"""The process backend: each attempt in a worker process with a process group of its own
(backend: `ProcessBackend`; child: the attempt's handle; forkserver and spawner: the
launch; worker, worker_attempt, worker_link, worker_wait: the child's side; worker_table
and worker_watch: the workers, as the backend holds and watches them; reattach,
left_behind and found: where workers that outlived their Zeus wait, what they leave, and
how the next one finds them)."""

from actors.backends.process.backend import ProcessBackend
from actors.backends.process.child import ProcessChild

__all__ = ["ProcessBackend", "ProcessChild"]
