"""Tests on several hosts (network namespaces, scripts/hosts) and on Redis Sentinel.

They need root and `ip netns`, or Debian's redis-server / redis-sentinel: where those are
missing they skip, saying why, and fail instead under CORTEX_REQUIRE_SYSTEM_PROGRAMS=1 (as
.ci/run sets), so that CI cannot pass by skipping.
"""

from __future__ import annotations

import os

import pytest
from support import require_program

from scripts.hosts.network import unavailable_reason
from scripts.hosts.sentinel import sentinel_command


@pytest.fixture
def namespaces() -> None:
    reason = unavailable_reason()
    if reason is None:
        return
    reason = f"network namespaces unavailable: {reason}"
    if os.environ.get("CORTEX_REQUIRE_SYSTEM_PROGRAMS") == "1":
        pytest.fail(f"{reason}, and CORTEX_REQUIRE_SYSTEM_PROGRAMS=1 makes that a failure")
    pytest.skip(reason)


@pytest.fixture
def redis_sentinel() -> None:
    require_program("redis-server", "a Redis primary and replica for Sentinel to fail over")
    from pathlib import Path

    if sentinel_command(Path("sentinel.conf")) is None:  # pragma: no cover (same package)
        require_program("redis-sentinel", "the sentinels")
