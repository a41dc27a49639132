"""The benchmark's stack: `scripts.faults.stack.Stack` with production-like settings, a Postgres
application name per process (so statements can be counted per process), workers that can be
replaced by another pool while the stack runs, and extra workers (the bare Celery chain).

Everything is still started from the fault harness's spawner thread with a parent-death signal
and stopped by `stop()`, so nothing outlives the benchmark.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from cortex_workers.cli import CELERY_APP, QUEUE_POOLS, worker_argv
from scripts.faults.stack import Proc, Stack, StackConfig

# The product's defaults for delivery (the fault harness shortens them to provoke recovery),
# no per-tenant rate limits (the benchmark is one tenant submitting thousands of turns), no
# chaos tools.
BENCH_SETTINGS = {
    "CORTEX_LEASE_S": "30",
    "CORTEX_REPUBLISH_AFTER_S": "30",
    "CORTEX_RECONCILE_EVERY_S": "5",
    "CORTEX_RETRY_BASE_S": "1.0",
    "CORTEX_RETRY_MAX_S": "30",
    "CORTEX_SSE_PING_S": "15",
    "CORTEX_TOOL_TIMEOUT_S": "30",
    "CORTEX_TOOL_MODULES": "[]",
    "CORTEX_TENANT_TURNS_PER_MINUTE": "0",
    "CORTEX_TENANT_SESSIONS_PER_MINUTE": "0",
    "CORTEX_DB_POOL_SIZE": "20",
    "CORTEX_REDIS_POOL_SIZE": "100",
}

CHAIN_APP = "scripts.bench.chain_app:app"
CHAIN_QUEUE = "bench_chain"
WORKER_PROCS = ("llm", "tools", "summarize")
APP_PROCS = ("api", *WORKER_PROCS, "beat")
"""The product's processes, as the stack starts them (extra workers and helpers aside)."""


@dataclass
class WorkerSpec:
    """How to run one Celery worker process: pool and concurrency, and whether the model
    provider is instrumented (time of the first token, see `scripts.bench.launch`)."""

    pool: str = QUEUE_POOLS["llm"][0]
    concurrency: int = QUEUE_POOLS["llm"][1]
    instrumented: bool = False

    @property
    def label(self) -> str:
        return f"{self.pool} c={self.concurrency}"


@dataclass
class BenchStackConfig(StackConfig):
    proc_env: dict[str, dict[str, str]] = field(default_factory=dict)
    """Extra environment per process name (e.g. a larger database pool for one worker)."""
    llm: WorkerSpec = field(default_factory=WorkerSpec)
    """The `llm` worker the stack starts with (the shipped default of `cortex-workers worker`)."""


class BenchStack(Stack):
    """`Stack` plus: per-process environment, worker replacement, extra workers, RSS."""

    cfg: BenchStackConfig

    def __init__(self, cfg: BenchStackConfig) -> None:
        cfg.settings = {**BENCH_SETTINGS, **cfg.settings}
        super().__init__(cfg)
        self.proc_env: dict[str, dict[str, str]] = {k: dict(v) for k, v in cfg.proc_env.items()}
        self.worker_specs: dict[str, WorkerSpec] = {}
        self._base_argv: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ processes

    def _add(self, name: str, argv: list[str]) -> None:
        if name == "llm":  # started like every other worker of the benchmark (see run_worker)
            argv = self._worker_argv(name, self.cfg.llm, queues="llm", app=CELERY_APP)
            self.worker_specs[name] = self.cfg.llm
        super()._add(name, argv)

    @staticmethod
    def _worker_argv(name: str, spec: WorkerSpec, *, queues: str, app: str) -> list[str]:
        argv = worker_argv(
            queues.split(","), pool=spec.pool, concurrency=spec.concurrency, loglevel="INFO"
        )
        argv[argv.index(CELERY_APP)] = app
        argv[argv.index("--hostname") + 1] = f"bench-{name}-{os.getpid()}@%h"
        if spec.instrumented:  # `python -m celery ...` → `python -m scripts.bench.launch ...`
            argv[argv.index("celery")] = "scripts.bench.launch"
        return argv

    def _proc_env(self, proc: Proc) -> dict[str, str]:
        """The process's own extra environment, and its name as the Postgres application name."""
        return {**self.env, "PGAPPNAME": proc.name, **self.proc_env.get(proc.name, {})}

    def _stop_proc(self, proc: Proc) -> None:
        proc.expected_exit = True
        if proc.popen is None or not proc.alive():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(15)

    def run_worker(
        self,
        name: str,
        spec: WorkerSpec,
        *,
        queues: str = "llm",
        app: str = CELERY_APP,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> Proc:
        """(Re)start the worker process `name` with `spec`: any previous process of that name
        is killed first (SIGKILL: tasks it held stay unacknowledged and are not re-delivered
        during the run; the caller cancels their turns)."""
        argv = self._worker_argv(name, spec, queues=queues, app=app)
        proc = self.run_proc(name, argv, env=env)
        self.worker_specs[name] = spec
        self.wait_worker_ready(name, timeout=timeout)
        return proc

    def run_proc(self, name: str, argv: list[str], *, env: dict[str, str] | None = None) -> Proc:
        """(Re)start the supervised process `name` with `argv` (SIGKILL for a previous one)
        and `env` on top of the stack's environment; it is not waited for."""
        with self._lock:
            self.held.add(name)
        try:
            proc = self.procs.get(name)
            if proc is not None:
                self._stop_proc(proc)
                proc.argv = argv
            else:
                self._add(name, argv)
                proc = self.procs[name]
            self.proc_env[name] = {**self.proc_env.get(name, {}), **(env or {})}
            with self._lock:
                self._spawn_proc(proc)
        finally:
            with self._lock:
                self.held.discard(name)
        return proc

    def restart_app(self, argv_extra: dict[str, list[str]] | None = None) -> None:
        """Restart the API, the three workers and beat with the stack's current `env` (change
        it first), adding `argv_extra[name]` to a process's command line, and wait until the
        workers and the API are ready."""
        extra = argv_extra or {}
        for name in APP_PROCS:
            proc = self.procs[name]
            base = self._base_argv.setdefault(name, list(proc.argv))
            self.run_proc(name, [*base, *extra.get(name, [])])
        for name in WORKER_PROCS:
            self.wait_worker_ready(name, timeout=120)
        self._wait(self._api_ready, 60, "API /readyz")

    def stop_worker(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is None:
            return
        with self._lock:
            self.held.add(name)
        self._stop_proc(proc)

    def pid(self, name: str) -> int:
        pid = self.procs[name].pid
        if pid is None:
            raise RuntimeError(f"{name} is not running")
        return pid

    def rss(self, name: str) -> dict[str, float]:
        """Resident memory of a process and its children (prefork pool processes), in MiB:
        `rss` sums each process's RSS (shared pages counted once per process), `pss` shares
        them out (Linux)."""
        try:
            root = psutil.Process(self.pid(name))
            procs = [root, *root.children(recursive=True)]
        except (psutil.Error, RuntimeError):
            return {"rss_mib": 0.0, "pss_mib": 0.0, "processes": 0}
        rss = pss = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                rss += p.memory_info().rss
                try:
                    pss += p.memory_full_info().pss
                except (psutil.Error, AttributeError):
                    pss += p.memory_info().rss
        mib = 1024 * 1024
        return {"rss_mib": rss / mib, "pss_mib": pss / mib, "processes": len(procs)}

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) used so far by each part of the stack and by this
        process: the supervised processes with their children, Postgres (all backends),
        Valkey."""
        roots: dict[str, int | None] = {n: p.pid for n, p in self.procs.items() if p.alive()}
        roots["postgres"] = self._pg.pid if self._pg is not None else None
        roots["valkey"] = self._valkey.pid if self._valkey is not None else None
        roots["bench client"] = os.getpid()
        out: dict[str, float] = {}
        for name, pid in roots.items():
            if pid is None:
                continue
            total = 0.0
            try:
                root = psutil.Process(pid)
                tree = [root] if name == "bench client" else [root, *root.children(True)]
                for p in tree:
                    with contextlib.suppress(psutil.Error):
                        t = p.cpu_times()
                        total += t.user + t.system
            except psutil.Error:
                continue
            out[name] = total
        return out

    def purge_queue(self, queue: str) -> int:
        """Drop every message waiting in `queue` on the broker."""
        from kombu.connection import Connection

        with Connection(self.broker_url) as conn:  # type: ignore[no-untyped-call]
            return int(conn.default_channel.queue_purge(queue) or 0)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        return self.procs[name].log_text()[-chars:]

    def postgres_log(self) -> Path:
        return self.workdir / "logs" / "postgres.log"

    def psql(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.pg_dsn, autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []


def raise_fd_limit(want: int = 20000) -> int:
    """Raise this process's open-file limit (children inherit it) as far as allowed."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def cores_used(
    before: dict[str, float], after: dict[str, float], seconds: float
) -> dict[str, float]:
    """CPU cores each part used on average between two `cpu_seconds()` snapshots."""
    return {
        k: round((after[k] - before.get(k, 0.0)) / seconds, 2)
        for k in sorted(after, key=lambda k: before.get(k, 0.0) - after[k])
        if k in before
    }
