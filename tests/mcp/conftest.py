"""The MCP tests: the HTTP servers of `mcp_support` start on first use; every process sees
them at its next refresh (`refresh_s` is 10 s in the tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp_support import McpHttpServer, call_once, task_server, wait_until_served
from support import Api, Workers, wait_until


@pytest.fixture(scope="session")
def mcp_http(workers: object) -> Iterator[McpHttpServer]:
    server = McpHttpServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def served(mcp_http: McpHttpServer, client: Api) -> McpHttpServer:
    """The HTTP server up (started again if a test stopped it) and known to the workers and
    to the API (each process reads it on its own schedule)."""
    if mcp_http.proc is None or mcp_http.proc.poll() is not None:
        mcp_http.start()
    wait_until_served(client)
    wait_until(
        lambda: any(
            t["name"] == "weather_forecast" for t in client.http.get("/v1/tools").json()["tools"]
        ),
        timeout=60,
        what="the API discovering the MCP HTTP server",
    )
    return mcp_http


@pytest.fixture(scope="session")
def mcp_tasks(workers: object) -> Iterator[McpHttpServer]:
    """The `tasks` server (tests/mcp/mcp_task_server.py), whose tools answer with a task."""
    server = task_server()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def one_tools_thread(workers: Workers) -> Iterator[Workers]:
    """The `tools` worker with a pool of one: a call that held it would stop every other."""
    workers.terminate("tools")
    workers.start("tools", concurrency=1)
    yield workers
    workers.terminate("tools")
    workers.start("tools")


def _quick_answers(client: Api) -> bool:
    result = call_once(client, "tasks_quick", {"word": "probe"}, tools=["tasks.*"])
    return not result["is_error"]


@pytest.fixture
def tasks_served(mcp_tasks: McpHttpServer, client: Api) -> McpHttpServer:
    """The `tasks` server up and known to the API and to the `tools` worker."""
    if mcp_tasks.proc is None or mcp_tasks.proc.poll() is not None:
        mcp_tasks.start()
    wait_until(
        lambda: any(
            t["name"] == "tasks_report" for t in client.http.get("/v1/tools").json()["tools"]
        ),
        timeout=60,
        what="the API discovering the MCP tasks server",
    )
    wait_until(
        lambda: _quick_answers(client),
        timeout=90,
        interval=1,
        what="the tools worker discovering the MCP tasks server",
    )
    return mcp_tasks
