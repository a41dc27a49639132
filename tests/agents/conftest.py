"""The agents tests: their cards are set up by `agents.cards_dir` (imported by the root
conftest, before the workers start); the A2A server they point at starts on first use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.cards_dir import A2A_PORT


@pytest.fixture(scope="session")
def a2a_server() -> Iterator[object]:
    from agents.a2a_server import A2aServer

    server = A2aServer(A2A_PORT)
    server.start()
    yield server
    server.stop()
