"""Per-process resources: settings, database engine, Redis client, providers and tools.

Built on first use and rebuilt in a forked child (connections must not cross a fork).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import redis
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from .agents import AgentRegistry, load_agents
from .agents.python import importable_from
from .providers.latency import LatencyRecorder
from .providers.limits import Health, RateLimiter
from .providers.registry import ProviderRegistry
from .redis_clients import sync_pool
from .settings import DEFAULT_CONFIG, Settings, config_path, get_settings
from .store.db import make_engine, make_sessionmaker
from .stream_writer import PipelinedWriter
from .tools import ToolRegistry
from .tools.loading import LoadedTools, Rejected, load_tools
from .whiteboard import register_whiteboard_tools

if TYPE_CHECKING:
    from .mcp.sources import McpSources


@dataclass
class Runtime:
    """Everything a step or a request needs, shared by the threads of one process."""

    settings: Settings

    @cached_property
    def engine(self) -> Engine:
        return make_engine(
            self.settings.database_url,
            pool_size=self.settings.db_pool_size,
            ping_after_idle_s=self.settings.db_ping_after_idle_s,
        )

    @cached_property
    def db(self) -> sessionmaker[Session]:
        return make_sessionmaker(self.engine)

    @cached_property
    def redis(self) -> redis.Redis:
        if not self.settings.redis_url:
            raise RuntimeError("REDIS_URL is not set: run `cortex-workers dev` or set it")
        # Blocking: with more threads than connections, a thread waits for one (up to the
        # timeout) instead of failing with "too many connections".
        pool = sync_pool(
            self.settings.redis_url,
            self.settings.sentinel(),
            socket_timeout=10,
            socket_connect_timeout=5,
            health_check_interval=30,
            retry_on_timeout=True,
            max_connections=self.settings.redis_pool_size,
            timeout=20,
        )
        return redis.Redis(connection_pool=pool)

    @cached_property
    def stream_replicas(self) -> int:
        """Replicas a step waits for before its commit: one under Sentinel, else none."""
        return 1 if self.settings.sentinel() is not None else 0

    @cached_property
    def stream_writer(self) -> PipelinedWriter:
        """Pipelined stream writes of this process's steps (their own connection)."""
        return PipelinedWriter(self.redis.connection_pool)

    @cached_property
    def providers(self) -> ProviderRegistry:
        return ProviderRegistry(self.settings)

    @cached_property
    def latency(self) -> LatencyRecorder:
        """This process's provider-call durations, written once a second (`GET /v1/providers`,
        the router's latency SLA, the latency-spike review read them)."""
        return LatencyRecorder(self.redis)

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        return RateLimiter(self.redis, window_s=self.settings.llm_rate_window_s)

    @cached_property
    def health(self) -> Health:
        s = self.settings
        return Health(
            self.redis,
            after_failures=s.llm_cooldown_after_failures,
            window_s=s.llm_cooldown_window_s,
            cooldown_s=s.llm_cooldown_s,
            writer=self.stream_writer,
        )

    @cached_property
    def loaded_tools(self) -> LoadedTools:
        plugins = self.settings.plugins_dir
        config = config_path()  # by default, plugins sit next to the config file in force
        default = config.parent / "plugins" if config is not None else DEFAULT_PLUGINS_DIR
        loaded = load_tools(
            modules=self.settings.tool_modules,
            plugins_dir=Path(plugins) if plugins else default,
        )
        register_whiteboard_tools(loaded.registry, lambda: self.engine)
        if self.settings.mcp.servers:  # the `mcp` extra is imported only when it is used
            try:
                from .mcp.sources import attach
            except ImportError as exc:
                reason = (
                    f"the mcp extra is not installed ({exc}): pip install 'cortex-workers[mcp]'"
                )
                loaded.rejected.append(Rejected("mcp", None, reason))
                return loaded
            sources = attach(self.settings.mcp, loaded.registry)
            self.__dict__["_mcp_sources"] = sources
            loaded.dynamic_rejected = sources.rejected
        return loaded

    @property
    def mcp(self) -> McpSources | None:
        """The MCP servers whose tools this process offers (None: none configured)."""
        _ = self.loaded_tools
        sources: McpSources | None = self.__dict__.get("_mcp_sources")
        return sources

    @property
    def tools(self) -> ToolRegistry:
        return self.loaded_tools.registry

    @cached_property
    def agents(self) -> AgentRegistry:
        configured = self.settings.agents_dir
        config = config_path()
        default = (
            config.parent / "agents" if config is not None else DEFAULT_CONFIG.parent / "agents"
        )
        directory = Path(configured) if configured else default
        importable_from(directory)  # a card's handler module may sit next to it
        return load_agents(directory, self.settings.agents)

    def reload_tools(self) -> None:
        """Read tool modules, plugin manifests and MCP servers' tools again (SIGHUP)."""
        self.__dict__.pop("loaded_tools", None)
        old: McpSources | None = self.__dict__.pop("_mcp_sources", None)
        if old is not None:
            old.stop()
        self.__dict__.pop("agents", None)
        _ = self.loaded_tools

    def flush_latency(self) -> None:
        """Write the provider-call durations not yet written (a worker's shutdown)."""
        if "latency" in self.__dict__:
            self.latency.flush()

    def close(self) -> None:
        self.flush_latency()
        if "engine" in self.__dict__:
            self.engine.dispose()
        if "stream_writer" in self.__dict__:
            self.stream_writer.close()
        if "redis" in self.__dict__:
            self.redis.close()
            self.redis.connection_pool.disconnect()


DEFAULT_PLUGINS_DIR = DEFAULT_CONFIG.parent / "plugins"
_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    """This process's runtime."""
    global _runtime
    if _runtime is None:
        with _lock:
            if _runtime is None:
                _runtime = Runtime(get_settings())
    return _runtime


def reset_runtime() -> None:
    """Drop this process's resources (after a fork, or when settings change)."""
    global _runtime
    with _lock:
        old, _runtime = _runtime, None
    if old is not None:
        old.close()


def _after_fork_in_child() -> None:
    global _runtime
    _runtime = None  # the parent's connections are not ours to close


os.register_at_fork(after_in_child=_after_fork_in_child)
