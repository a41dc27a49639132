"""Beat survives Redis losing its data: the schedule comes back and the lock is taken back.

(Stock RedBeat installs the schedule only at startup, and its tick fails once the lock key is
gone: a Redis restarted without persistence left a beat that scheduled no reconciler.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redbeat.schedulers import get_redis
from support import Stack

from config.celery_app import app
from config.scheduler import ResilientRedBeatScheduler

pytestmark = pytest.mark.servers


@pytest.fixture
def scheduler(stack: Stack) -> Iterator[ResilientRedBeatScheduler]:
    saved = {
        k: app.conf.get(k) for k in ("redbeat_redis_url", "redbeat_key_prefix", "redbeat_lock_key")
    }
    app.conf.update(
        redbeat_redis_url=stack.redis_url,
        redbeat_key_prefix="cortex:test-beat",
        redbeat_lock_key="cortex:test-beat:lock",
    )
    sched = ResilientRedBeatScheduler(app=app, lazy=False)
    sched.lock = get_redis(app).lock(sched.lock_key, timeout=sched.lock_timeout, sleep=0.1)
    assert sched.lock.acquire(blocking=False)
    yield sched
    sched.lock.release()
    app.conf.update(saved)


def test_a_wiped_schedule_and_lock_are_restored_on_the_next_tick(
    scheduler: ResilientRedBeatScheduler,
) -> None:
    client = get_redis(app)
    key = app.redbeat_conf.schedule_key
    assert client.exists(key)
    client.delete(key, scheduler.lock_key)  # what a Redis restarted without its data leaves
    scheduler.tick()
    assert client.exists(key) and scheduler.lock.owned()


def test_a_beat_that_lost_its_lock_to_another_stands_by(
    scheduler: ResilientRedBeatScheduler,
) -> None:
    client = get_redis(app)
    client.delete(scheduler.lock_key)
    other = client.lock(scheduler.lock_key, timeout=30)
    assert other.acquire(blocking=False)
    try:
        assert scheduler.tick() == scheduler.max_interval
        assert not scheduler.lock.owned()
    finally:
        other.release()
        assert scheduler.lock.acquire(blocking=False)
