"""A turn's timeline records redaction counts (never the values) with the route they were
made for."""

from __future__ import annotations

import json
import uuid

from privacy_support import Guarded
from support import Api
from timeline_support import kinds, timeline

EMAIL = "ann.lee@example.com"
DIGITS_AS_LETTERS = str.maketrans("0123456789", "ghijklmnop")


def test_the_timeline_counts_what_was_redacted_and_never_shows_it(
    gclient: Api, guarded: Guarded
) -> None:
    # Letters only: a run of hex digits can pass as a card number (Luhn) and be redacted too.
    tag = uuid.uuid4().hex.translate(DIGITS_AS_LETTERS)
    sid = gclient.create_session(provider="openai", model="gpt-4o")["id"]
    tid = gclient.submit(sid, f"{tag}: mail {EMAIL} and {EMAIL}")
    assert gclient.wait_turn(tid)["status"] == "done"
    events = timeline(gclient, tid)
    assert kinds(events)[:2] == ["route", "redaction"]
    redaction = events[1]["data"]
    assert redaction["counts"] == {"email": 2}
    assert (redaction["provider"], redaction["model"]) == ("openai", "gpt-4o")
    assert EMAIL not in json.dumps(events)
