"""`delegate_tool` for the OpenAI Agents SDK: an orchestrating agent delegates through Zeus.

```python
agent = Agent(name="lead", model=model, tools=[delegate_tool(zeus)])
```

The tool runs on the run's event loop; cancelling the run cancels the
delegation. A call the model gets wrong (an unknown agent, an empty scope)
comes back to it as the tool's output, saying what to fix.
"""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.core.zeus import Zeus
from supervisor.integrations._delegate import TOOL_NAME, Delegator
from supervisor.integrations._extras import missing_extra

try:
    from agents import FunctionTool, function_tool
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra("supervisor.integrations.openai_agents", "openai-agents", exc) from exc

__all__ = ["delegate_tool"]


def delegate_tool(zeus: Zeus, *, agents: Sequence[str] | None = None) -> FunctionTool:
    """An Agents SDK `FunctionTool` named `delegate` whose description lists `agents`
    (default: every agent of the routing) with their roles and deadlines."""
    delegator = Delegator(zeus, agents)
    delegate = delegator.tool_function(
        lambda exc: f"delegate refused: {exc}"  # the model reads what to fix
    )
    return function_tool(
        delegate,
        name_override=TOOL_NAME,
        description_override=delegator.description,
        use_docstring_info=False,
        strict_mode=False,  # `inputs` is a free-form object
    )
