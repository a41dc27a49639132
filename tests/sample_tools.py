"""Tools that exercise every row of docs/tools.md's "How calls fail" table through the real
pipeline (loaded by the test workers through the `tool_modules` setting)."""

from __future__ import annotations

import time
from typing import Any

from cortex_workers.tools import Tool, ToolContext, ToolRegistry
from cortex_workers.tools.results import Page, UpstreamError

OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _sleep(seconds: float) -> dict[str, Any]:
    time.sleep(seconds)
    return {"slept": seconds}


def _big(kib: int) -> dict[str, Any]:
    return {"lines": [f"line {i:05d} " + "x" * 90 for i in range(kib * 10)], "total": kib * 10}


def _paged(ctx: ToolContext) -> Page:
    offset = int((ctx.cursor or {}).get("offset", 0))
    items = list(range(offset, min(offset + 10, 30)))
    return Page(
        {"items": items, "total": 30}, next={"offset": offset + 10} if offset + 10 < 30 else None
    )


def _upstream(status: int) -> None:
    raise UpstreamError(status, {401: "unauthorized", 503: "service unavailable"}.get(status, ""))


def _buggy() -> None:
    raise RuntimeError("a bug in the tool")


def register(registry: ToolRegistry) -> None:
    seconds = {
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0}},
        "required": ["seconds"],
        "additionalProperties": False,
    }
    registry.register(
        Tool(
            "slow_tool",
            "Sleeps for `seconds`.",
            seconds,
            _sleep,
            timeout_s=2.5,
            max_timeout_s=2.5,
            source="module",
        )
    )
    registry.register(
        Tool(
            "long_tool",
            "Sleeps for `seconds`, longer than a step's lease in the suite.",
            seconds,
            _sleep,
            timeout_s=8.0,
            max_timeout_s=8.0,
            source="module",
        )
    )
    registry.register(
        Tool(
            "big_output",
            "Returns `kib` KiB of log lines.",
            {
                "type": "object",
                "properties": {"kib": {"type": "integer", "minimum": 1}},
                "required": ["kib"],
            },
            _big,
            source="module",
        )
    )
    registry.register(
        Tool(
            "paged_numbers",
            "Numbers 0..29, ten per page.",
            OBJECT,
            _paged,
            paginated=True,
            takes_context=True,
            source="module",
        )
    )
    registry.register(
        Tool(
            "upstream_failure",
            "Fails upstream with `status`.",
            {
                "type": "object",
                "properties": {"status": {"type": "integer"}},
                "required": ["status"],
            },
            _upstream,
            source="module",
        )
    )
    registry.register(
        Tool(
            "echo_text",
            "Returns `text` as it is.",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            lambda text: text,
            source="module",
        )
    )
    registry.register(Tool("buggy_tool", "Always raises.", OBJECT, _buggy, source="module"))
    registry.register(
        Tool(
            "ops_only",
            "Only for ops-* tenants.",
            OBJECT,
            lambda: {"ok": True},
            allowed_tenants=("ops-*",),
            source="module",
        )
    )
