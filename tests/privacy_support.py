"""Helpers of the privacy, modes and routing tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import Api, Event

REMOTE_KEY = "sk-remote-test-key-0123456789"
REDACTION_BASE_S = 0.5
REDACTION_PER_CHAR_S = 10e-6


def bound_s(size: int) -> float:
    """The CPU time a redaction of `size` characters of hostile text may take: linear, 2.5 s at
    the 200,000 characters of a turn's text. Linear work takes some milliseconds there; the
    patterns that were quadratic took from 7 s (JWTs on `eyJ...`) to 80 s (npm's on `/...`) of
    CPU. CPU time (`time.thread_time`), so that a busy machine does not fail it."""
    return REDACTION_BASE_S + REDACTION_PER_CHAR_S * size


@dataclass
class Guarded:
    """The guarded API, and the fakes its workers call."""

    api: Api
    remote: Any
    """`openai`: a cloud provider (redacted, never called in local-only)."""
    local: Any
    """`ollama`: local."""
    logs: Path
    """The worker group's and the API's log files."""

    def log_text(self) -> str:
        return "".join(f.read_text(errors="replace") for f in sorted(self.logs.glob("*.log")))


def received(fake: Any, tag: str) -> list[dict[str, Any]]:
    """The bodies a fake server received whose messages mention `tag`."""
    return [r.body for r in fake.requests if tag in json.dumps(r.body.get("messages"))]


def text_events(events: list[Event]) -> list[str]:
    """The text of each token event, as streamed."""
    return [str(e.data.get("text", "")) for e in events if e.event == "token"]
