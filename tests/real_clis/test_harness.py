"""Each real agent CLI against the scripted model server: one shell tool call (`echo hi`),
then a final text ending in a blocked `<subtask_summary>`; and the usage each one reports
against what the server sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.real_clis import wire
from tests.real_clis.clis import BLOCKED_TEXT, CLIS, Run, cli_setup, run
from tests.real_clis.model_server import ModelServer, Usage, final, tool_call

pytestmark = [pytest.mark.process, pytest.mark.realtime]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[ModelServer, Run]]]:
    """Each CLI's run of one shell tool call, then a blocked summary, all at once."""
    tmp = tmp_path_factory.mktemp("harness")
    servers = {name: ModelServer([tool_call("echo hi", usage=Usage(1200, 300, 40)),
                                  final(BLOCKED_TEXT, usage=Usage(1337, 411, 53))])
               for name in CLIS}
    for server in servers.values():
        server.__enter__()
    try:
        def one(name: str) -> Run:
            setup = cli_setup(name, tmp / name / "home", servers[name].url)
            (tmp / name / "work").mkdir()
            return run(setup, "Run echo hi, then report.", tmp / name / "work")

        with ThreadPoolExecutor(len(CLIS)) as pool:
            done = dict(zip(CLIS, pool.map(one, CLIS), strict=True))
        yield {name: (servers[name], done[name]) for name in CLIS}
    finally:
        for server in servers.values():
            server.close()


def shell_commands(name: str, result: Run) -> list[str]:
    """The shell commands the stream shows the CLI running."""
    if name == "claude":
        return [block["input"]["command"] for line in result.of_type("assistant")
                for block in line["message"]["content"] if block["type"] == "tool_use"]
    if name == "codex":
        return [line["item"]["command"] for line in result.of_type("item.completed")
                if line["item"]["type"] == "command_execution"]
    if name == "gemini":
        return [line["parameters"]["command"] for line in result.of_type("tool_use")]
    return [line["part"]["state"]["input"]["command"] for line in result.of_type("tool_use")]


def final_text(name: str, result: Run) -> str:
    if name == "claude":
        return result.of_type("result")[-1]["result"]
    if name == "codex":
        return [line["item"]["text"] for line in result.of_type("item.completed")
                if line["item"]["type"] == "agent_message"][-1]
    if name == "gemini":
        return "".join(line["content"] for line in result.of_type("message")
                       if line["role"] == "assistant")
    return "".join(line["part"]["text"] for line in result.of_type("text"))


def reported_usage(name: str, result: Run) -> dict[str, Any]:
    """The usage the stream reports for the whole run, as the server's Usage fields."""
    if name == "claude":
        usage = result.of_type("result")[-1]["usage"]
        return {"input": usage["input_tokens"], "cached": usage["cache_read_input_tokens"],
                "output": usage["output_tokens"]}
    if name == "codex":  # input counts the cache reads
        usage = result.of_type("turn.completed")[-1]["usage"]
        return {"input": usage["input_tokens"] - usage["cached_input_tokens"],
                "cached": usage["cached_input_tokens"], "output": usage["output_tokens"]}
    if name == "gemini":
        stats = result.of_type("result")[-1]["stats"]
        return {"input": stats["input"], "cached": stats["cached"],
                "output": stats["output_tokens"]}
    steps = [line["part"]["tokens"] for line in result.of_type("step_finish")]
    return {"input": sum(t["input"] for t in steps),
            "cached": sum(t["cache"]["read"] for t in steps),
            "output": sum(t["output"] for t in steps)}


@pytest.mark.parametrize("name", CLIS)
def test_a_tool_call_then_a_blocked_summary(
        name: str, runs: dict[str, tuple[ModelServer, Run]]) -> None:
    server, result = runs[name]
    assert result.returncode == 0, result.stderr[-2000:]
    main = server.main_requests()
    assert len(main) == 2, [r.path for r in server.requests]
    second = main[1]
    assert any("hi" in output for output in wire.tool_outputs(second.api, second.body)), (
        json.dumps(second.body)[-2000:])
    assert [c for c in shell_commands(name, result) if "echo hi" in c], result.stdout[-3000:]
    assert final_text(name, result) == BLOCKED_TEXT


@pytest.mark.parametrize("name", CLIS)
def test_the_usage_reported_is_what_the_server_sent(
        name: str, runs: dict[str, tuple[ModelServer, Run]]) -> None:
    server, result = runs[name]
    assert result.returncode == 0, result.stderr[-2000:]
    sent = server.usage_sent()
    assert sent == Usage(1200 + 1337, 300 + 411, 40 + 53)
    assert reported_usage(name, result) == {"input": sent.input, "cached": sent.cached,
                                            "output": sent.output}
