"""What `cortex-workers dev` checks around its start: that its ports are free before it starts
anything, and that the stack is ready (the API answers `/readyz` and a worker of every queue
answers a ping) before it says so."""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

log = logging.getLogger("cortex_workers.dev")


@dataclass(frozen=True, slots=True)
class BusyPort:
    """A port `dev` needs that something else holds."""

    what: str
    host: str
    port: int
    reason: str

    def message(self, option: str) -> str:
        return (
            f"cannot start: port {self.port} on {self.host} ({self.what}) is busy ({self.reason});"
            f" stop what holds it (another `cortex-workers dev`?) or choose another with {option}"
        )


def busy_port(what: str, host: str, port: int) -> BusyPort | None:
    """Whether `port` of `host` can be listened on now (the socket is closed again at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return BusyPort(what, host, port, exc.strerror or type(exc).__name__)
    return None


@dataclass
class Readiness:
    """Polled by the supervisor until the stack is ready: the API's `/readyz` answers 200 and
    a worker of every queue group answers a ping on the broker."""

    api: str
    broker_url: str
    nodes: Sequence[str]
    """Node names (before the `@`) of the workers that must answer."""
    answered: set[str] = field(default_factory=set)
    _app: object | None = None

    def missing(self) -> list[str]:
        """What does not answer yet (empty when ready)."""
        try:
            api_ok = httpx.get(f"{self.api}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            api_ok = False
        left = [n for n in self.nodes if n not in self.answered]
        if left:
            self.answered |= self._pong()
            left = [n for n in self.nodes if n not in self.answered]
        return ([] if api_ok else ["api"]) + left

    def _pong(self) -> set[str]:
        from celery import Celery

        if self._app is None:
            self._app = Celery("cortex-dev-ping", broker=self.broker_url)
        app = self._app
        assert isinstance(app, Celery)
        try:
            replies = app.control.ping(timeout=1.0) or []
        except Exception as exc:  # the broker is still starting: try again on the next poll
            log.debug("ping failed: %s", exc)
            return set()
        return {name.split("@", 1)[0] for reply in replies for name in reply}
