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
    """Debian's redis-server (the primary and the replica; the sentinels run as
    `redis-sentinel`, or as `redis-server --sentinel`, the same program)."""
    require_program("redis-server", "a Redis primary, its replica and sentinels to fail over")
