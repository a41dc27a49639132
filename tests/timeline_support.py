"""Reading a turn's execution timeline in tests."""

from __future__ import annotations

from typing import Any

from support import Api


def timeline(client: Api, turn_id: str) -> list[dict[str, Any]]:
    r = client.http.get(f"/v1/turns/{turn_id}/timeline")
    assert r.status_code == 200, r.text
    return list(r.json()["timeline"])


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in events]
