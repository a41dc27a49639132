"""A real MCP server built with the official `mcp` SDK whose tools answer with a task (the
Tasks extension, `io.modelcontextprotocol/tasks`), for the tests: `python mcp_task_server.py
PORT` serves streamable HTTP on 127.0.0.1:PORT/mcp.

- `report(label)`: a task that stays `working` until the file `<label>.release` exists in
  `MCP_TASK_DIR`, then `completed` with the report as its result (text and structured);
- `broken_report(label)`: a task that `failed` with a JSON-RPC error;
- `stuck_report(label)`: a task that stays `working`, with a time to live of 2 s;
- `quick(word)`: answers at once.

Every `tools/call`, `tasks/get` and `tasks/cancel` is appended to `MCP_TASK_LOG` (JSON lines).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, RequestParams

TASKS = "io.modelcontextprotocol/tasks"
TASK_TOOLS = {"report", "broken_report", "stuck_report", "oversized_report"}
POLL_INTERVAL_MS = 300


class TaskParams(RequestParams):
    task_id: str


def _log(kind: str, **data: object) -> None:
    path = os.environ.get("MCP_TASK_LOG")
    if path:
        with open(path, "a") as log:
            log.write(json.dumps({"kind": kind, **data}) + "\n")


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ReportTasks(Extension):
    """The server side of the extension, over an in-memory table of tasks."""

    identifier = TASKS

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, str]] = {}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskParams, self._get),
            MethodBinding("tasks/cancel", TaskParams, self._cancel),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        capabilities = ctx.session.client_capabilities
        declared = bool(
            capabilities and capabilities.extensions and TASKS in capabilities.extensions
        )
        label = str((params.arguments or {}).get("label", ""))
        _log("call", tool=params.name, label=label, declared=declared)
        if params.name not in TASK_TOOLS or not declared:
            return await call_next(ctx)
        task_id = str(uuid.uuid4())
        if params.name == "oversized_report":  # a hostile server: a task id over 500 characters
            task_id = "t" * 600
        self.tasks[task_id] = {"tool": params.name, "label": label, "created": _now()}
        return {
            **self._state(task_id, "working"),
            "statusMessage": f"the report {label} is being written",
            "resultType": "task",
        }

    def _state(self, task_id: str, status: str) -> dict[str, Any]:
        return {
            "taskId": task_id,
            "status": status,
            "createdAt": self.tasks[task_id]["created"],
            "lastUpdatedAt": _now(),
            "ttlMs": 2_000 if self.tasks[task_id]["tool"] == "stuck_report" else 600_000,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        task = self.tasks.get(params.task_id)
        _log("get", task_id=params.task_id, label=task["label"] if task else None)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
        if task.get("cancelled"):
            return self._state(params.task_id, "cancelled")
        if task["tool"] == "broken_report":
            return {
                **self._state(params.task_id, "failed"),
                "statusMessage": "the printer caught fire",
                "error": {"code": -32603, "message": "the printer caught fire"},
            }
        released = Path(os.environ["MCP_TASK_DIR"], f"{task['label']}.release").exists()
        if not released or task["tool"] == "stuck_report":
            return self._state(params.task_id, "working")
        label = task["label"]
        result = {
            "content": [{"type": "text", "text": f"the report {label} is ready"}],
            "structuredContent": {"label": label, "pages": 3},
            "isError": False,
        }
        return {**self._state(params.task_id, "completed"), "result": result}

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> HandlerResult:
        task = self.tasks.get(params.task_id)
        _log("cancel", task_id=params.task_id, label=task["label"] if task else None)
        if task is not None:
            task["cancelled"] = "yes"
        return {}


def build() -> MCPServer:
    server = MCPServer("test-tasks", extensions=[ReportTasks()])

    @server.tool(description="Writes a report (as a task).")
    def report(label: str) -> str:
        return f"the report {label} needs the Tasks extension"

    @server.tool(description="Writes a report that fails (as a task).")
    def broken_report(label: str) -> str:
        return f"the report {label} needs the Tasks extension"

    @server.tool(description="Writes a report that never ends (as a task).")
    def stuck_report(label: str) -> str:
        return f"the report {label} needs the Tasks extension"

    @server.tool(description="Writes a report (as a task whose id is too long).")
    def oversized_report(label: str) -> str:
        return f"the report {label} needs the Tasks extension"

    @server.tool(description="Answers at once.")
    def quick(word: str) -> str:
        return f"quick {word}"

    return server


if __name__ == "__main__":
    build().run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True)
