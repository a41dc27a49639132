"""Agents under test: cards in tests/agents/cards, handlers in tests/agents/handlers.py (the
workers import them: the tests directory is on their PYTHONPATH)."""

from __future__ import annotations

import os
from pathlib import Path

CARDS = Path(__file__).resolve().parent / "cards"
# read by the workers and the API of this run, which start after the conftests are imported
os.environ["CORTEX_AGENTS_DIR"] = str(CARDS)
