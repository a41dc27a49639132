"""`scripts/soak --minutes 60`: drive a private stack at half its measured capacity for a long
time and watch for what grows.

The stack is the fault harness's (its own Postgres and Valkey, the API, one worker per queue
group, beat) at the product's default settings, without per-tenant rate limits. Capacity is
measured first (`--capacity-s`, 20 s of closed-loop clients posting plain 20-token turns and
following each to `done`), unless `--rate` gives the turns per second. Then turns are posted
open-loop at half of it, across `--sessions` sessions, each followed over SSE to `done`.

Every `--every` seconds: the RSS of every process of the stack (psutil, children included),
Postgres client backends (pg_stat_activity), Redis clients (INFO clients), turns done and
failed, and POST→done p50 / p99 of the turns that ended in the interval. At the end, a table
and a verdict: after the warm-up (the first fifth), each process's RSS stays within ±10 % of
its first sample, backends and clients do not grow, and p99 of the second half stays within
1.5× of the first half's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import psutil
import psycopg

from scripts.bench.client import create_session, follow, make_client, submit_turn, words
from scripts.bench.stats import percentile
from scripts.faults.restarts import DEFAULTS
from scripts.faults.stack import Stack, StackConfig

SETTINGS = {
    **DEFAULTS,
    "CORTEX_TENANT_TURNS_PER_MINUTE": "0",
    "CORTEX_TENANT_SESSIONS_PER_MINUTE": "0",
}
CONTENT = words(20)  # the scripted model echoes it: 20 tokens


@dataclass
class Interval:
    t: float
    rss_mb: dict[str, float]
    pg_backends: int
    redis_clients: int
    done: int
    failed: int
    p50_ms: float
    p99_ms: float


@dataclass
class Driver:
    stack: Stack
    sessions: list[str] = field(default_factory=list)
    times: list[tuple[float, float]] = field(default_factory=list)
    """(done at, POST→done ms) of each finished turn."""
    failed: int = 0

    async def turn(self, sid: str) -> None:
        async with make_client(self.stack.api_base, self.stack.api_key, connections=2) as http:
            t0 = time.monotonic()
            try:
                tid = await submit_turn(http, sid, CONTENT)
                got = await follow(http, tid, timeout=120)
            except Exception:
                self.failed += 1
                return
            done = got.done
            if done is None or done.json().get("status") != "done":
                self.failed += 1
                return
            self.times.append((time.monotonic(), (done.t - t0) * 1000))


async def _make_sessions(stack: Stack, n: int) -> list[str]:
    async with make_client(stack.api_base, stack.api_key) as http:
        return [await create_session(http, []) for _ in range(n)]


async def measure_capacity(driver: Driver, seconds: float, users: int) -> float:
    """Turns per second that `users` closed-loop clients complete."""
    end = time.monotonic() + seconds
    start = len(driver.times)

    async def user(i: int) -> None:
        while time.monotonic() < end:
            await driver.turn(driver.sessions[i % len(driver.sessions)])

    t0 = time.monotonic()
    await asyncio.gather(*(user(i) for i in range(users)))
    return (len(driver.times) - start) / (time.monotonic() - t0)


def _rss(stack: Stack) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, proc in stack.procs.items():
        if proc.popen is None or proc.popen.poll() is not None:
            continue
        try:
            root = psutil.Process(proc.popen.pid)
            rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            out[name] = round(rss / 2**20, 1)
        except psutil.Error:
            continue
    return out


def _pg_backends(stack: Stack) -> int:
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
        ).fetchone()
    return int(row[0]) - 1 if row else -1  # not this one


def _redis_clients(stack: Stack) -> int:
    r = stack.redis_client()
    try:
        return int(r.info("clients")["connected_clients"]) - 1
    finally:
        r.close()


def sample(stack: Stack, driver: Driver, since: float, failed_before: int) -> Interval:
    ms = [m for t, m in driver.times if t >= since]
    return Interval(
        t=time.monotonic(),
        rss_mb=_rss(stack),
        pg_backends=_pg_backends(stack),
        redis_clients=_redis_clients(stack),
        done=len(ms),
        failed=driver.failed - failed_before,
        p50_ms=round(percentile(ms, 50), 1) if ms else float("nan"),
        p99_ms=round(percentile(ms, 99), 1) if ms else float("nan"),
    )


async def drive(driver: Driver, rate: float, minutes: float, every: float) -> list[Interval]:
    """Post turns open-loop at `rate` per second; sample every `every` seconds."""
    intervals: list[Interval] = []
    end = time.monotonic() + minutes * 60
    next_sample = time.monotonic() + every
    since, failed_before = time.monotonic(), driver.failed
    tasks: set[asyncio.Task[None]] = set()
    rng = random.Random(7)
    while time.monotonic() < end:
        sid = driver.sessions[rng.randrange(len(driver.sessions))]
        task = asyncio.create_task(driver.turn(sid))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        await asyncio.sleep(rng.expovariate(rate))
        if time.monotonic() >= next_sample:
            got = await asyncio.to_thread(sample, driver.stack, driver, since, failed_before)
            intervals.append(got)
            print(_row(len(intervals), got), flush=True)
            since, failed_before = time.monotonic(), driver.failed
            next_sample += every
    await asyncio.gather(*tasks, return_exceptions=True)
    return intervals


def _row(i: int, s: Interval) -> str:
    rss = " ".join(f"{k}={v:.0f}" for k, v in sorted(s.rss_mb.items()))
    return (
        f"{i:>3} done {s.done:>5} failed {s.failed:>3} p50 {s.p50_ms:>7} ms p99 {s.p99_ms:>7} ms "
        f"pg {s.pg_backends:>3} redis {s.redis_clients:>3} | RSS MB {rss}"
    )


def verdict(intervals: list[Interval]) -> dict[str, Any]:
    """Flat after the warm-up (the first fifth): RSS within ±10 % of its first sample, PG
    backends and Redis clients not above their first post-warm-up sample (+2), p99 of the
    second half within 1.5× of the first half's."""
    warm = intervals[max(1, len(intervals) // 5) :]
    if len(warm) < 2:
        return {"ok": False, "why": ["too few intervals after the warm-up"]}
    why = []
    first, last = warm[0], warm[-1]
    for name, mb in first.rss_mb.items():
        peak = max(s.rss_mb.get(name, 0.0) for s in warm)
        if peak > mb * 1.10 or last.rss_mb.get(name, mb) < mb * 0.90:
            why.append(f"RSS of {name}: {mb} MB after warm-up, peak {peak} MB")
    if max(s.pg_backends for s in warm) > first.pg_backends + 2:
        why.append(f"Postgres backends grew: {[s.pg_backends for s in warm]}")
    if max(s.redis_clients for s in warm) > first.redis_clients + 2:
        why.append(f"Redis clients grew: {[s.redis_clients for s in warm]}")
    half = len(warm) // 2
    p99a = statistics.median(s.p99_ms for s in warm[:half])
    p99b = statistics.median(s.p99_ms for s in warm[half:])
    if p99b > 1.5 * p99a:
        why.append(f"p99 rose: {p99a} ms then {p99b} ms")
    failed = sum(s.failed for s in intervals)
    if failed:
        why.append(f"{failed} turns failed")
    return {"ok": not why, "why": why, "p99_first_half_ms": p99a, "p99_second_half_ms": p99b}


async def soak(args: argparse.Namespace, stack: Stack) -> dict[str, Any]:
    driver = Driver(stack)
    driver.sessions = await _make_sessions(stack, args.sessions)
    capacity = None
    rate = args.rate
    if rate is None:
        capacity = await measure_capacity(driver, args.capacity_s, args.capacity_users)
        rate = capacity / 2
        print(f"capacity {capacity:.1f} turns/s; soaking at {rate:.1f} turns/s", flush=True)
    intervals = await drive(driver, rate, args.minutes, args.every)
    return {
        "capacity_turns_per_s": capacity,
        "rate_turns_per_s": rate,
        "minutes": args.minutes,
        "intervals": [vars(s) for s in intervals],
        "verdict": verdict(intervals),
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="scripts/soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--rate", type=float, help="turns per second (default: half the capacity)")
    p.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    p.add_argument("--sessions", type=int, default=200)
    p.add_argument("--capacity-s", type=float, default=20.0)
    p.add_argument("--capacity-users", type=int, default=32)
    p.add_argument("--json", help="write the samples and the verdict here")
    args = p.parse_args()
    stack = Stack(StackConfig(settings=SETTINGS))
    stack.start()
    try:
        out = asyncio.run(soak(args, stack))
    finally:
        stack.stop()
    print(json.dumps(out["verdict"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
