"""Webhook events are signed per Standard Webhooks, delivered at least once with backoff, and
keep their `webhook-id` on every retry; a webhooks worker killed mid-delivery loses nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.webhook_receiver import Receiver
from support import Api, Workers, wait_until

pytestmark = pytest.mark.servers


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def subscribe(client: Api, receiver: Receiver, url: str, events: list[str]) -> dict[str, Any]:
    r = client.http.post("/v1/webhooks", json={"url": url, "events": events})
    assert r.status_code == 201, r.text
    created = dict(r.json())
    assert created["secret"].startswith("whsec_")
    receiver.secret = created["secret"]
    return created


def test_a_receiver_down_for_ten_seconds_gets_every_event_once_verified(
    client: Api, receiver: Receiver
) -> None:
    receiver.answer = lambda _: 500 if time.monotonic() - receiver.started < 10 else 200
    url = receiver.start()
    hook = subscribe(client, receiver, url, ["turn.completed", "turn.failed"])
    done = [client.submit(client.scripted_session({"text": "ok"})) for _ in range(3)]
    failed = client.submit(
        client.scripted_session({"error": {"status": 400, "message": "bad", "times": 1}})
    )
    for turn_id in [*done, failed]:
        client.wait_turn(turn_id)

    delivered = wait_until(
        lambda: len(receiver.delivered()) == 4 and receiver.delivered(),
        timeout=40,
        interval=0.2,
        what="four events delivered",
    )
    assert all(r.verified for r in receiver.received)
    by_turn = {p["data"]["turn_id"]: p for p in delivered.values()}
    assert set(by_turn) == {*done, failed}
    assert {by_turn[t]["type"] for t in done} == {"turn.completed"}
    assert by_turn[failed]["type"] == "turn.failed"
    assert by_turn[failed]["data"]["status"] == "failed"
    assert set(by_turn[done[0]]["data"]) <= {"turn_id", "session_id", "status", "error_code"}
    # every retry of one event carried its id: the failed attempts' ids are the delivered ones
    assert {r.msg_id for r in receiver.received} == set(delivered)
    assert any(r.answered == 500 for r in receiver.received)

    def recorded() -> list[dict[str, Any]]:
        log = client.http.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
        return all(d["status"] != "pending" for d in log) and log

    log = wait_until(recorded, timeout=10, what="the attempts recorded")
    assert {d["event_id"] for d in log} == set(delivered)
    for delivery in log:
        assert delivery["status"] == "succeeded"
        *retried, last = delivery["attempts"]
        assert last["status_code"] == 200 and last["next_retry_at"] is None
        assert all(a["status_code"] == 500 and a["next_retry_at"] for a in retried)
        assert all(a["error"] == "HTTP 500 Internal Server Error" for a in retried)


def test_a_webhooks_worker_killed_mid_delivery_still_delivers(
    client: Api, receiver: Receiver, workers: Workers
) -> None:
    arrived, release = threading.Event(), threading.Event()

    def hold(n: int) -> None:
        if n == 0:  # the first request waits while its worker is killed
            arrived.set()
            release.wait(20)

    receiver.hold = hold
    receiver.answer = lambda n: 503 if n == 0 else 200  # the held one reaches no one anyway
    url = receiver.start()
    subscribe(client, receiver, url, ["turn.completed"])
    turn_id = client.submit(client.scripted_session({"text": "ok"}))
    assert arrived.wait(30), "the delivery never arrived"
    workers.kill("webhooks")
    release.set()
    workers.start("webhooks")

    delivered = wait_until(
        lambda: receiver.delivered(), timeout=40, interval=0.2, what="the event delivered"
    )
    assert [p["data"]["turn_id"] for p in delivered.values()] == [turn_id]
    assert len(receiver.received) >= 2, "delivered again after the kill"
    assert len({r.msg_id for r in receiver.received}) == 1
