"""The agents tests: their cards are set up by `agents.cards_dir` (imported by the root
conftest, before the workers start); the A2A servers they point at start on first use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.cards_dir import A2A_PORT, BIG_PORT, DECOY_PORT, TARGET_PORT

ABOVE_THE_CAP = 5 * 1024 * 1024
"""An answer's size past the 4 MiB an A2A answer may have."""


@pytest.fixture(scope="session")
def a2a_server() -> Iterator[object]:
    from agents.a2a_server import A2aServer

    server = A2aServer(A2A_PORT)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def decoy_servers() -> Iterator[tuple[object, object]]:
    """A private agent (its card allows its own host) whose fetched card says it answers at
    `localhost`:TARGET_PORT, and the real agent there: (decoy, target)."""
    from agents.a2a_server import A2aServer

    target = A2aServer(TARGET_PORT)
    decoy = A2aServer(DECOY_PORT, url=f"http://localhost:{TARGET_PORT}")
    target.start()
    decoy.start()
    yield decoy, target
    decoy.stop()
    target.stop()


@pytest.fixture(scope="session")
def big_server() -> Iterator[object]:
    """An agent whose answer is larger than the cap."""
    from agents.a2a_server import A2aServer, BigAnswer

    server = A2aServer(BIG_PORT, executor=BigAnswer(ABOVE_THE_CAP))
    server.start()
    yield server
    server.stop()
