"""The agent cards of a test run, set up when the root conftest is imported (before any worker
or API starts): tests/agents/cards, plus A2A cards pointing at the loopback A2A server of
tests/agents/a2a_server.py, and the shipped example of examples/agents (docs/agents.md), in a
directory of this run named by CORTEX_AGENTS_DIR. The workers import the test handlers
(tests/agents/handlers.py) as `agents.handlers` (the tests directory is on their PYTHONPATH),
and the example's handler from the cards' directory, as a user's would be."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from support import free_port

CARDS = Path(__file__).resolve().parent / "cards"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
A2A_PORT = free_port()
DECOY_PORT, TARGET_PORT, BIG_PORT = free_port(), free_port(), free_port()
"""A private agent whose fetched card names another private host (`localhost` at TARGET_PORT),
and one whose answer is larger than the cap (tests/agents/test_a2a_guard.py)."""
DIRECTORY = Path(tempfile.mkdtemp(prefix="cortex-agent-cards-"))

for card in CARDS.glob("*.yaml"):
    shutil.copy(card, DIRECTORY / card.name)
# the example agent of docs/agents.md, as a user installs it: card and handler side by side
for shipped in (*EXAMPLES.glob("*.yaml"), *EXAMPLES.glob("*.py")):
    shutil.copy(shipped, DIRECTORY / shipped.name)
for name, mode, private, port in (
    ("translator", "foreground", True, A2A_PORT),
    ("translator_bg", "background", True, A2A_PORT),
    ("translator_guarded", "foreground", False, A2A_PORT),
    ("translator_decoy", "foreground", True, DECOY_PORT),
    ("translator_big", "foreground", True, BIG_PORT),
):
    (DIRECTORY / f"{name}.yaml").write_text(
        f"name: {name}\ndescription: A remote translator.\nmode: {mode}\ntimeout_s: 30\n"
        f"kind: a2a\nurl: http://127.0.0.1:{port}\nallow_private: {str(private).lower()}\n"
        "poll_s: 0.3\n"
    )
# a remote agent at a public address (never reached: mode local-only refuses it first)
(DIRECTORY / "translator_public.yaml").write_text(
    "name: translator_public\ndescription: A remote translator elsewhere.\nmode: foreground\n"
    "timeout_s: 30\nkind: a2a\nurl: https://translator.example.com\npoll_s: 0.3\n"
)
os.environ["CORTEX_AGENTS_DIR"] = str(DIRECTORY)
