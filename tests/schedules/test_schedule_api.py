"""The schedules API: create, list, delete; bad input is a 422 with the error shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import Api

BAD: list[tuple[str, dict[str, Any]]] = [
    ("bad cron", {"cron": "every monday"}),
    ("six fields", {"cron": "0 0 8 * * 1-5"}),
    ("out of range", {"cron": "61 8 * * *"}),
    ("unknown timezone", {"cron": "0 8 * * 1-5", "timezone": "Mars/Olympus"}),
    ("path as timezone", {"cron": "0 8 * * *", "timezone": "../../etc/passwd"}),
    ("both", {"cron": "0 8 * * *", "every_s": 30}),
    ("neither", {}),
    ("every_s below 1", {"every_s": 0.5}),
    ("every_s zero", {"every_s": 0}),
    ("every_s negative", {"every_s": -5}),
    ("every_s not a number", {"every_s": "often"}),
    ("every_s beyond a year", {"every_s": 1e300}),
    ("cron that never fires", {"cron": "0 0 31 2 *"}),
    ("timezone without cron", {"every_s": 30, "timezone": "Europe/Paris"}),
    ("no content", {"every_s": 30, "content": None}),
    ("empty content", {"every_s": 30, "content": ""}),
    ("unknown field", {"every_s": 30, "at": "noon"}),
]


@pytest.mark.parametrize(("why", "body"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_422(client: Api, why: str, body: dict[str, Any]) -> None:
    sid = client.create_session()["id"]
    r = client.http.post(f"/v1/sessions/{sid}/schedules", json={"content": "tick", **body})
    assert r.status_code == 422, (why, r.text)
    error = r.json()["error"]
    assert error["code"] and error["message"]
    assert client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"] == []


def _next_paris_weekday_eight(now: datetime) -> datetime:
    paris = ZoneInfo("Europe/Paris")
    local = now.astimezone(paris)
    for days in range(8):
        day = (local + timedelta(days=days)).date()
        candidate = datetime(day.year, day.month, day.day, 8, tzinfo=paris)
        if candidate.weekday() < 5 and candidate > local:
            return candidate
    raise AssertionError("no weekday within a week")


def test_a_cron_schedule_is_created_listed_and_deleted(client: Api) -> None:
    sid = client.create_session()["id"]
    before = datetime.now(UTC)
    r = client.http.post(
        f"/v1/sessions/{sid}/schedules",
        json={"content": "morning report", "cron": "0 8 * * 1-5", "timezone": "Europe/Paris"},
    )
    assert r.status_code == 201, r.text
    created = r.json()
    next_run = datetime.fromisoformat(created["next_run_at"])
    assert next_run == _next_paris_weekday_eight(before)
    [listed] = client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"]
    assert listed["id"] == created["id"] and listed["timezone"] == "Europe/Paris"
    assert (listed["fired"], listed["last_turn_id"]) == (0, None)

    assert client.http.delete(f"/v1/schedules/{created['id']}").status_code == 204
    assert client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"] == []
    again = client.http.delete(f"/v1/schedules/{created['id']}")
    assert again.status_code == 404 and again.json()["error"]["code"]


def test_a_cron_without_timezone_is_utc(client: Api) -> None:
    sid = client.create_session()["id"]
    r = client.http.post(
        f"/v1/sessions/{sid}/schedules", json={"content": "x", "cron": "30 * * * *"}
    )
    assert r.status_code == 201, r.text
    assert r.json()["timezone"] == "UTC"
    assert datetime.fromisoformat(r.json()["next_run_at"]).minute == 30


def test_another_tenants_session_and_schedule_are_not_found(client: Api, other_client: Api) -> None:
    sid = client.create_session()["id"]
    body = {"content": "x", "every_s": 3600}
    assert other_client.http.post(f"/v1/sessions/{sid}/schedules", json=body).status_code == 404
    assert other_client.http.get(f"/v1/sessions/{sid}/schedules").status_code == 404
    schedule = client.http.post(f"/v1/sessions/{sid}/schedules", json=body).json()
    assert other_client.http.delete(f"/v1/schedules/{schedule['id']}").status_code == 404
    assert len(client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"]) == 1
