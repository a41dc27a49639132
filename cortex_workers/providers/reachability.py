"""Whether a self-hosted server (Ollama, vLLM, llama.cpp) answers at all: one TCP connect with
a short timeout, remembered for a while, so listing providers stays cheap. Only the listing
asks; a step never does (a turn on a server that is down fails through the retry policy)."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 0.3
REMEMBER_S = 10.0

_lock = threading.Lock()
_seen: dict[str, tuple[float, str | None]] = {}


def _address(base_url: str) -> tuple[str, int] | None:
    parts = urlsplit(base_url)
    if not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _probe(base_url: str) -> str | None:
    address = _address(base_url)
    if address is None:
        return f"base_url {base_url!r} names no host"
    try:
        with socket.create_connection(address, timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return f"no server answers at {base_url} ({reason}); start it or set its base_url"


def unreachable(base_url: str) -> str | None:
    """Why nothing answers at `base_url`, or None when a server accepts connections there
    (checked at most once every `REMEMBER_S` seconds per URL)."""
    now = time.monotonic()
    with _lock:
        seen = _seen.get(base_url)
    if seen is not None and now - seen[0] < REMEMBER_S:
        return seen[1]
    reason = _probe(base_url)
    with _lock:
        _seen[base_url] = (now, reason)
    return reason


def forget() -> None:
    """Drop what was remembered (tests)."""
    with _lock:
        _seen.clear()
