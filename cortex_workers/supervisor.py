"""`cortex-workers dev`: the whole stack in one command, restarted when a part dies."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from . import monitor
from .admin import create_key, key_is_valid, migrate, use_embedded_if_unset
from .dev_checks import Readiness, busy_port
from .queues import Queue
from .settings import get_settings

log = logging.getLogger("cortex_workers.dev")

DEV_TENANT = "dev"
PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child before exec: get `sig` when the parent dies, so nothing is left orphaned
    (Linux; elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
WORKER_QUEUES = (
    Queue.LLM.value,
    Queue.TOOLS.value,
    f"{Queue.SUMMARIZE},{Queue.MAINTENANCE}",
    Queue.WEBHOOKS.value,
    Queue.BATCH.value,
    Queue.AGENTS.value,
)


@dataclass
class Child:
    """One supervised process."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    """Variables for this child only, over the stack's."""
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    """Restarts in a row: back to 0 once the child has run `HEALTHY_S` before it exits."""
    next_start: float = 0.0
    started_at: float = 0.0

    def start(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            self.argv, env={**env, **self.env}, start_new_session=True, preexec_fn=die_with_parent
        )
        self.started_at = time.monotonic()
        log.info("started %s (pid %d): %s", self.name, self.proc.pid, " ".join(self.argv[1:]))

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def restart_delay(self, now: float) -> float:
        """How long to wait before starting the child again: doubling from 0.5 s up to 30 s
        while it keeps dying, from 0.5 s again after a healthy run."""
        if now - self.started_at >= HEALTHY_S:
            self.restarts = 0
        return min(MAX_RESTART_DELAY_S, 0.5 * 2.0 ** min(self.restarts, 6))


HEALTHY_S = 60.0
"""A child that ran this long before it exited was healthy: its next restart comes quickly."""
MAX_RESTART_DELAY_S = 30.0


def stop_all(children: list[Child], *, timeout: float) -> None:
    """SIGTERM to every child at once, then SIGKILL to those still running after `timeout`
    (a worker with steps running drains them meanwhile; an idle one exits at once)."""
    running = [c for c in children if c.running()]
    for child in running:
        assert child.proc is not None
        child.proc.terminate()
    deadline = time.monotonic() + timeout
    while any(c.running() for c in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    for child in running:
        if child.running():
            assert child.proc is not None
            log.warning("%s still running after %.0fs; killing it", child.name, timeout)
            child.proc.kill()
            child.proc.wait(5)


@dataclass
class Supervisor:
    children: list[Child]
    env: dict[str, str]
    stopping: bool = field(default=False)
    stop_timeout_s: float = 25.0
    """How long children get to stop: a worker's drain (`CORTEX_DRAIN_S`) and a little more."""
    ready: Callable[[], list[str]] | None = None
    """What does not answer yet (polled until it is empty, then `on_ready` is called)."""
    on_ready: Callable[[], None] | None = None

    def _on_signal(self, signum: int, _: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        self.stopping = True

    def run(self) -> None:
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        # a closed terminal (SIGHUP) stops the stack as cleanly as Ctrl-C does, rather than
        # ending this process at once and leaving its children to their death signals
        signal.signal(signal.SIGHUP, self._on_signal)
        for child in self.children:
            child.start(self.env)
        waiting = self.ready is not None
        while not self.stopping:
            time.sleep(0.5)
            for child in self.children:
                self._keep_alive(child)
            if waiting and not self.stopping:
                waiting = self._still_waiting()
        stop_all(self.children, timeout=self.stop_timeout_s)

    def _still_waiting(self) -> bool:
        assert self.ready is not None
        if self.ready():
            return True
        if self.on_ready is not None:
            self.on_ready()
        return False

    def _keep_alive(self, child: Child) -> None:
        if child.proc is None or child.proc.poll() is None or self.stopping:
            return
        now = time.monotonic()
        if child.next_start == 0.0:
            _forget_metrics_of(child.proc.pid)
            delay = child.restart_delay(now)
            child.next_start = now + delay
            log.warning(
                "%s exited with %s; restarting in %.1fs", child.name, child.proc.returncode, delay
            )
            return
        if now >= child.next_start:
            child.restarts += 1
            child.next_start = 0.0
            child.start(self.env)


def _forget_metrics_of(pid: int) -> None:
    """Drops the live gauges a dead child left in the stack's multiprocess directory."""
    if os.environ.get(MULTIPROC_DIR_ENV):
        from .observability.metrics import mark_process_dead

        mark_process_dead(pid)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cortex_workers.cli", *args]


def dev_key(data_dir: Path) -> str:
    """The dev tenant's key: the one in `<data-dir>/api-key` if still valid, else a new one."""
    path = data_dir / "api-key"
    if path.exists():
        key = path.read_text().strip()
        if key and key_is_valid(key):
            return key
    key = create_key(DEV_TENANT)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


TOKEN_SECRET_ENV = "CORTEX_TOKEN_SECRET"


def dev_token_secret(data_dir: Path) -> str:
    """The secret session tokens are signed with: `CORTEX_TOKEN_SECRET` when set, else the
    one kept in `<data-dir>/token-secret` (made on first use), so that tokens survive a
    restart and every API process checks them alike."""
    given = os.environ.get(TOKEN_SECRET_ENV, "").strip()
    if given:
        return given
    path = data_dir / "token-secret"
    if path.exists() and path.read_text().strip():
        return path.read_text().strip()
    secret = secrets.token_urlsafe(32)
    path.write_text(secret + "\n")
    path.chmod(0o600)
    return secret


def banner(
    key: str, host: str, port: int, data_dir: Path, flower: tuple[str, monitor.FlowerAuth] | None
) -> str:
    base = f"http://{host}:{port}"
    flower_line = ""
    if flower is not None:
        url, auth = flower
        where = data_dir / monitor.AUTH_FILE
        flower_line = f"Flower {url} as {auth.user}, password {auth.password} (also in {where})\n"
    return f"""
cortex-workers is ready: API {base} (docs {base}/docs), data in {data_dir}
Chat page: {base}/ui (paste the API key below)
Metrics of every process: {base}/metrics
{flower_line}API key (also in {data_dir / "api-key"}):
  {key}
Try it (the variables every page of the docs uses):
  export CW={base} CW_KEY=$(cat {data_dir / "api-key"})
  curl -s -X POST $CW/v1/sessions -H "Authorization: Bearer $CW_KEY" \\
       -H 'Content-Type: application/json' -d '{{"name": "hello"}}'
Ctrl-C stops everything.
"""


def _flower(data_dir: Path, host: str, port: int) -> tuple[Child, monitor.FlowerAuth]:
    """Flower on `port` of `host` (where the API listens), its credentials kept in the data
    directory across restarts unless `FLOWER_BASIC_AUTH` (or `FLOWER_PASSWORD`) sets them."""
    saved = data_dir / monitor.AUTH_FILE
    auth = monitor.flower_auth(saved=saved)
    monitor.save_auth(auth, saved)
    argv = _cli("flower", "--host", host, "--port", str(port))
    return Child("flower", argv, env=monitor.flower_env(auth, {})), auth


def _stack_env(data_dir: Path) -> dict[str, str]:
    """The environment of every child: the servers' URLs, and one multiprocess metrics
    directory, emptied now, so that the API's `/metrics` carries every process's values."""
    from .observability.metrics import reset_multiprocess_dir

    metrics_dir = (data_dir / "metrics").resolve()
    reset_multiprocess_dir(metrics_dir)
    os.environ[MULTIPROC_DIR_ENV] = str(metrics_dir)  # for `_forget_metrics_of`
    settings = get_settings()
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "PYTHONUNBUFFERED": "1",
        MULTIPROC_DIR_ENV: str(metrics_dir),
        "CORTEX_METRICS_PORT": "0",  # the API serves them all
    }
    env.pop(monitor.USER_ENV, None)
    env.pop(monitor.PASSWORD_ENV, None)
    env.pop(monitor.BASIC_AUTH_ENV, None)  # Flower's alone
    env.setdefault("CORTEX_LLM_SCRIPTED", "true")  # `dev`: the scripted model is on
    if settings.broker_url:
        env["CELERY_BROKER_URL"] = settings.broker_url
    return env  # with CORTEX_LOG_FORMAT and OTEL_* as given


def _busy_ports(host: str, port: int, flower_port: int | None) -> str | None:
    """Why `dev` cannot start (a port it needs is held), or None."""
    wanted = [("API", port, "--port")]
    if flower_port is not None:
        wanted.append(("Flower", flower_port, "--flower-port"))
    for what, number, option in wanted:
        busy = busy_port(what, host, number)
        if busy is not None:
            return busy.message(option)
    return None


def _readiness(host: str, port: int) -> Readiness:
    settings = get_settings()
    nodes = [q.replace(",", "-") for q in WORKER_QUEUES]
    return Readiness(f"http://{host}:{port}", settings.broker_url or settings.redis_url, nodes)


def run_dev(*, data_dir: Path, port: int, host: str, flower_port: int | None) -> int:
    """The whole stack, supervised, until SIGINT, SIGTERM or SIGHUP; Flower unless `flower_port` is
    None. Says it is ready once the API and a worker of every queue answer."""
    busy = _busy_ports(host, port, flower_port)
    if busy is not None:
        print(busy, file=sys.stderr, flush=True)
        return 2
    data_dir.mkdir(parents=True, exist_ok=True)
    stack = use_embedded_if_unset(data_dir)
    try:
        migrate()
        key = dev_key(data_dir)
        env = _stack_env(data_dir)
        env[TOKEN_SECRET_ENV] = dev_token_secret(data_dir)
        children = [Child("api", _cli("api", "--host", host, "--port", str(port)))]
        children += [Child(f"worker[{q}]", _cli("worker", "--queues", q)) for q in WORKER_QUEUES]
        children.append(Child("beat", _cli("beat")))
        flower = None
        if flower_port is not None:
            child, auth = _flower(data_dir, host, flower_port)
            children.append(child)
            flower = (f"http://{host}:{flower_port}", auth)
        print(f"cortex-workers is starting: API, {len(WORKER_QUEUES)} workers, beat", flush=True)
        supervisor = Supervisor(children, env, ready=_readiness(host, port).missing)
        supervisor.stop_timeout_s = get_settings().drain_s + 5
        supervisor.on_ready = lambda: print(banner(key, host, port, data_dir, flower), flush=True)
        supervisor.run()
    finally:
        if stack is not None:
            stack.stop()
    log.info("stopped")
    return 0
