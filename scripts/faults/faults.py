"""Fault schedules, one per scenario. Each is bounded by a duration and a maximum count, runs in
its own thread, and records for every fault when it fired and what was in flight at that moment
(leased steps by kind, running turns, model steps that had streamed output not yet committed)."""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from .driver import Driver, HttpLog
from .stack import Stack

log = logging.getLogger("faults.schedule")


@dataclass
class FaultRecord:
    kind: str
    t: float
    t_end: float | None = None
    in_flight: dict[str, Any] = field(default_factory=dict)
    landed: bool = False
    """Work was running when it fired (see `landed_on`)."""
    landed_on: int = 0
    """How many steps (or, for SSE drops, streams) were mid-flight when it fired."""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self, t0: float) -> dict[str, Any]:
        out = asdict(self)
        out["t_rel"] = round(self.t - t0, 2)
        out["t_end_rel"] = round(self.t_end - t0, 2) if self.t_end else None
        return out


def _leased(infl: dict[str, Any], *kinds: str) -> int:
    leased = infl.get("leased", {})
    return sum(int(leased.get(k, 0)) for k in kinds) if kinds else sum(leased.values())


class Schedule:
    """Base: call `start()`, then `stop()`; `records` holds what fired."""

    name = "none"

    def __init__(
        self,
        stack: Stack,
        driver: Driver,
        *,
        duration_s: float,
        max_faults: int,
        seed: int,
        warmup_s: float = 3.0,
    ) -> None:
        self.stack = stack
        self.driver = driver
        self.duration_s = duration_s
        self.max_faults = max_faults
        self.rng = random.Random(f"faults-{seed}")
        self.warmup_s = warmup_s
        self.records: list[FaultRecord] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run_safe, name=f"faults-{self.name}", daemon=True
        )
        self.t0 = 0.0
        self.error: str | None = None

    def prepare(self) -> None:
        """What the schedule needs in place before the driver submits anything (nothing by
        default)."""

    def start(self) -> None:
        self.t0 = time.time()
        self._thread.start()

    def stop(self, timeout: float = 60) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run_safe(self) -> None:
        try:
            self.run()
        except Exception as exc:  # reported, never silent
            log.exception("fault schedule %s failed", self.name)
            self.error = f"{type(exc).__name__}: {exc}"

    def _over(self) -> bool:
        return (
            self._stop.is_set()
            or time.time() - self.t0 >= self.duration_s
            or len(self.records) >= self.max_faults
            or self.driver.all_done()
        )

    def _sleep(self, seconds: float) -> bool:
        """Sleep in small steps; False when the schedule is over meanwhile."""
        end = time.time() + seconds
        while time.time() < end:
            if self._over():
                return False
            self._stop.wait(min(0.2, max(0.0, end - time.time())))
        return not self._over()

    def _at(self, fraction: float) -> float:
        """Seconds from start for a fault at `fraction` of the window (after the warm-up)."""
        return self.warmup_s + fraction * max(0.0, self.duration_s - self.warmup_s)

    def _pick_moment(self, wait_s: float = 8.0) -> dict[str, Any]:
        """Wait (a little) for a moment when some running turn has committed model text and a
        later step is mid-flight: losing Redis then loses events a fresh client needs."""
        end = time.time() + wait_s
        infl = self.stack.in_flight()
        while time.time() < end and not self._stop.is_set():
            if infl.get("running_with_committed_text", 0) > 0 and _leased(infl) > 0:
                break
            time.sleep(0.25)
            infl = self.stack.in_flight()
        return infl

    def collect(self) -> None:
        """Add the SSE clients' own drops (DriverConfig.disconnect_p) as faults; a drop landed
        when it came mid-step (the last event received was a token)."""
        for d in self.driver.disconnect_log:
            self.records.append(
                FaultRecord(
                    kind="sse_disconnect" + ("_late" if d["late"] else ""),
                    t=d["t"],
                    landed=bool(d["mid_step"]),
                    landed_on=1 if d["mid_step"] else 0,
                    details={k: d[k] for k in ("turn_id", "last_id", "last_event")},
                )
            )

    def run(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def summary(self) -> dict[str, Any]:
        return {
            "schedule": self.name,
            "fired": len(self.records),
            "landed": sum(1 for r in self.records if r.landed),
            "steps_mid_flight": sum(r.landed_on for r in self.records),
            "error": self.error,
        }


class WorkerKills(Schedule):
    """Scenario 1: SIGKILL the `llm` or the `tools` worker at random every 5–15 s; the stack's
    supervisor restarts it after ~1 s."""

    name = "worker_kills"
    interval_s = (5.0, 15.0)
    _last_kill: dict[str, float]

    def start(self) -> None:
        self._last_kill = {}
        super().start()

    def run(self) -> None:
        if not self._sleep(self.warmup_s):
            return
        while not self._over():
            if not self._sleep(self.rng.uniform(*self.interval_s)):
                return
            target = self.rng.choice(["llm", "llm", "tools"])
            kind = {"llm": "model", "tools": "tool"}[target]
            since = self._last_kill.get(target, 0.0)
            infl = self.stack.in_flight(since=since)
            # tool calls are short: give the tools worker a few seconds to be busy
            wait_end = time.time() + (5.0 if target == "tools" else 0.0)
            while _leased(infl, kind) == 0 and time.time() < wait_end and not self._over():
                time.sleep(0.2)
                infl = self.stack.in_flight(since=since)
            pid = self.stack.kill(target, signal.SIGKILL)
            if pid is None:  # still down from the previous kill
                continue
            self._last_kill[target] = time.time()
            n = _leased(infl, kind)
            self.records.append(
                FaultRecord(
                    kind=f"kill_{target}",
                    t=time.time(),
                    in_flight=infl,
                    landed=n > 0,
                    landed_on=n,
                    details={"pid": pid},
                )
            )
            log.info("SIGKILL %s (pid %s): %d %s steps in flight", target, pid, n, kind)


class RedisRestarts(Schedule):
    """Scenario 2: SIGKILL Valkey mid-run and start it again (same port) after a few seconds;
    with the append-only file on, data survives; with it off, everything in Redis is gone
    (streams, queued tasks, RedBeat's schedule)."""

    name = "redis_restarts"
    down_s = (2.0, 5.0)

    def run(self) -> None:
        fractions = [0.25, 0.6, 0.85][: self.max_faults]
        for frac in fractions:
            if not self._sleep(max(0.0, self.t0 + self._at(frac) - time.time())):
                return
            infl = self._pick_moment()
            running = self.stack.running_turn_ids()
            t = time.time()
            self.stack.redis_kill()
            down = self.rng.uniform(*self.down_s)
            time.sleep(down)  # bounded; the restart must happen even if the run is over
            self.stack.redis_start()
            n = _leased(infl)
            self.records.append(
                FaultRecord(
                    kind="redis_kill_restart",
                    t=t,
                    t_end=time.time(),
                    in_flight=infl,
                    landed=n > 0,
                    landed_on=n,
                    details={"down_s": round(down, 2), "persist": self.stack.cfg.redis_persist},
                )
            )
            self.records[-1].details["fresh_observers"] = self.driver.observe_running(
                "after redis restart", prefer=running
            )
            log.info("redis killed and restarted after %.1fs: %d steps in flight", down, n)


class RedisPause(Schedule):
    """Scenario 4: SIGSTOP Valkey for 20 s, then SIGCONT."""

    name = "redis_pause"
    pause_s = 20.0

    def run(self) -> None:
        fractions = [0.2, 0.65][: self.max_faults]
        for frac in fractions:
            if not self._sleep(max(0.0, self.t0 + self._at(frac) - time.time())):
                return
            infl = self.stack.in_flight()
            running = self.stack.running_turn_ids()
            t = time.time()
            self.stack.redis_pause()
            try:
                time.sleep(self.pause_s)
            finally:
                self.stack.redis_resume()
            n = _leased(infl)
            self.records.append(
                FaultRecord(
                    kind="redis_pause",
                    t=t,
                    t_end=time.time(),
                    in_flight=infl,
                    landed=n > 0,
                    landed_on=n,
                    details={"pause_s": self.pause_s},
                )
            )
            self.records[-1].details["fresh_observers"] = self.driver.observe_running(
                "after redis pause", prefer=running
            )
            log.info("redis paused %.0fs: %d steps in flight", self.pause_s, n)


class Poller:
    """Hits the API during a Postgres outage and records what it answers: 503 with the error
    shape is right; a 500 (or an error without the shape) is a violation."""

    def __init__(self, stack: Stack, driver: Driver) -> None:
        self.stack = stack
        self.driver = driver
        self.http = HttpLog()
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outage-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _targets(self) -> list[tuple[str, str, str]]:
        sid = next((s["id"] for s in self.driver.sessions if s.get("id")), None)
        tid = next((r.turn_id for r in self.driver.records if r.turn_id), None)
        out = [("GET", "/readyz", "GET /readyz"), ("POST", "/v1/sessions", "POST /v1/sessions")]
        if sid:
            out += [
                ("GET", f"/v1/sessions/{sid}", "GET /v1/sessions/{sid}"),
                ("GET", f"/v1/sessions/{sid}/messages", "GET /v1/sessions/{sid}/messages"),
            ]
        if tid:
            out += [
                ("GET", f"/v1/turns/{tid}", "GET /v1/turns/{tid}"),
                ("SSE", f"/v1/turns/{tid}/events", "GET /v1/turns/{tid}/events"),
            ]
        return out

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.stack.api_key}"}
        with httpx.Client(base_url=self.stack.api_base, headers=headers, timeout=10) as client:
            while not self._stop.is_set():
                for method, path, what in self._targets():
                    if self._stop.is_set():
                        break
                    t = time.time()
                    try:
                        if method == "SSE":
                            with client.stream("GET", path) as r:
                                body = r.read() if r.status_code != 200 else b""
                                status = r.status_code
                        elif method == "POST":
                            r = client.post(path, json={"name": "outage-probe"})
                            status, body = r.status_code, r.content
                        else:
                            r = client.get(path)
                            status, body = r.status_code, r.content
                        self.http.record(what, status, body)
                        self.samples.append({"t": t, "what": what, "status": status})
                    except httpx.HTTPError as exc:
                        self.http.error(what, exc)
                        self.samples.append({"t": t, "what": what, "status": type(exc).__name__})
                self._stop.wait(0.3)


class PostgresRestarts(Schedule):
    """Scenario 3: stop Postgres (fast shutdown: connections are cut, open transactions roll
    back) for a few seconds mid-run and start it again, polling the API meanwhile."""

    name = "postgres_restarts"
    outage_s = (6.0, 10.0)
    mode = "fast"

    def run(self) -> None:
        fractions = [0.3, 0.7][: self.max_faults]
        for frac in fractions:
            if not self._sleep(max(0.0, self.t0 + self._at(frac) - time.time())):
                return
            infl = self.stack.in_flight()
            running = self.stack.running_turn_ids()
            poller = Poller(self.stack, self.driver)
            poller.start()
            t = time.time()
            outage = self.rng.uniform(*self.outage_s)
            try:
                self.stack.pg_stop(self.mode)
                t_down = time.time()
                time.sleep(outage)
            finally:
                self.stack.pg_start()
            t_up = time.time()
            time.sleep(3.0)  # keep polling while the API reconnects
            poller.stop()
            n = _leased(infl)
            during = [s for s in poller.samples if t_down <= s["t"] <= t_up]
            codes: dict[str, int] = {}
            for s in during:
                key = f"{s['what']} {s['status']}"
                codes[key] = codes.get(key, 0) + 1
            self.records.append(
                FaultRecord(
                    kind=f"postgres_restart_{self.mode}",
                    t=t,
                    t_end=t_up,
                    in_flight=infl,
                    landed=n > 0,
                    landed_on=n,
                    details={
                        "outage_s": round(t_up - t_down, 2),
                        "codes_during_outage": dict(sorted(codes.items())),
                        "poll": poller.http.summary(),
                    },
                )
            )
            self.records[-1].details["fresh_observers"] = self.driver.observe_running(
                "after postgres restart", prefer=running
            )
            log.info("postgres down %.1fs: %d steps in flight", t_up - t_down, n)

    def violations(self) -> list[dict[str, Any]]:
        out = []
        for r in self.records:
            out += r.details.get("poll", {}).get("violations", [])
        return out


class SseDisconnects(Schedule):
    """Scenario 5: the faults are the clients' own: each SSE follower drops its connection at
    random (see DriverConfig.disconnect_p) and resumes with `Last-Event-ID` (or `?after=`),
    some of them only after the stream has expired (snapshot from Postgres). This schedule
    only collects them."""

    name = "sse_disconnects"

    def run(self) -> None:
        while not self._over():
            self._stop.wait(0.5)

    def _over(self) -> bool:
        return self._stop.is_set() or self.driver.all_done()


class NoFaults(Schedule):
    name = "none"

    def run(self) -> None:
        with contextlib.suppress(Exception):
            while not self._over():
                self._stop.wait(0.5)


class SseDisconnectsWithKills(WorkerKills):
    """Scenario 5k (5 and 1 together): SSE clients drop and resume, some after the stream has
    expired, while the llm and tools workers are SIGKILLed, so resumptions cross retried
    attempts of a step (live and from the Postgres snapshot)."""

    name = "sse_disconnects_with_kills"


class Partitions(Schedule):
    """Scenario 6: a worker cut off from Postgres, then another cut off from Redis (and its
    broker), each through a TCP proxy the harness controls, while they hold leases; each
    partition lasts 8-12 s and is then healed. Both workers are extra `llm` workers; the
    stack's own keep serving."""

    name = "partitions"
    cut_s = (8.0, 12.0)

    def prepare(self) -> None:
        """The two extra workers, ready before the first turn: a worker still starting when
        the turns run (on a loaded machine that takes tens of seconds) would find none left."""
        from .proxy import Proxy

        st = self.stack
        assert st.pg_socket_dir is not None
        self.pg = Proxy(st.pg_socket_dir / ".s.PGSQL.5432")
        self.redis = Proxy(("127.0.0.1", st.redis_port))
        via_pg = f"postgresql+psycopg://postgres@127.0.0.1:{self.pg.port}/postgres"
        via_redis = f"redis://127.0.0.1:{self.redis.port}/0"
        st.add_worker("llm-pg", "llm", DATABASE_URL=via_pg)
        broker = {"CELERY_BROKER_URL": via_redis} if st.broker_url == st.redis_url else {}
        st.add_worker("llm-redis", "llm", REDIS_URL=via_redis, **broker)

    def stop(self, timeout: float = 60) -> None:
        super().stop(timeout)
        for proxy in (self.pg, self.redis):
            proxy.heal()

    def _held_by(self, name: str) -> int:
        """Steps the worker `name` holds a lease on; 0 when Postgres does not answer in time (on
        a loaded machine a probe may time out: the schedule then goes on, it must not die)."""
        import psycopg

        proc = self.stack.procs[name]
        if proc.popen is None:
            return 0
        try:
            with psycopg.connect(self.stack.pg_dsn, connect_timeout=5, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM steps WHERE status = 'leased' AND holder LIKE %s",
                    (f"%:{proc.popen.pid}:%",),
                ).fetchone()
        except psycopg.Error as exc:
            log.warning("partition: could not count the steps %s holds: %s", name, exc)
            return 0
        return int(row[0]) if row else 0

    def run(self) -> None:
        if not self._sleep(self.warmup_s):
            return
        for name, proxy, what in (
            ("llm-pg", self.pg, "postgres"),
            ("llm-redis", self.redis, "redis"),
        ):
            end = time.time() + 45  # under load the extra worker may take a while to lease
            while self._held_by(name) == 0 and time.time() < end and not self._stop.is_set():
                time.sleep(0.2)
            held, infl = self._held_by(name), self.stack.in_flight()
            proxy.cut()
            cut_at = time.time()
            log.info("partition: %s cut off from %s holding %d steps", name, what, held)
            self._stop.wait(self.rng.uniform(*self.cut_s))
            proxy.heal()
            self.records.append(
                FaultRecord(
                    kind=f"partition_{what}",
                    t=cut_at,
                    in_flight=infl,
                    landed=held > 0,
                    landed_on=held,
                    details={"worker": name, "healed_after_s": round(time.time() - cut_at, 1)},
                )
            )
            log.info("partition: %s healed", name)
            if self._stop.wait(3.0):
                return
