"""Agents under test: the cards of tests/agents/cards, and A2A cards pointing at a real A2A
server on loopback (tests/agents/a2a_server.py), written to a directory of this run. The
workers import the handlers (tests/agents/handlers.py) as `agents.handlers`: the tests
directory is on their PYTHONPATH."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import free_port

CARDS = Path(__file__).resolve().parent / "cards"
A2A_PORT = free_port()
_cards_dir = Path(tempfile.mkdtemp(prefix="cortex-agent-cards-"))
for card in CARDS.glob("*.yaml"):
    shutil.copy(card, _cards_dir / card.name)
for name, mode, private in (
    ("translator", "foreground", True),
    ("translator_bg", "background", True),
    ("translator_guarded", "foreground", False),
):
    (_cards_dir / f"{name}.yaml").write_text(
        f"name: {name}\ndescription: A remote translator.\nmode: {mode}\ntimeout_s: 30\n"
        f"kind: a2a\nurl: http://127.0.0.1:{A2A_PORT}\nallow_private: {str(private).lower()}\n"
        "poll_s: 0.3\n"
    )
# read by the workers and the API of this run, which start after the conftests are imported
os.environ["CORTEX_AGENTS_DIR"] = str(_cards_dir)


@pytest.fixture(scope="session")
def a2a_server() -> Iterator[object]:
    from agents.a2a_server import A2aServer

    server = A2aServer(A2A_PORT)
    server.start()
    yield server
    server.stop()
