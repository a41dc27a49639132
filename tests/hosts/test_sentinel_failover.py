"""Redis Sentinel (docs/fleet.md): every process finds the primary through REDIS_SENTINELS and
REDIS_SENTINEL_MASTER. The primary is killed under 20 running turns and a replica is promoted:
every turn completes, nothing is lost, duplicated or out of order, and what the SSE clients
rebuilt (resuming with Last-Event-ID) is the stored text. While no primary is known the API
answers 503 with Retry-After, and as before once one is."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import redis

from cortex_workers.messages import Token
from cortex_workers.redis_clients import sync_pool
from cortex_workers.redis_target import sentinel_target
from cortex_workers.stream_writer import PipelinedWriter
from cortex_workers.streaming import StepStream
from scripts.hosts.scenarios import problems, run_failover, without_primary
from scripts.hosts.sentinel import MASTER_NAME, SentinelCluster

# both CI passes: the hosts bring servers of their own, and the passes run side by side
pytestmark = pytest.mark.servers


@pytest.mark.timeout(420)
@pytest.mark.usefixtures("redis_sentinel")
def test_a_failover_under_running_turns_loses_and_duplicates_nothing() -> None:
    report = run_failover(sessions=20, turns=1, seed=34, after=without_primary)
    evidence = json.dumps({"counts": report["counts"], "problems": report["problems"]}, default=str)
    assert report["counts"]["planned"] == 20
    assert problems(report) == {}, evidence[:4000]
    (failover,) = report["faults"]
    assert failover["in_flight"]["running_turns"] >= 10, failover
    after = report["after"]
    assert after["down"] == {"status": 503, "retry_after": "5", "code": "unavailable"}, after
    assert after["back"][-1] == 201, after


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("redis_sentinel")
def test_stream_entries_reach_the_replica_before_the_commit_and_follow_a_failover(
    tmp_path: Path,
) -> None:
    """A step's entries are on the replica when `flush` returns (the step then commits), so a
    failover right after loses none; the writer's connection to the dead primary fails the
    next attempt's writes once (that attempt is retried), and the retry writes to the new one."""
    with SentinelCluster(tmp_path / "sentinel") as cluster:
        target = sentinel_target("", sentinels=cluster.sentinels, master=MASTER_NAME)
        client = redis.Redis(connection_pool=sync_pool("", target, max_connections=4, timeout=5))
        writer = PipelinedWriter(client.connection_pool)
        turn = uuid.uuid4()

        def step(step_no: int, attempt: int) -> bool:
            stream = StepStream(client, turn, step_no, attempt, ttl_s=60, writer=writer, replicas=1)
            for text in ("a ", "b ", "c"):
                stream.emit(Token(text=text, step=step_no))
            return stream.flush()

        try:
            assert step(1, 1)
            cluster.fail_over()
            with pytest.raises(redis.ConnectionError):
                step(2, 1)
            assert step(2, 2)
            entries = cluster.client().xrange(f"cortex:turn:{turn}:events")
            ids = [entry_id.decode() for entry_id, _ in entries]
            assert ids[:4] == ["0-1", "1001-0", "1001-1", "1001-2"]
            assert ids[-3:] == ["2002-0", "2002-1", "2002-2"]
        finally:
            writer.close()
            client.close()
