"""What the end-to-end metrics tests hold of their `cortex-workers dev` stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass(frozen=True)
class DevMetricsStack:
    base: str
    """The API's URL: its `/metrics` carries every process of the stack."""
    api: httpx.Client
    """Authenticated as the dev tenant."""
    log: Path
