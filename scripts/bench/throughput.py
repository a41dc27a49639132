"""Figure 1: sustained turns per second through the HTTP API, and a bare 3-task Celery chain on
the same broker with the same worker pool, for comparison.

Turns: `users` clients each own a session and run a closed loop: POST a turn (20 tokens, no
delay, no tools; the scripted model echoes the user's message once the session's script is
exhausted, so the script is empty and the message is the reply), wait until Postgres says the
turn ended, POST the next. A client moves to a fresh session every `turns_per_session` turns
so no session outgrows the history window (no summaries in the measurement). With `users`
above the worker's concurrency the `llm` queue never runs dry. After a warm-up, the turns that
finished inside the window (their `finished_at`) are counted.

Chains: the same number of chains in flight (published from this process), each noop → noop →
done, the last one counting the chain in Redis; chains completed inside the window are counted.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from .client import create_session, submit_turn, words
from .common import Bench, Sampler, run
from .stack import CHAIN_APP, CHAIN_QUEUE, WorkerSpec, cores_used
from .stats import summary

TOKENS = 20


async def drive_turns(
    b: Bench, *, users: int, warm_s: float, window_s: float, turns_per_session: int
) -> dict[str, Any]:
    stack = b.stack
    content = words(TOKENS)
    pending: dict[str, asyncio.Future[str]] = {}
    statuses: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    post_ms: list[float] = []

    async def poller() -> None:
        async with await psycopg.AsyncConnection.connect(stack.pg_dsn, autocommit=True) as conn:
            while not (stop.is_set() and not pending):
                ids = list(pending)
                if ids:
                    cur = await conn.execute(
                        "SELECT id::text, status FROM turns WHERE id = ANY(%s::uuid[]) "
                        "AND status IN ('done', 'failed', 'cancelled')",
                        (ids,),
                    )
                    for tid, status in await cur.fetchall():
                        fut = pending.pop(tid, None)
                        if fut is not None and not fut.done():
                            fut.set_result(status)
                await asyncio.sleep(0.02)

    async def user(http: Any) -> None:
        while not stop.is_set():
            try:
                sid = await create_session(http, [])
                for _ in range(turns_per_session):
                    if stop.is_set():
                        return
                    t_post = time.monotonic()
                    tid = await submit_turn(http, sid, content)
                    post_ms.append((time.monotonic() - t_post) * 1000)
                    fut: asyncio.Future[str] = loop.create_future()
                    pending[tid] = fut
                    statuses[await asyncio.wait_for(fut, 120)] += 1
            except Exception as exc:
                errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
                await asyncio.sleep(0.2)

    async with b.posters(users) as clients:
        poll = asyncio.create_task(poller())
        tasks = [asyncio.create_task(user(http)) for http in clients]
        await asyncio.sleep(warm_s)
        t0_wall, t0, cpu0 = time.time(), time.monotonic(), stack.cpu_seconds()
        n_post0 = len(post_ms)
        with Sampler(lambda: _queue_length(b, "llm"), every=0.25) as backlog:
            await asyncio.sleep(window_s)
        t1_wall, t1, cpu1 = time.time(), time.monotonic(), stack.cpu_seconds()
        window_posts = post_ms[n_post0:]
        stop.set()
        await asyncio.wait(tasks, timeout=60)
        for t in tasks:
            t.cancel()
        await asyncio.wait_for(poll, 30)
    rows = stack.psql(
        "SELECT count(*) FILTER (WHERE status = 'done'), count(*) FROM turns "
        "WHERE finished_at >= to_timestamp(%s) AND finished_at < to_timestamp(%s)",
        (t0_wall, t1_wall),
    )
    done, ended = rows[0]
    return {
        "turns_per_s": done / (t1 - t0),
        "done_in_window": done,
        "ended_in_window": ended,
        "window_s": round(t1 - t0, 2),
        "statuses": dict(statuses),
        "client_errors": dict(errors),
        "cores_used": cores_used(cpu0, cpu1, t1 - t0),
        "llm_queue_length_mean": round(statistics.fmean(backlog.values() or [0]), 1),
        "post_turn_ms": summary(window_posts, (50, 95)),
    }


def _queue_length(b: Bench, queue: str) -> int:
    r = b.stack.redis_client(timeout=2)
    try:
        return int(r.llen(queue))
    finally:
        r.close()


def _chain_env(b: Bench) -> None:
    """Point this process's settings at the stack (the chain app reads them at import)."""
    from cortex_workers.settings import reset_settings

    for k in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
        os.environ[k] = b.stack.env[k]
    reset_settings()


def drive_chains(b: Bench, *, inflight: int, warm_s: float, window_s: float) -> dict[str, Any]:
    _chain_env(b)
    from .chain_app import DONE_KEY, app, three_step_chain

    app.conf.broker_url = b.stack.broker_url
    r = b.stack.redis_client()
    r.set(DONE_KEY, 0)
    published = 0
    t_start = time.monotonic()
    t0 = t1 = 0.0
    c0 = c1 = 0
    cpu0: dict[str, float] = {}
    cpu1: dict[str, float] = {}
    backlog: list[int] = []
    with app.producer_or_acquire() as producer:
        while True:
            now = time.monotonic()
            done = int(r.get(DONE_KEY) or 0)
            if not t0 and now - t_start >= warm_s:
                t0, c0, cpu0 = now, done, b.stack.cpu_seconds()
            if t0 and now - t0 >= window_s:
                t1, c1, cpu1 = now, done, b.stack.cpu_seconds()
                break
            for _ in range(max(0, inflight - (published - done))):
                three_step_chain().apply_async(producer=producer)
                published += 1
            if t0:
                backlog.append(int(r.llen(CHAIN_QUEUE)))
            time.sleep(0.002)
    # drain, so the next measurement starts on an idle system
    deadline = time.monotonic() + 60
    while int(r.get(DONE_KEY) or 0) < published and time.monotonic() < deadline:
        time.sleep(0.05)
    r.close()
    return {
        "chains_per_s": (c1 - c0) / (t1 - t0),
        "done_in_window": c1 - c0,
        "window_s": round(t1 - t0, 2),
        "published": published,
        "cores_used": cores_used(cpu0, cpu1, t1 - t0),
        "queue_length_mean": round(statistics.fmean(backlog or [0]), 1),
    }


def profile_pass(b: Bench, *, users: int, window_s: float, out_dir: Path) -> dict[str, Any]:
    """One more (unreported) turn window with py-spy sampling the llm worker and the API."""
    from .profiling import py_spy_record, summarize

    out_dir.mkdir(parents=True, exist_ok=True)
    warm_s = 2.0
    spies: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start_spies() -> None:
        time.sleep(warm_s)
        for name, gil in (("llm", True), ("llm", False), ("api", True), ("api", False)):
            kind = "gil" if gil else "wall"
            path = out_dir / f"{name}-{kind}.collapsed.txt"
            pid = b.stack.pid(name)
            spawner = b.stack.spawner
            assert spawner is not None
            spy = spawner.call(lambda: py_spy_record(pid, path, window_s, gil=gil))  # noqa: B023
            spies.append((f"{name}-{kind}", spy, path))

    starter = threading.Thread(target=start_spies, daemon=True)
    starter.start()
    result: dict[str, Any] = {
        "turns": run(
            drive_turns(b, users=users, warm_s=warm_s, window_s=window_s + 1, turns_per_session=8)
        )
    }
    starter.join()
    for name, proc, path in spies:
        try:
            _, err = proc.communicate(timeout=window_s + 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=5)
        if path.exists():
            result[name] = {"file": str(path), **summarize(path)}
        else:
            result[name] = {"error": err.decode(errors="replace")[-500:]}
    return result


def throughput(b: Bench) -> None:
    a, stack = b.args, b.stack
    from .concurrency import parse_pools

    spec: WorkerSpec = parse_pools(a.tput_pool)[0]
    original = stack.worker_specs["llm"]
    if (spec.pool, spec.concurrency) != (original.pool, original.concurrency):
        b.say(f"throughput: llm worker {spec.label}")
        stack.run_worker("llm", spec)
    users = a.tput_users
    b.say(f"throughput: chain worker ({spec.label}) on queue {CHAIN_QUEUE}")
    stack.run_worker("chain", spec, queues=CHAIN_QUEUE, app=CHAIN_APP)
    turns = b.figure(
        "turns_per_s",
        f"turn throughput, llm worker {spec.label}",
        "turns/s",
    )
    chains = b.figure("chains_per_s", f"bare 3-task chain, worker {spec.label}", "chains/s")
    ratio = b.figure(
        "turn_chain_ratio", "turn / chain throughput", "×", target="≥ 1.0×", higher_is_better=True
    )
    reps: list[dict[str, Any]] = []
    try:
        for rep in range(a.reps):
            # alternate the order (turns first, then chains first) so that drifting machine
            # load does not always favour the same side
            if rep % 2:
                c = drive_chains(b, inflight=users, warm_s=a.tput_warmup, window_s=a.tput_window)
            t = run(
                drive_turns(
                    b,
                    users=users,
                    warm_s=a.tput_warmup,
                    window_s=a.tput_window,
                    turns_per_session=8,
                )
            )
            if not rep % 2:
                c = drive_chains(b, inflight=users, warm_s=a.tput_warmup, window_s=a.tput_window)
            turns.reps.append(t["turns_per_s"])
            chains.reps.append(c["chains_per_s"])
            ratio.reps.append(t["turns_per_s"] / c["chains_per_s"])
            reps.append({"turns": t, "chains": c})
            b.say(
                f"  rep {rep + 1}: {t['turns_per_s']:.1f} turns/s "
                f"(errors {t['client_errors'] or 'none'}), {c['chains_per_s']:.1f} chains/s"
            )
        if a.profile:
            b.say(f"throughput: profiling one more window into {a.profile}")
            b.details["profile"] = profile_pass(
                b, users=users, window_s=a.tput_window, out_dir=Path(a.profile)
            )
    finally:
        stack.stop_worker("chain")
        if stack.worker_specs["llm"] is not original:
            stack.run_worker("llm", original)
    ratio.reached = ratio.value >= 1.0
    b.details["throughput"] = {
        "users": users,
        "worker": spec.label,
        "tokens_per_turn": TOKENS,
        "warmup_s": a.tput_warmup,
        "window_s": a.tput_window,
        "reps": reps,
    }
