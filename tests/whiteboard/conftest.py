"""Sub-agents of the whiteboard tests, as `[agents.<name>]` cards of the configuration (the
workers and the API of this run read them; they start after the conftests are imported)."""

from __future__ import annotations

import json
import os

SUGGESTION = (
    '```whiteboard_suggestion\n{"note": "scouting done", "blocker": "host C unreachable"}\n```'
)
CARDS = {
    # echoes what its model was sent: its parent's whiteboard is in it
    "wb_scout": {
        "description": "Looks around and says what it was told.",
        "mode": "foreground",
        "kind": "llm",
        "provider": "scripted",
        "tools": [],
        "metadata": {"script": [{"text": "Scouted.", "echo_context": True}]},
    },
    # ends its answer with a suggestion for its parent's whiteboard
    "wb_reporter": {
        "description": "Reports and suggests a whiteboard update.",
        "mode": "foreground",
        "kind": "llm",
        "provider": "scripted",
        "tools": [],
        "metadata": {"script": [{"text": f"Reported.\n\n{SUGGESTION}"}]},
    },
}
os.environ["CORTEX_AGENTS"] = json.dumps(CARDS)
