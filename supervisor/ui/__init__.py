"""`zeus ui`: a run's supervision tree in a browser, live, read from a journal.

The readers here need nothing beyond Zeus: a `Source` hands out a run's events
(`JournalFile` tails the JSONL journal; `open_source` picks one for a path) and
a `View` folds them into the tree that `zeus tree` prints. The web app
(`supervisor.ui.app`) and its server (`supervisor.ui.server`) need the `ui`
extra (Starlette, uvicorn, sse-starlette); only they import it.
"""

from supervisor.ui.source import Batch, JournalFile, Source, open_source
from supervisor.ui.view import View

__all__ = ["Batch", "JournalFile", "Source", "View", "open_source"]
