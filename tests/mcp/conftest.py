"""The MCP tests: the HTTP server of `mcp_support` starts on first use; every process sees it
at its next refresh (`refresh_s` is 2 s in the tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp_support import McpHttpServer, wait_until_served
from support import Api, wait_until


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
