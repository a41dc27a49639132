"""Figure 4: how many slow model calls one `llm` worker process runs at once, per pool.

Each turn's model streams 20 tokens 500 ms apart (first token at once, ~9.5 s in all). For each
pool and each N (10, 50, 200, 500, 1000, up to `--conc-max`): the `llm` worker is stopped, N
turns are posted on N fresh sessions (their model steps wait in the broker), then one worker
process with that pool is started, so all N calls are there for it at once. (Posting 1,000 turns
through the API takes several seconds here, longer than a call lasts, so with the worker running
the calls would never all overlap.)

Measured: when each call's first token reached its Redis Stream (polling `XLEN` of the streams
still waiting, every 0.2 s) and when its turn finished (`finished_at`), hence the most calls
streaming at the same instant, how many started within 1.5 s of the worker logging `ready`, how
long the longest call took (first token to finish; 9.5 s when nothing slows it down), and the
worker's resident memory (the process and its children, every 0.5 s; peak; prefork counts
every pool process). The pool's figure is the most calls that streamed at once *unslowed*: at a
level where no call took more than 1.5 × its nominal 9.5 s and none failed. A level where
fewer than N calls streamed at once (or not all finished) is the pool's limit: higher levels
are not tried. Turns still unfinished when a level's window
closes (9.5 s + 10 s + N/100 s after the start) are cancelled through the API, and the queue is
purged, before the next level.
"""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import datetime
from typing import Any

import psutil

from .client import cancel_turn, create_session, fan, ok, submit_turn, words
from .common import Bench, Sampler, run
from .stack import WorkerSpec
from .stats import fmt, percentile

TOKENS = 20
START_WITHIN_S = 1.5
SLOWED = 1.5
"""A call that took longer than this many times its nominal length was slowed down: the
worker could not keep up with its tokens."""


def parse_pools(text: str) -> list[WorkerSpec]:
    """`prefork:cores,prefork:8,threads:1000,gevent:1000` → worker specs."""
    out = []
    for item in text.split(","):
        pool, _, conc = item.strip().partition(":")
        if not pool:
            continue
        n = os.cpu_count() or 1 if conc in ("", "cores") else int(conc)
        out.append(WorkerSpec(pool, n))
    return out


class FirstTokens:
    """Polls the Redis Streams of turns that have not streamed yet; notes when each did."""

    def __init__(self, b: Bench, every: float = 0.2) -> None:
        self._redis = b.stack.redis_client(timeout=10)
        self._lock = threading.Lock()
        self._waiting: dict[str, float] = {}
        self.first: dict[str, float] = {}
        self.first_wall: dict[str, float] = {}
        self.errors: list[str] = []
        self.cycles: list[float] = []
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-first-tokens", daemon=True)

    def add(self, tid: str) -> None:
        with self._lock:
            self._waiting[tid] = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            with self._lock:
                ids = list(self._waiting)
            for chunk in (ids[i : i + 200] for i in range(0, len(ids), 200)):
                pipe = self._redis.pipeline(transaction=False)
                for tid in chunk:
                    pipe.xlen(f"cortex:turn:{tid}:events")
                try:
                    lengths = pipe.execute()
                except Exception as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    continue
                now, wall = time.monotonic(), time.time()
                with self._lock:
                    for tid, n in zip(chunk, lengths, strict=True):
                        if n >= 2:  # the stream's start marker, then the first token
                            self.first[tid] = now
                            self.first_wall[tid] = wall
                            self._waiting.pop(tid, None)
            self.cycles.append(time.monotonic() - t0)
            self._stop.wait(self._every)

    def __enter__(self) -> FirstTokens:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._redis.close()


def _leased(b: Bench) -> int:
    rows = b.stack.psql("SELECT count(*) FROM steps WHERE kind = 'model' AND status = 'leased'")
    return int(rows[0][0])


def _statuses(b: Bench, ids: list[str]) -> list[tuple[str, str, float | None]]:
    rows = b.stack.psql(
        "SELECT id::text, status, extract(epoch FROM finished_at - created_at) "
        "FROM turns WHERE id = ANY(%s::uuid[])",
        (ids,),
    )
    return [(r[0], r[1], float(r[2]) if r[2] is not None else None) for r in rows]


def _log_problems(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if " ERROR " in line or " CRITICAL " in line or "Error:" in line:
            key = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<id>", line.split(": ", 1)[-1])[:140]
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:8])


def _ready_wall(b: Bench) -> float:
    """When the llm worker logged ` ready.` (wall clock), else now."""
    text = b.stack.procs["llm"].log_text()
    found = re.findall(
        r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/MainProcess\] \S+ ready\.", text
    )
    if not found:
        return time.time()
    return datetime.strptime(found[-1], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of the (start, end) intervals that overlap at one instant."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(z, -1) for _, z in intervals])
    best = level = 0
    for _, step in edges:
        level += step
        best = max(best, level)
    return best


def run_level(
    b: Bench, n: int, spec: WorkerSpec, env: dict[str, str], *, token_ms: int
) -> dict[str, Any]:
    stack = b.stack
    script = [{"text": words(TOKENS), "token_ms": token_ms}]
    model_s = (TOKENS - 1) * token_ms / 1000
    stack.stop_worker("llm")

    async def create() -> list[str]:
        async with b.clients(32) as clients:
            return ok(await fan(clients, range(n), lambda http, _: create_session(http, script)))

    async def submit_all(sids: list[str]) -> list[str | BaseException]:
        async with b.clients(32) as clients:
            return await fan(clients, sids, submit_turn)

    sids = run(create())
    t_submit0 = time.monotonic()
    results = run(submit_all(sids))
    submit_s = time.monotonic() - t_submit0
    ids = [r for r in results if isinstance(r, str)]
    with FirstTokens(b) as firsts:
        for tid in ids:
            firsts.add(tid)
        stack.run_worker("llm", spec, env=env)
        t_ready = _ready_wall(b)
        worker = psutil.Process(stack.pid("llm"))
        cpu0 = _cpu(worker)
        deadline = time.monotonic() + model_s + 10.0 + n / 100
        states: list[tuple[str, str, float | None]] = []
        with (
            Sampler(lambda: stack.rss("llm"), every=0.5) as mem,
            Sampler(lambda: _leased(b), every=0.5) as leased,
        ):
            while time.monotonic() < deadline:
                states = _statuses(b, ids)
                if all(st in ("done", "failed", "cancelled") for _, st, _ in states):
                    break
                time.sleep(0.5)
            cpu1 = _cpu(worker)
    states = _statuses(b, ids)
    unfinished = [tid for tid, st, _ in states if st not in ("done", "failed", "cancelled")]
    if unfinished:
        run(_cancel(b, unfinished))
    finished = dict(
        (r[0], float(r[1]))
        for r in stack.psql(
            "SELECT id::text, extract(epoch FROM finished_at) FROM turns "
            "WHERE id = ANY(%s::uuid[]) AND status = 'done'",
            (ids,),
        )
    )
    first = {t: firsts.first_wall[t] for t in ids if t in firsts.first_wall}
    pickup = [at - t_ready for at in first.values()]
    calls = [(first[t], finished[t]) for t in first if t in finished]
    out = {
        "n": n,
        "submitted": len(ids),
        "submit_errors": len(results) - len(ids),
        "submit_s": round(submit_s, 2),
        "started_within_1_5s": sum(1 for d in pickup if d <= START_WITHIN_S),
        "first_token_after_ready_s": {
            "p50": percentile(pickup, 50),
            "p95": percentile(pickup, 95),
            "max": max(pickup, default=float("nan")),
        },
        "most_streaming_at_once": _most_at_once(calls),
        "peak_leased_model_steps": max(leased.values(), default=0),
        "done": sum(1 for _, st, _ in states if st == "done"),
        "failed": sum(1 for _, st, _ in states if st == "failed"),
        "unfinished_cancelled": len(unfinished),
        "call_s": {
            "p50": percentile([z - a for a, z in calls], 50),
            "max": max((z - a for a, z in calls), default=float("nan")),
        },
        "rss_peak_mib": max((m["rss_mib"] for m in mem.values()), default=0.0),
        "pss_peak_mib": max((m["pss_mib"] for m in mem.values()), default=0.0),
        "worker_processes": max((m["processes"] for m in mem.values()), default=0),
        "worker_cpu_s": round(cpu1 - cpu0, 2),
        "worker_log_problems": _log_problems(stack.procs["llm"].log_text()),
        "poll_errors": firsts.errors[:5],
    }
    _settle(b)
    return out


def _cpu(p: psutil.Process) -> float:
    total = 0.0
    try:
        for q in [p, *p.children(recursive=True)]:
            t = q.cpu_times()
            total += t.user + t.system
    except psutil.Error:
        pass
    return total


async def _cancel(b: Bench, ids: list[str]) -> None:
    async with b.clients(32) as clients:
        await fan(clients, ids, cancel_turn)


def _settle(b: Bench, timeout: float = 20.0) -> None:
    """Wait until the worker holds no model step, then drop what is left in its queue."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _leased(b):
        time.sleep(0.25)
    b.stack.purge_queue("llm")


def redis_pool(a: Any, spec: WorkerSpec) -> int:
    return int(a.conc_redis_pool) or max(100, spec.concurrency + 100)


def db_pool(a: Any, spec: WorkerSpec) -> int:
    return int(a.conc_db_pool) or max(20, spec.concurrency // 10)


def concurrency(b: Bench) -> None:
    a, stack = b.args, b.stack
    pools = parse_pools(a.pools)
    levels = [n for n in a.conc_levels if n <= a.conc_max]
    original = stack.worker_specs.get("llm", WorkerSpec())
    details: dict[str, Any] = {
        "token_ms": a.slow_token_ms,
        "tokens": TOKENS,
        "levels": levels,
        "db_pool_size": {s.label: db_pool(a, s) for s in pools},
        "redis_pool_size": {s.label: redis_pool(a, s) for s in pools},
        "pools": {},
    }
    best: tuple[int, float, str] | None = None
    nominal_s = (TOKENS - 1) * a.slow_token_ms / 1000
    try:
        for spec in pools:
            label = spec.label
            b.say(f"concurrency: llm worker {label}")
            pool_detail: dict[str, Any] = {"levels": []}
            details["pools"][label] = pool_detail
            env = {
                "CORTEX_DB_POOL_SIZE": str(db_pool(a, spec)),
                "CORTEX_REDIS_POOL_SIZE": str(redis_pool(a, spec)),
            }
            capacity, limited = 0, False
            at_capacity: dict[str, Any] = {}
            widest: dict[str, Any] = {}
            for n in levels:
                try:
                    res = run_level(b, n, spec, env, token_ms=a.slow_token_ms)
                except Exception as exc:
                    pool_detail["levels"].append({"n": n, "error": f"{type(exc).__name__}: {exc}"})
                    pool_detail["log_tail"] = stack.log_tail("llm", 3000)
                    b.say(f"  N={n}: error {exc}")
                    limited = True
                    break
                pool_detail["levels"].append(res)
                at_once = res["most_streaming_at_once"]
                if at_once > widest.get("most_streaming_at_once", 0):
                    widest = res
                unslowed = res["call_s"]["max"] <= SLOWED * nominal_s and not res["failed"]
                if unslowed and at_once > capacity:
                    capacity, at_capacity = at_once, res
                b.say(
                    f"  N={n}: streaming at once {at_once}, first token ≤1.5 s after the"
                    f" worker was ready {res['started_within_1_5s']}/{n}"
                    f" (p95 {fmt(res['first_token_after_ready_s']['p95'])} s), done"
                    f" {res['done']}, longest call {fmt(res['call_s']['max'])} s, RSS peak"
                    f" {res['rss_peak_mib']:.0f} MiB, problems"
                    f" {sum(res['worker_log_problems'].values()) or 'none'}"
                )
                if not (at_once == n and res["done"] == n):
                    limited = True  # fewer slots than calls: more calls cannot do better
                    break
            rss_at = float(at_capacity.get("rss_peak_mib", 0.0))
            pool_detail.update(
                capacity=capacity,
                rss_at_capacity_mib=rss_at,
                most_in_flight=widest.get("most_streaming_at_once", 0),
                limit_reached=limited,
            )
            note = f"RSS {rss_at:.0f} MiB" if capacity else ""
            if widest and widest is not at_capacity:
                note += (
                    f"; {widest['most_streaming_at_once']} in flight at N={widest['n']} but"
                    f" the longest call took {fmt(widest['call_s']['max'])} s, RSS"
                    f" {widest['rss_peak_mib']:.0f} MiB"
                )
            elif not limited:
                note += f"; every level up to {levels[-1]} ran"
            f = b.figure(
                f"conc_{spec.pool}_{spec.concurrency}",
                f"10 s calls at once, unslowed, one llm worker, {label}",
                "calls",
                note=note.lstrip("; "),
            )
            f.reps.append(capacity)
            if best is None or (capacity, -rss_at) > (best[0], -best[1]):
                best = (capacity, rss_at, label)
    except KeyboardInterrupt:
        raise  # everything is about to be stopped: no point in restoring the worker
    except BaseException:
        stack.run_worker("llm", original)
        raise
    stack.run_worker("llm", original)
    if best is not None:
        target = b.figure(
            "conc_best",
            f"most 10 s calls at once, unslowed, on one llm worker process (best: {best[2]})",
            "calls",
            target="≥ 1,000, RSS ≤ 1.5 GB",
            note=f"RSS {best[1]:.0f} MiB",
        )
        target.reps.append(best[0])
        target.reached = best[0] >= 1000 and best[1] <= 1536
        details["best"] = {"pool": best[2], "capacity": best[0], "rss_mib": best[1]}
    b.details["concurrency"] = details
