"""`scripts/bench/run --only hosts`: what a second worker host adds, and how long a host's power
loss costs. Not a test: figures for docs/benchmarks.md, on whatever machine runs it.

1. Throughput: T plain turns (scripted, no delay) over S sessions, once with the workers of `w1`
   only (`w2` powered off), once with both hosts. Every host shares the machine's cores, so the
   report gives each host's CPU (seconds per turn): the second host only helps if the workers
   were the limit, and the CPU shows where the limit is (Postgres and Redis on `db`, the APIs,
   the workers).
2. Recovery: while turns stream, `w1` loses power; the time until every step that was leased
   at that moment is done or claimed again by a later attempt (elsewhere). p50 and max of N.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from scripts.faults.stack import StackConfig

from .stacks import HOSTS, HostStack

SETTINGS = {"CORTEX_LIVENESS_S": "3", "CORTEX_TENANT_TURNS_PER_MINUTE": "0"}


def _cpu(stack: HostStack) -> dict[str, float]:
    import psutil

    assert stack.net is not None
    out: dict[str, float] = {}
    for host in stack.net.hosts:
        total = 0.0
        for pid in stack.net.pids(host):
            try:
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                continue
        out[host] = total
    return out


def _sessions(client: httpx.Client, n: int, script: list[dict[str, Any]]) -> list[str]:
    ids = []
    for i in range(n):
        body = {"name": f"bench-{i}", "metadata": {"script": script}}
        response = client.post("/v1/sessions", json=body)
        response.raise_for_status()
        ids.append(response.json()["id"])
    return ids


def _wait_done(stack: HostStack, turn_ids: list[str], timeout_s: float) -> float:
    import psycopg

    deadline = time.monotonic() + timeout_s
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM turns WHERE id = ANY(%s::uuid[]) "
                "AND status IN ('done', 'failed', 'cancelled')",
                (turn_ids,),
            ).fetchone()
            if row and row[0] == len(turn_ids):
                return time.monotonic()
            time.sleep(0.1)
    raise TimeoutError(f"turns not done within {timeout_s}s")


def _post_turns(stack: HostStack, session_id: str, turns: int) -> list[str]:
    """One session's turns, posted one after another on a connection of its own (so that the
    forward spreads the sessions over both APIs); they queue behind each other (`enqueue`)."""
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    ids = []
    with httpx.Client(base_url=stack.api_base, headers=headers, timeout=60) as client:
        for _ in range(turns):
            response = client.post(
                f"/v1/sessions/{session_id}/turns",
                json={"content": "go"},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            response.raise_for_status()
            ids.append(response.json()["id"])
    return ids


def throughput(stack: HostStack, *, sessions: int, turns: int) -> dict[str, Any]:
    """Turns per second for `sessions` x `turns` plain turns posted by one client per session
    at once, and each host's CPU per turn."""
    from concurrent.futures import ThreadPoolExecutor

    script = [{"text": " ".join(["word"] * 20), "first_token_ms": 0, "token_ms": 0}]
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    with httpx.Client(base_url=stack.api_base, headers=headers, timeout=60) as client:
        ids = _sessions(client, sessions, script * turns)
    before = _cpu(stack)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=sessions) as pool:
        per_session = list(pool.map(lambda sid: _post_turns(stack, sid, turns), ids))
    turn_ids = [tid for ids_ in per_session for tid in ids_]
    ended = _wait_done(stack, turn_ids, 600)
    after = _cpu(stack)
    n = len(turn_ids)
    return {
        "turns": n,
        "seconds": round(ended - started, 2),
        "turns_per_s": round(n / (ended - started), 2),
        "cpu_ms_per_turn": {h: round(1000 * (after[h] - before[h]) / n, 2) for h in before},
    }


def _leased(stack: HostStack) -> list[tuple[str, int]]:
    import psycopg

    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT id::text, attempt FROM steps WHERE status = 'leased' AND lease_until > now()"
        ).fetchall()
    return [(r[0], int(r[1])) for r in rows]


def _recovered(stack: HostStack, held: list[tuple[str, int]]) -> bool:
    import psycopg

    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT id::text, attempt, status FROM steps WHERE id = ANY(%s::uuid[])",
            ([step for step, _ in held],),
        ).fetchall()
    attempt_at_loss = dict(held)
    return all(
        status not in ("leased", "pending") or attempt > attempt_at_loss[step]
        for step, attempt, status in rows
    )


def recovery(stack: HostStack, *, reps: int, sessions: int) -> dict[str, Any]:
    """Seconds from `w1`'s power loss until every step leased then is done or claimed again."""
    script = [{"text": " ".join(["word"] * 40), "first_token_ms": 0, "token_ms": 100}]
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    times = []
    with httpx.Client(base_url=stack.api_base, headers=headers, timeout=60) as client:
        for _ in range(reps):
            ids = _sessions(client, sessions, script)
            turn_ids = [
                client.post(f"/v1/sessions/{sid}/turns", json={"content": "go"}).json()["id"]
                for sid in ids
            ]
            deadline = time.monotonic() + 30
            while len(held := _leased(stack)) < sessions // 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            lost_at = time.monotonic()
            stack.power_off("w1")
            give_up = lost_at + 120
            while not _recovered(stack, held):
                if time.monotonic() > give_up:
                    raise TimeoutError("steps held at the power loss not recovered in 120 s")
                time.sleep(0.05)
            times.append(time.monotonic() - lost_at)
            _wait_done(stack, turn_ids, 300)
            stack.power_on("w1")
            for name, host in stack.host_of.items():
                if host == "w1":
                    stack._wait(lambda n=name: stack.procs[n].alive(), 30, name)  # type: ignore[misc]
                    stack.wait_worker_ready(name, timeout=120)
    return {
        "reps": reps,
        "seconds": [round(t, 2) for t in times],
        "p50_s": round(statistics.median(times), 2),
        "max_s": round(max(times), 2),
    }


def run_bench(
    *, sessions: int = 20, turns: int = 10, reps: int = 5, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Both measurements on one HostStack; the figures as a dict."""
    stack = HostStack(StackConfig(settings=dict(SETTINGS)))
    out: dict[str, Any] = {"hosts": list(HOSTS)}
    try:
        stack.start()
        stack.power_off("w2")
        say("== throughput, workers on w1 only")
        out["one_worker_host"] = throughput(stack, sessions=sessions, turns=turns)
        say(str(out["one_worker_host"]))
        stack.power_on("w2")
        for name, host in stack.host_of.items():
            if host == "w2":
                stack._wait(lambda n=name: stack.procs[n].alive(), 30, name)  # type: ignore[misc]
                stack.wait_worker_ready(name, timeout=120)
        say("== throughput, workers on w1 and w2")
        out["two_worker_hosts"] = throughput(stack, sessions=sessions, turns=turns)
        say(str(out["two_worker_hosts"]))
        say(f"== recovery after w1's power loss, {reps} times")
        out["recovery"] = recovery(stack, reps=reps, sessions=8)
        say(str(out["recovery"]))
    finally:
        stack.stop()
    return out
