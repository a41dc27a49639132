"""Test support: worker processes, the API server, an API client that reads SSE."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

QUEUE_GROUPS = {
    "llm": ["llm"],
    "tools": ["tools"],
    "summarize": ["summarize", "maintenance"],
    "webhooks": ["webhooks"],
    "batch": ["batch"],
    "agents": ["agents"],
}


@dataclass
class Fakes:
    """Wire-level fake provider servers the workers are configured to call."""

    openai: Any
    anthropic: Any
    env: dict[str, str]
    bridge: Any = None


@dataclass
class Stack:
    database_url: str
    redis_url: str
    broker_url: str
    env: dict[str, str]
    data_dir: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    predicate: Any, *, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class Workers:
    """Celery worker subprocesses (one per queue group) and beat."""

    env: dict[str, str]
    log_dir: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def _argv(self, name: str, concurrency: int | None = None) -> list[str]:
        from cortex_workers.cli import beat_argv, worker_argv

        if name == "beat":
            return beat_argv("INFO")
        # "llm-b" is a second worker on the llm group's queues, named apart; a group's own
        # worker keeps the product's default name (`summarize-maintenance@host`), so a test's
        # `cortex-workers worker --queues summarize` (`summarize@host`) is another node: on
        # RabbitMQ two workers of one name cannot both hold their exclusive pidbox queue
        queues = QUEUE_GROUPS.get(name) or QUEUE_GROUPS[name.split("-")[0]]
        hostname = None if name in QUEUE_GROUPS else f"{name}@%h"
        return worker_argv(
            queues, pool=None, concurrency=concurrency, loglevel="INFO", hostname=hostname
        )

    def start(self, name: str, *, concurrency: int | None = None, **extra_env: str) -> None:
        """Start the worker `name` (a queue group, or `GROUP-suffix` for another worker of
        that group), with `extra_env` over the group's environment and `concurrency` pool
        slots (None: the group's default); wait until it is ready."""
        self._wait_ready(name, self._launch(name, concurrency=concurrency, **extra_env))

    def _launch(self, name: str, *, concurrency: int | None = None, **extra_env: str) -> int:
        """Start the process of worker `name`; the offset of its log where its own lines begin."""
        tests_dir = str(Path(__file__).resolve().parent)
        paths = [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if tests_dir not in paths:  # the workers import tests/sample_tools.py
            self.env["PYTHONPATH"] = os.pathsep.join([tests_dir, *paths])
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (owned by the process)
        since = log.tell()  # a restarted worker appends: wait for its own "ready"
        from cortex_workers.supervisor import die_with_parent

        self.procs[name] = subprocess.Popen(
            self._argv(name, concurrency),
            env={**self.env, **extra_env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: die_with_parent(signal.SIGKILL),
        )
        return since

    def _wait_ready(self, name: str, since: int) -> None:
        wait_until(
            lambda: (
                b"ready" in (self.log_dir / f"{name}.log").read_bytes()[since:] or name == "beat"
            ),
            timeout=180,  # a loaded CI machine starts a group of workers slowly
            what=f"worker {name} ready",
        )

    def start_together(
        self, *names: str, env_of: Callable[[str], dict[str, str]] | None = None
    ) -> None:
        """Start the workers `names` at once (each imports on its own), then wait for every
        one; `env_of(name)` gives a worker's own settings over the group's."""
        offsets = {name: self._launch(name, **(env_of(name) if env_of else {})) for name in names}
        for name in names:
            self._wait_ready(name, offsets[name])

    def start_all(self) -> None:
        self.start_together(*QUEUE_GROUPS, "beat")

    def kill(self, name: str) -> None:
        """SIGKILL, as a crash or an OOM kill would."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def terminate(self, name: str, timeout: float = 30) -> int:
        """SIGTERM to the worker only (not its group), as a deploy would; its exit status."""
        proc = self.procs[name]
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout)

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)

    def purge_queues(self) -> None:
        """Drop deliveries left on a shared broker by an earlier run."""
        from kombu import Connection

        from config.celeryconfig import QUEUES

        with Connection(self.env["CELERY_BROKER_URL"]) as conn:
            channel = conn.channel()
            for queue in QUEUES:
                with contextlib.suppress(Exception):
                    channel.queue_purge(queue)


@contextlib.contextmanager
def start_api(*, port: int) -> Iterator[str]:
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            "config.asgi:app", host="127.0.0.1", port=port, log_level="warning", lifespan="on"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: server.started, timeout=30, what="api started")
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass(frozen=True)
class Event:
    id: str
    event: str
    data: dict[str, Any]


def parse_sse(lines: Iterator[str]) -> Iterator[Event]:
    """Events of an SSE body, skipping comments (pings)."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "data" in fields:
                yield Event(
                    fields.get("id", ""), fields.get("event", "message"), json.loads(fields["data"])
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value


class Api:
    """A thin client of the v1 API for tests."""

    def __init__(self, base_url: str, key: str | None = None) -> None:
        self.base_url = base_url
        self.key = key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=30)

    @contextlib.contextmanager
    def as_tenant(self, key: str) -> Iterator[Api]:
        client = Api(self.base_url, key)
        try:
            yield client
        finally:
            client.http.close()

    def create_session(self, **body: Any) -> dict[str, Any]:
        r = self.http.post("/v1/sessions", json=body)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def scripted_session(self, *replies: dict[str, Any], **body: Any) -> str:
        metadata = {**body.pop("metadata", {}), "script": list(replies)}
        return str(self.create_session(metadata=metadata, **body)["id"])

    def post_turn(self, session_id: str, content: str = "hello", **kw: Any) -> httpx.Response:
        headers = kw.pop("headers", {})
        return self.http.post(
            f"/v1/sessions/{session_id}/turns", json={"content": content, **kw}, headers=headers
        )

    def submit(self, session_id: str, content: str = "hello", **kw: Any) -> str:
        r = self.post_turn(session_id, content, **kw)
        assert r.status_code == 202, r.text
        return str(r.json()["id"])

    def turn(self, turn_id: str) -> dict[str, Any]:
        r = self.http.get(f"/v1/turns/{turn_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait_turn(
        self,
        turn_id: str,
        *,
        timeout: float = 60.0,
        statuses: tuple[str, ...] = ("done", "failed", "cancelled"),
    ) -> dict[str, Any]:
        return dict(
            wait_until(
                lambda: (t := self.turn(turn_id))["status"] in statuses and t,
                timeout=timeout,
                interval=0.1,
                what=f"turn {turn_id} to end",
            )
        )

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        r = self.http.get(f"/v1/sessions/{session_id}/messages", params={"limit": 500})
        assert r.status_code == 200, r.text
        return list(r.json()["messages"])

    def events(
        self,
        path: str,
        *,
        last_event_id: str | None = None,
        limit: int | None = None,
        timeout: float = 60.0,
        until_done: int = 1,
    ) -> list[Event]:
        """Read SSE from `path` until `until_done` done events (or `limit` events)."""
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        out: list[Event] = []
        done = 0
        with self.http.stream(
            "GET", path, headers=headers, timeout=httpx.Timeout(timeout, read=timeout)
        ) as r:
            assert r.status_code == 200, r.read().decode()
            for event in parse_sse(r.iter_lines()):
                out.append(event)
                done += event.event == "done"
                if done >= until_done or (limit is not None and len(out) >= limit):
                    break
        return out

    def turn_events(self, turn_id: str, **kw: Any) -> list[Event]:
        return self.events(f"/v1/turns/{turn_id}/events", **kw)


def text_of(events: list[Event]) -> str:
    """Assistant text a client reconstructs from tokens, honouring `step_restart`."""
    by_step: dict[int, str] = {}
    for e in events:
        if e.event == "token":
            by_step[e.data["step"]] = by_step.get(e.data["step"], "") + e.data["text"]
        elif e.event == "step_restart":
            by_step[e.data["step"]] = ""
    return "".join(by_step[k] for k in sorted(by_step))


def stored_text(messages: list[dict[str, Any]], turn_id: str) -> str:
    return "".join(
        m["content"] for m in messages if m["role"] == "assistant" and m["turn_id"] == turn_id
    )


PROVIDER_ENV_PREFIXES = ("CORTEX_", "OPENAI_", "AZURE_OPENAI_", "ANTHROPIC_", "OLLAMA_", "LLM_")


def dev_env(**extra: str) -> dict[str, str]:
    """The environment of a `cortex-workers dev` a user starts: no test URLs, settings or
    provider configuration unless given in `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(PROVIDER_ENV_PREFIXES)
        and k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SYSTEM_PROMPT")
    }
    env["CORTEX_RECONCILE_EVERY_S"] = "1"
    env.update(extra)
    return env


def start_dev(
    data_dir: Path, port: int, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`cortex-workers dev` as a subprocess (its own process group), logging to `log`."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cortex_workers.cli",
            "dev",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
            "--no-flower",  # Flower's default port would be shared by concurrent runs
        ],
        env=env or dev_env(),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def api_ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def stop_dev(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def stream_until_done(http: httpx.Client, path: str) -> list[Event]:
    out = []
    with http.stream("GET", path) as r:
        for event in parse_sse(r.iter_lines()):
            out.append(event)
            if event.event == "done":
                break
    return out


class Bridge:
    """An internal HTTP bridge a plugin manifest points at (loopback, records requests)."""

    def __init__(self) -> None:
        import http.server

        bridge = self
        self.requests: list[dict[str, Any]] = []
        self.holds: dict[str, threading.Event] = {}
        """Paths whose requests are held (at most 30 s) until the event is set."""

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (stdlib name)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                bridge.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("authorization"),
                        "idempotency_key": self.headers.get("idempotency-key"),
                        "json": json.loads(body or b"null"),
                    }
                )
                hold = bridge.holds.get(self.path)
                if hold is not None:
                    hold.wait(30)
                reply = json.dumps(
                    {
                        "hits": [{"key": "OPS-1", "summary": "disk full"}],
                        "query": json.loads(body or b"{}").get("query"),
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()


def write_plugin_manifests(directory: Path, *, port: int) -> None:
    """A working manifest, one pointing at loopback without permission, one malformed."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ticket_search.yaml").write_text(f"""
name: ticket_search
description: Search tickets through the internal bridge.
parameters:
  query:
    type: string
    description: the search
endpoint:
  method: POST
  url: http://127.0.0.1:{port}/tickets/search
auth:
  type: bearer
  token: "${{TEST_BRIDGE_TOKEN}}"
allowed_tenants: ["tenant-*"]
allow_private_host: true
timeout: 5s
""")
    (directory / "sneaky.yaml").write_text(f"""
name: sneaky
description: Points at this machine without being allowed to.
parameters:
  q: {{type: string}}
endpoint: {{method: POST, url: "http://localhost:{port}/tickets/search"}}
timeout: 5s
""")
    (directory / "broken.yaml").write_text("name: broken\nendpoint: [not, a, mapping\n")
    for name, idempotent in (("charge_card", "true"), ("send_letter", "false")):
        (directory / f"{name}.yaml").write_text(f"""
name: {name}
description: An action with a side effect (tests/tools/test_exactly_once.py).
parameters:
  ref: {{type: string}}
endpoint: {{method: POST, url: "http://127.0.0.1:{port}/effects/{name}"}}
allow_private_host: true
read_only: false
idempotent: {idempotent}
timeout: 20s
""")


def require_program(name: str, why: str) -> str:
    """The path of the system program `name`. Without it the test skips, saying why; with
    CORTEX_REQUIRE_SYSTEM_PROGRAMS=1 (as .ci/run sets) it fails instead, so that CI cannot pass
    by skipping. scripts/test installs the programs it can (as root, with apt-get)."""
    import shutil

    import pytest

    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name} is not installed ({why}); scripts/test installs it when run as root with apt"
    if os.environ.get("CORTEX_REQUIRE_SYSTEM_PROGRAMS") == "1":
        pytest.fail(f"{reason}, and CORTEX_REQUIRE_SYSTEM_PROGRAMS=1 makes that a failure")
    pytest.skip(reason)


def _test_holder() -> Any:
    from cortex_workers.store.claims import Holder

    return Holder(worker="test:0:claims", liveness_s=10 * 365 * 86400.0)


TEST_HOLDER = _test_holder()
"""A claim's holder for tests that claim steps by hand (never taken for being gone: a holder
with no heartbeat row is gone only once its silence outlasts liveness_s: ten years)."""
