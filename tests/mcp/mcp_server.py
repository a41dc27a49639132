"""A real MCP server built with the official `mcp` SDK, for the tests: `python mcp_server.py
http PORT` serves streamable HTTP on 127.0.0.1:PORT/mcp; `python mcp_server.py stdio` talks
over stdin/stdout. Each call's `_meta` is appended to the file named by `MCP_TEST_LOG`."""

from __future__ import annotations

import json
import os
import sys

from mcp.server.mcpserver import Context, Image, MCPServer

CHART_PNG = b"\x89PNG\r\n\x1a\n" + b"a chart of the week" * 4
"""The bytes of the image `chart` returns."""


def _log(tool: str, ctx: Context, **data: object) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if not path:
        return
    meta = ctx.request_context.meta
    dumped = dict(meta) if meta is not None else None
    with open(path, "a") as log:
        log.write(json.dumps({"tool": tool, "meta": dumped, **data}, default=str) + "\n")


def build(flavour: str) -> MCPServer:
    server = MCPServer(f"test-{flavour}")

    @server.tool(description="The forecast for a city.")
    def forecast(city: str, ctx: Context) -> str:
        _log("forecast", ctx, city=city)
        return f"sunny in {city} ({flavour})"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int, ctx: Context) -> dict[str, int]:
        _log("add", ctx, a=a, b=b)
        return {"sum": a + b}

    @server.tool(description="A chart of a city's week, as an image.", structured_output=False)
    def chart(city: str, ctx: Context) -> list[object]:
        return [f"the week in {city}", Image(data=CHART_PNG, format="png")]

    @server.tool(description="Adds the tool `grown_<name>` and says the tool list changed.")
    async def grow(name: str, ctx: Context) -> str:
        def grown() -> str:
            return f"grown {name}"

        server.add_tool(grown, name=f"grown_{name}", description="Added at run time.")
        await ctx.notify_tools_changed()
        return f"added grown_{name}"

    @server.tool(description="Always fails.")
    def explode(ctx: Context) -> str:
        raise ValueError("the reactor is offline")

    @server.tool(description="Hidden by allowed_tools.")
    def secret(ctx: Context) -> str:
        return "should never be called"

    return server


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "http":
        build("http").run(
            "streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=True
        )
    else:
        build("stdio").run("stdio")
