"""Tool calls parked on a task of their MCP server (docs/mcp.md, "Tools that answer with a
task"): `park` holds the tool step and records the task, `poll` looks at the task on the
`tools` queue and stores the call's result once it has ended, `sweep` sends again the polls
that were lost. No worker waits for the task."""
