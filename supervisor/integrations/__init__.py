"""Where agent hosts meet Zeus: each module is an optional extra (docs/integrations.md).

- `supervisor.integrations.mcp`: the `zeus mcp` stdio server (extra `mcp`).
- `supervisor.integrations.pydantic_ai`: `delegate_tool` (extra `pydantic-ai`).
- `supervisor.integrations.openai_agents`: `delegate_tool` (extra `openai-agents`).
- `supervisor.integrations.langgraph`: `fan_out` (extra `langgraph`).
- `supervisor.integrations.otel`: `tracing` (extra `otel`).

Each imports its framework when it is imported itself, never before; without the
framework that import raises an `ImportError` naming the extra to install.
"""

from __future__ import annotations

__all__: list[str] = []
