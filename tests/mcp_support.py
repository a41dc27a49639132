"""The MCP servers of a test run (docs/mcp.md), configured when the root conftest is imported
(before any worker or API starts), in `CORTEX_MCP`:

- `weather`: tests/mcp/mcp_server.py over streamable HTTP on a loopback port (started by the
  `mcp_http` fixture; until then it is unavailable), `secret` hidden by `allowed_tools`,
  `add` requiring confirmation;
- `local`: the same server over stdio, one process per worker process;
- `guarded`: the HTTP server without `allow_private`, so the SSRF guard refuses it;
- `notify`: the HTTP server again, all its tools, read on a schedule of an hour: its tools
  change in time only through `notifications/tools/list_changed`;
- `tasks`: tests/mcp/mcp_task_server.py over streamable HTTP, whose tools answer with a task
  (started by the `mcp_tasks` fixture).

Each tool call's `_meta` is appended to `MCP_LOG` (JSON lines) by the server.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from support import Api, free_port, wait_until

SERVER = Path(__file__).resolve().parent / "mcp" / "mcp_server.py"
HTTP_PORT = free_port()
URL = f"http://127.0.0.1:{HTTP_PORT}/mcp"
MCP_LOG = Path(tempfile.mkdtemp(prefix="cortex-mcp-")) / "calls.jsonl"
TASK_SERVER = Path(__file__).resolve().parent / "mcp" / "mcp_task_server.py"
TASK_PORT = free_port()
TASK_DIR = Path(tempfile.mkdtemp(prefix="cortex-mcp-tasks-"))
"""Where a test releases a task of the `tasks` server (`<label>.release`)."""
TASK_LOG = TASK_DIR / "requests.jsonl"
CHART_PNG: bytes = runpy.run_path(str(SERVER))["CHART_PNG"]
"""The image the server's `chart` tool returns."""

os.environ["MCP_TEST_LOG"] = str(MCP_LOG)
os.environ["MCP_TASK_DIR"] = str(TASK_DIR)
os.environ["MCP_TASK_LOG"] = str(TASK_LOG)
os.environ["CORTEX_MCP"] = json.dumps(
    {
        "refresh_s": 10,
        "servers": {
            "weather": {
                "url": URL,
                "allow_private": True,
                "timeout": 10,
                "allowed_tools": ["forecast", "add", "explode", "chart"],
                "tools": {"add": {"require_confirmation": True}},
            },
            "local": {
                "command": sys.executable,
                "args": [str(SERVER), "stdio"],
                "env": {"MCP_TEST_LOG": "${MCP_TEST_LOG}"},
                "allowed_tools": ["forecast"],
                "timeout": 20,
            },
            "guarded": {"url": URL, "timeout": 5},
            "notify": {"url": URL, "allow_private": True, "timeout": 10, "refresh_s": 3600},
            "tasks": {
                "url": f"http://127.0.0.1:{TASK_PORT}/mcp",
                "allow_private": True,
                "timeout": 10,
                "task_timeout": 300,
            },
        },
    }
)


class McpHttpServer:
    """tests/mcp/mcp_server.py over streamable HTTP (or, with `argv`, another server), as a
    process of its own."""

    def __init__(self, argv: list[str] | None = None, port: int = HTTP_PORT) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.argv = argv or [str(SERVER), "http", str(HTTP_PORT)]
        self.port = port

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *self.argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_until(lambda: _listening(self.port), timeout=60, what="the MCP test server listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def task_server() -> McpHttpServer:
    """tests/mcp/mcp_task_server.py, the `tasks` server (not started)."""
    return McpHttpServer([str(TASK_SERVER), str(TASK_PORT)], port=TASK_PORT)


def task_requests(kind: str, label: str) -> list[dict[str, Any]]:
    """The `tasks` server's requests of `kind` (call, get, cancel) about `label`."""
    if not TASK_LOG.exists():
        return []
    rows = [json.loads(line) for line in TASK_LOG.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["kind"] == kind and r.get("label") == label]


def release(label: str) -> None:
    """The `tasks` server's task for `label` completes at its next `tasks/get`."""
    (TASK_DIR / f"{label}.release").touch()


def _listening(port: int = HTTP_PORT) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
    except OSError:
        return False
    return True


def calls(tool: str) -> list[dict[str, Any]]:
    """The calls of `tool` the servers logged, oldest first."""
    if not MCP_LOG.exists():
        return []
    rows = [json.loads(line) for line in MCP_LOG.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["tool"] == tool]


def tool_result(client: Api, tid: str) -> list[dict[str, object]]:
    return [e.data for e in client.turn_events(tid) if e.event == "tool_result"]


def call_once(
    client: Api,
    name: str,
    arguments: dict[str, object],
    *,
    tools: list[str] | None = None,
) -> dict[str, object]:
    """A turn that calls `name` once (with the `tools` of its session: by default the
    `weather` and `local` servers'); its tool_result."""
    sid = client.scripted_session(
        {"tool_calls": [{"name": name, "arguments": arguments}]},
        {"text": "done"},
        tools=tools or ["weather.*", "local.*"],
    )
    tid = client.submit(sid, "go")
    turn = client.wait_turn(tid, timeout=60)
    assert turn["status"] == "done", turn
    (result,) = tool_result(client, tid)
    return result


def wait_until_served(client: Api) -> None:
    """Until a tools worker has discovered the HTTP server (a probe call succeeds)."""
    wait_until(
        lambda: not call_once(client, "weather_forecast", {"city": "probe"})["is_error"],
        timeout=90,
        interval=1,
        what="the tools worker discovering the MCP HTTP server",
    )


async def _grow(name: str) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with Client(streamable_http_client(URL), cache=None) as mcp:
        result = await mcp.call_tool("grow", {"name": name})
        assert not result.is_error, result


def grow(name: str) -> None:
    """The HTTP server's `grow` tool called (directly): it adds `grown_<name>` and notifies."""
    import asyncio

    asyncio.run(_grow(name))
