"""`delegate_tool` for pydantic-ai: an orchestrating agent delegates through Zeus.

```python
agent = Agent(model, tools=[delegate_tool(zeus)])
```

The tool runs on the agent run's event loop; cancelling the run cancels the
delegation. A call the model gets wrong (an unknown agent, an empty scope)
goes back to it as a retry prompt that says what to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from supervisor.core.zeus import Zeus
from supervisor.integrations._delegate import TOOL_NAME, Delegator
from supervisor.integrations._extras import missing_extra

try:
    from pydantic_ai import ModelRetry, Tool
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra("supervisor.integrations.pydantic_ai", "pydantic-ai", exc) from exc

__all__ = ["delegate_tool"]


def delegate_tool(zeus: Zeus, *, agents: Sequence[str] | None = None) -> Tool[Any]:
    """A pydantic-ai `Tool` named `delegate` whose description lists `agents`
    (default: every agent of the routing) with their roles and deadlines."""
    delegator = Delegator(zeus, agents)

    def retry(exc: Exception) -> str:
        raise ModelRetry(str(exc)) from exc

    return Tool(
        delegator.tool_function(retry),
        name=TOOL_NAME,
        description=delegator.description,
        takes_ctx=False,
    )
