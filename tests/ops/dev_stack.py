"""Helpers of the operations tests: `cortex-workers dev` started with Flower on free ports, and
the `cortex-workers` command run to completion."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from support import api_ready, wait_until

TWO_TOOLS = [
    {
        "text": "Working.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "2**10"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "2**10 is 1024."},
]
QUEUE_NODES = {
    "llm": ["llm"],
    "tools": ["tools"],
    "summarize-maintenance": ["maintenance", "summarize"],
    "webhooks": ["webhooks"],
    "batch": ["batch"],
    "agents": ["agents"],
}


def start_dev(
    data_dir: Path, *, port: int, flower_port: int | None, log: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """`cortex-workers dev` as a subprocess in its own process group, logging to `log`."""
    flower = ["--no-flower"] if flower_port is None else ["--flower-port", str(flower_port)]
    argv = [sys.executable, "-m", "cortex_workers.cli", "dev", "--data-dir", str(data_dir)]
    return subprocess.Popen(
        [*argv, "--port", str(port), *flower],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`cortex-workers ARGS` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "cortex_workers.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class DevStack:
    data_dir: Path
    api: httpx.Client
    """Authenticated as the dev tenant."""
    flower: str
    flower_auth: tuple[str, str]
    log: Path

    def two_tool_turn(self) -> tuple[str, str]:
        """A finished turn of a scripted session whose first reply calls two tools:
        (session id, turn id)."""
        sid = self.api.post("/v1/sessions", json={"metadata": {"script": TWO_TOOLS}}).json()["id"]
        tid = self.api.post(f"/v1/sessions/{sid}/turns", json={"content": "2**10?"}).json()["id"]
        wait_until(
            lambda: self.api.get(f"/v1/turns/{tid}").json()["status"] == "done",
            timeout=60,
            what="the two-tool turn done",
        )
        return sid, tid

    def flower_get(self, path: str, **params: Any) -> Any:
        r = httpx.get(f"{self.flower}{path}", params=params, auth=self.flower_auth, timeout=10)
        r.raise_for_status()
        return r.json()


def flower_up(url: str, auth: tuple[str, str]) -> bool:
    try:
        workers = httpx.get(f"{url}/api/workers", params={"status": 1}, auth=auth, timeout=5)
    except httpx.HTTPError:
        return False
    # a worker shows online once its heartbeats arrive: Flower turned its events on
    online = workers.json() if workers.status_code == 200 else {}
    names = {name.split("@")[0] for name, up in online.items() if up}
    return names >= set(QUEUE_NODES)


EVENTS_ON = "Events of group {task} enabled by remote."
"""What each worker logs when Flower's broadcast turns its task events on."""


def _events_on(log: Path) -> bool:
    return log.read_text(errors="replace").count(EVENTS_ON) >= len(QUEUE_NODES)


def ready_stack(
    data_dir: Path, *, base: str, flower: str, log: Path
) -> tuple[str, tuple[str, str]]:
    """Waits for the API and for Flower to see every worker online; (API key, Flower auth)."""
    wait_until(lambda: api_ready(base), timeout=120, interval=0.5, what="dev stack ready")
    user, _, password = (data_dir / "flower-auth").read_text().strip().partition(":")
    auth = (user, password)
    wait_until(lambda: flower_up(flower, auth), timeout=90, interval=0.5, what="flower")
    # task events are on in every worker once Flower's broadcast turning them on arrived
    # (beat's maintenance ticks send none, so no task of theirs would show it)
    wait_until(lambda: _events_on(log), timeout=60, interval=0.5, what="task events")
    return (data_dir / "api-key").read_text().strip(), auth
