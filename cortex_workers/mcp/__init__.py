"""MCP servers as tool sources (docs/mcp.md): their settings are `mcp_settings`; `connection`
talks to a server, `adapter` turns its tools into ours and its results into what the model
reads, `sources` discovers and refreshes them into a process's tool registry."""
