"""A Redis primary, its replica and three sentinels (quorum 2), started from Debian's
`redis-server` / `redis-sentinel`, on loopback ports of their own (never the machine's Redis).

    with SentinelCluster(workdir) as cluster:
        cluster.sentinels        # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3" for REDIS_SENTINELS
        cluster.fail_over()      # SIGKILL the primary; returns once a replica is promoted

Failover settings are short (down after 1 s) so a test sees it within seconds. Every process is
a child with a parent-death signal and is stopped by `stop()`.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MASTER_NAME = "cortexmaster"
DOWN_AFTER_MS = 1000


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def sentinel_command(conf: Path) -> list[str] | None:
    """Debian's `redis-sentinel CONF`, or `redis-server CONF --sentinel` (the same program);
    None when neither is installed."""
    if path := shutil.which("redis-sentinel"):
        return [path, str(conf)]
    if path := shutil.which("redis-server"):
        return [path, str(conf), "--sentinel"]
    return None


def _pdeathsig() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)


@dataclass
class _Server:
    name: str
    port: int
    proc: subprocess.Popen[bytes] | None = None


@dataclass
class SentinelCluster:
    """Primary and replica `redis-server`s and three sentinels watching `MASTER_NAME`."""

    workdir: Path
    host: str = "127.0.0.1"
    servers: dict[str, _Server] = field(default_factory=dict)
    sentinel_ports: list[int] = field(default_factory=list)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __enter__(self) -> SentinelCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def sentinels(self) -> str:
        return ",".join(f"{self.host}:{p}" for p in self.sentinel_ports)

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        server = shutil.which("redis-server")
        if server is None or sentinel_command(self.workdir) is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-sentinel)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        primary = _Server("a", free_port(self.host))
        replica = _Server("b", free_port(self.host))
        self.servers = {"a": primary, "b": replica}
        self._run_server(server, primary, None)
        self._run_server(server, replica, primary.port)
        _wait(lambda: self._info(replica.port).get("master_link_status") == "up", 30, "replica")
        for i in range(3):
            port = free_port(self.host)
            self.sentinel_ports.append(port)
            conf = self.workdir / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\nbind {self.host}\ndaemonize no\ndir {self.workdir}\n"
                f"sentinel monitor {MASTER_NAME} {self.host} {primary.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER_NAME} 5000\n"
                f"sentinel parallel-syncs {MASTER_NAME} 1\n"
            )
            command = sentinel_command(conf)
            assert command is not None
            self._spawn(command, self.workdir / f"sentinel-{i}.log")
        _wait(lambda: self.primary_port() == primary.port, 30, "sentinels to see the primary")
        _wait(lambda: self._sentinels_known(), 30, "sentinels to find each other")

    def _run_server(self, program: str, server: _Server, replica_of: int | None) -> None:
        data = self.workdir / f"redis-{server.name}"
        data.mkdir(exist_ok=True)
        argv = [
            program,
            "--port", str(server.port),
            "--bind", self.host,
            "--dir", str(data),
            "--save", "",
            "--appendonly", "no",
        ]  # fmt: skip
        if replica_of is not None:
            argv += ["--replicaof", self.host, str(replica_of)]
        server.proc = self._spawn(argv, self.workdir / f"redis-{server.name}.log")
        _wait(lambda: self._ping(server.port), 30, f"redis {server.name}")

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_pdeathsig,
            )
        self._procs.append(proc)
        return proc

    def _client(self, port: int) -> Any:
        import redis

        return redis.Redis(host=self.host, port=port, socket_timeout=2, socket_connect_timeout=2)

    def _ping(self, port: int) -> bool:
        try:
            return bool(self._client(port).ping())
        except OSError:
            return False
        except Exception:
            return False

    def _info(self, port: int) -> dict[str, Any]:
        try:
            return dict(self._client(port).info("replication"))
        except Exception:
            return {}

    def _sentinels_known(self) -> bool:
        try:
            info = self._client(self.sentinel_ports[0]).sentinel_master(MASTER_NAME)
        except Exception:
            return False
        return int(info.get("num-other-sentinels", 0)) >= 2

    def primary_port(self) -> int | None:
        """The primary's port as a sentinel answers it now (None when none answers)."""
        for port in self.sentinel_ports:
            try:
                host, primary = self._client(port).sentinel_get_master_addr_by_name(MASTER_NAME)
                return int(primary)
            except Exception:
                continue
        return None

    def primary(self) -> _Server:
        port = self.primary_port()
        return next(s for s in self.servers.values() if s.port == port)

    def client(self) -> Any:
        """A client of the current primary."""
        return self._client(self.primary().port)

    def fail_over(self, timeout_s: float = 30.0) -> float:
        """SIGKILL the primary and wait until the sentinels name the replica; the seconds that
        took."""
        old = self.primary()
        assert old.proc is not None
        started = time.monotonic()
        old.proc.kill()
        old.proc.wait(10)
        _wait(lambda: self.primary_port() not in (None, old.port), timeout_s, "a failover")
        new = self.primary()
        _wait(lambda: self._info(new.port).get("role") == "master", timeout_s, "the promotion")
        # a client asks the sentinels in turn and takes the first answer it trusts: until all
        # of them name the new primary (none flagging it down), one may still name none
        _wait(lambda: self._named_by_all(new.port), timeout_s, "every sentinel to name it")
        return time.monotonic() - started

    def kill_primary(self) -> _Server:
        """SIGKILL the primary and wait until the sentinels stop naming it (with no replica
        left to promote, no primary is known until `start_again`)."""
        old = self.primary()
        assert old.proc is not None
        old.proc.kill()
        old.proc.wait(10)
        _wait(lambda: not self._named_by_all(old.port), 30, "the sentinels to give up on it")
        return old

    def _named_by_all(self, port: int) -> bool:
        for sentinel in self.sentinel_ports:
            try:
                info = self._client(sentinel).sentinel_master(MASTER_NAME)
            except Exception:
                return False
            if "s_down" in str(info.get("flags", "")) or int(info.get("port", 0)) != port:
                return False
        return True

    def start_again(self, server: _Server) -> None:
        """Start a killed server again on its port, as a primary."""
        program = shutil.which("redis-server")
        assert program is not None
        self._run_server(program, server, None)
        _wait(lambda: self._named_by_all(server.port), 30, "the sentinels to see it back")

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
        self._procs.clear()


def _wait(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
