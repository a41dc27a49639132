"""Scheduled turns fire from beat: one turn per schedule and fire time, across a beat restart,
with two beats (and more sweeps) running at once, and once for a time missed while down."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, func, select, update
from support import Api, Workers, wait_until

from cortex_workers.runtime import get_runtime
from cortex_workers.store.db import transaction
from cortex_workers.store.models import Turn
from cortex_workers.store.schedules import Schedule
from cortex_workers.turns.schedules import fire_due

pytestmark = pytest.mark.servers


def _schedule(client: Api, sid: str, **rule: float | str) -> str:
    r = client.http.post(f"/v1/sessions/{sid}/schedules", json={"content": "tick", **rule})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _fired(client: Api, sid: str) -> int:
    [schedule] = client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"]
    return int(schedule["fired"])


def _fired_of(client: Api, sid: str, schedule_id: str) -> int:
    schedules = client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"]
    return int(next(s["fired"] for s in schedules if s["id"] == schedule_id))


def _turns(schedule_id: str) -> list[tuple[datetime, Turn]]:
    """The schedule's turns with the fire time their Idempotency-Key names, by fire time."""
    prefix = f"schedule:{schedule_id}:"
    with transaction(get_runtime().db) as db:
        rows = db.execute(select(Turn).where(Turn.idempotency_key.like(prefix + "%"))).scalars()
        turns = [(datetime.fromisoformat(t.idempotency_key[len(prefix) :]), t) for t in rows]
    return sorted(turns, key=lambda pair: pair[0])


def _remove(schedule_id: str) -> int:
    """Delete the schedule once no firing is in progress; how many times it fired."""
    with transaction(get_runtime().db) as db:
        fired = db.execute(
            select(Schedule.fired).where(Schedule.id == uuid.UUID(schedule_id)).with_for_update()
        ).scalar_one()
        db.execute(delete(Schedule).where(Schedule.id == uuid.UUID(schedule_id)))
    return int(fired)


def _settled(client: Api, sid: str, *, quiet_s: float, timeout: float = 30.0) -> int:
    """The session's firings once their count has not changed for `quiet_s`."""
    last, since = _fired(client, sid), time.monotonic()
    deadline = since + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _fired(client, sid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return last
    raise AssertionError(f"firings still arriving {timeout}s after beat stopped")


def _stop_beat(workers: Workers) -> None:
    """SIGTERM, as an orderly stop (RedBeat releases its lock)."""
    proc = workers.procs["beat"]
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(15)


@pytest.fixture
def beat_restored(workers: Workers) -> Iterator[Workers]:
    yield workers
    if workers.procs["beat"].poll() is not None:
        workers.start("beat")


def _check_grid(times: list[datetime], every: timedelta) -> list[timedelta]:
    """Each fire time once, all on the schedule's grid; returns the gaps between them."""
    assert len(set(times)) == len(times)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    for gap in gaps:
        assert gap >= every and gap % every == timedelta(0), gaps
    return gaps


def test_every_2s_fires_once_per_time_across_a_beat_restart(
    client: Api, beat_restored: Workers
) -> None:
    sid = client.create_session()["id"]  # the scripted model echoes each "tick"
    schedule_id = _schedule(client, sid, every_s=2)
    wait_until(lambda: _fired(client, sid) >= 2, timeout=30, what="two firings")

    _stop_beat(beat_restored)
    # a firing beat sent before it stopped may still be queued on a loaded machine: wait until
    # none comes for longer than the period, then nothing may fire while beat is down
    fired_before_stop = _settled(client, sid, quiet_s=3.0)
    stopped_at = time.monotonic()
    # at least two fire times pass while nothing fires
    wait_until(lambda: time.monotonic() - stopped_at > 5, timeout=10, interval=0.5)
    assert _fired(client, sid) == fired_before_stop

    beat_restored.start("beat")
    wait_until(
        lambda: _fired(client, sid) >= fired_before_stop + 2, timeout=60, what="firings resume"
    )
    fired = _remove(schedule_id)

    turns = _turns(schedule_id)
    assert len(turns) == fired  # each firing made one turn, and only firings made turns
    times = [t for t, _ in turns]
    assert Counter(times).most_common(1)[0][1] == 1  # one turn per fire time
    gaps = _check_grid(times, timedelta(seconds=2))
    # the slots missed while beat was down fired once, on recovery: one long gap, not a burst
    assert max(gaps) >= timedelta(seconds=4)
    for fire_time, turn in turns:
        assert turn.created_at >= fire_time  # never early
        assert client.wait_turn(str(turn.id))["status"] == "done"
        assert turn.content == "tick"


def _start_second_beat(workers: Workers) -> subprocess.Popen[bytes]:
    from cortex_workers.cli import beat_argv

    log = open(workers.log_dir / "beat-2.log", "ab")  # noqa: SIM115 (owned by the process)
    return subprocess.Popen(
        beat_argv("INFO"),
        env=workers.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_two_beats_and_concurrent_sweeps_give_one_turn_per_time(
    client: Api, workers: Workers
) -> None:
    second = _start_second_beat(workers)
    sid = client.create_session()["id"]
    stop = threading.Event()
    errors: list[BaseException] = []

    def sweep() -> None:  # more sweepers racing beat's own (their steps: the reconciler's)
        while not stop.is_set():
            try:
                fire_due(get_runtime())
            except BaseException as exc:  # reported by the test
                errors.append(exc)
                return

    sweepers = [threading.Thread(target=sweep) for _ in range(4)]
    try:
        schedule_id = _schedule(client, sid, every_s=1)
        for t in sweepers:
            t.start()
        wait_until(lambda: _fired(client, sid) >= 4, timeout=30, what="four firings")
    finally:
        stop.set()
        for t in sweepers:
            t.join(10)
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(15)
    fired = _remove(schedule_id)
    assert not errors, errors
    turns = _turns(schedule_id)
    assert len(turns) == fired
    times = [t for t, _ in turns]
    _check_grid(times, timedelta(seconds=1))
    assert len(turns) >= 4
    for _, turn in turns:
        assert client.wait_turn(str(turn.id))["status"] == "done"


def test_a_firing_while_the_session_is_busy_queues(client: Api) -> None:
    sid = client.scripted_session({"text": "slow " * 40, "token_ms": 200})
    busy = client.submit(sid, "long one")
    wait_until(lambda: client.turn(busy)["status"] == "running", what="running")
    schedule_id = _schedule(client, sid, every_s=1)
    wait_until(lambda: _fired(client, sid) >= 1, timeout=30, what="a firing")
    assert client.http.delete(f"/v1/schedules/{schedule_id}").status_code == 204
    first = _turns(schedule_id)[0][1]
    assert client.turn(busy)["status"] == "running"
    assert client.turn(str(first.id))["status"] == "queued"
    assert client.wait_turn(busy)["status"] == "done"
    assert client.wait_turn(str(first.id))["status"] == "done"
    assert uuid.UUID(client.turn(str(first.id))["session_id"]) == uuid.UUID(sid)


def test_a_schedule_that_cannot_fire_does_not_stop_the_others(client: Api) -> None:
    sid = client.create_session()["id"]
    broken = _schedule(client, sid, every_s=3600)
    with transaction(get_runtime().db) as db:  # as a rule a newer croniter might refuse
        db.execute(
            update(Schedule)
            .where(Schedule.id == uuid.UUID(broken))
            .values(cron="not a cron", timezone="UTC", every_s=None, next_run_at=func.now())
        )
    healthy = _schedule(client, sid, every_s=1)
    wait_until(lambda: _fired_of(client, sid, healthy) >= 2, timeout=30, what="firings")
    assert _remove(healthy) >= 2
    [left] = client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"]
    assert left["id"] == broken and left["fired"] == 0
    assert datetime.fromisoformat(left["next_run_at"]) > datetime.now(UTC)  # tried later
    assert _turns(broken) == []
    _remove(broken)
