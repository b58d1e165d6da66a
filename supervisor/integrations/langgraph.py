"""`fan_out` for LangGraph: a node that dispatches a group and writes its summaries.

```python
graph.add_node("research", fan_out(zeus, lambda state: [...briefs...], key="findings"))
```

On `ainvoke` the node awaits the group on the graph's event loop, and
cancelling the graph's task cancels the whole group; on `invoke` it waits in
the graph's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from actors import Brief, Summary
from supervisor.core.zeus import Zeus
from supervisor.integrations import _bridge
from supervisor.integrations._extras import missing_extra
from supervisor.rules.groups import Strategy

try:
    from langchain_core.runnables import RunnableLambda
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra("supervisor.integrations.langgraph", "langgraph", exc) from exc

__all__ = ["fan_out"]

BriefsOf = Callable[[Any], Iterable[Brief | Mapping[str, Any]]]


def fan_out(
    zeus: Zeus,
    make_briefs: BriefsOf,
    *,
    key: str,
    strategy: Strategy = "one_for_one",
    name: str = "fan_out",
) -> RunnableLambda[Any, dict[str, list[Summary]]]:
    """A node: `make_briefs(state)` gives the briefs; their summaries, in brief order,
    go to `state[key]`. `strategy` is the group's restart strategy."""

    def dispatch(state: Any) -> Any:
        return zeus.dispatch_group(make_briefs(state), strategy=strategy)

    def run(state: Any) -> dict[str, list[Summary]]:
        group = dispatch(state)
        try:
            return {key: group.results()}
        except BaseException:
            group.cancel("the graph stopped waiting")
            raise

    async def arun(state: Any) -> dict[str, list[Summary]]:
        return {key: await _bridge.await_group(dispatch(state))}

    return RunnableLambda(run, afunc=arun, name=name)
