"""Drives sessions of scripted turns through the HTTP API and records what SSE clients receive.

Each session gets a script (`metadata.script`) with slow token streams (`token_ms` 50–150) and
some tool calls, so that steps are mid-flight for seconds. A session either submits its turns
one after another (`sequential`: the next after the previous one's `done`) or all at once
(`burst`, `if_busy=enqueue`: per-session order is the product's job). Every turn has one SSE
follower that records every event and resumes with `Last-Event-ID` when the connection drops
(or, in the SSE scenario, when it decides to drop it). Submissions carry an `Idempotency-Key`
and are retried on 5xx / connection errors, so a retried POST cannot create a second turn.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

log = logging.getLogger("faults.driver")

TERMINAL = ("done", "failed", "cancelled")
WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]
TOOLS = ["calculate", "current_time", "chaos_sleep"]


@dataclass(frozen=True)
class Ev:
    id: str
    event: str
    data: dict[str, Any]
    t: float
    conn: int


class SseLines:
    """An SSE body parsed line by line: `feed` returns (id, event, data) when an event ends;
    comments (pings) are skipped."""

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.data: list[str] = []

    def feed(self, line: str) -> tuple[str, str, str] | None:
        if line == "":
            event = None
            if self.data:
                event = (
                    self.fields.get("id", ""),
                    self.fields.get("event", "message"),
                    "\n".join(self.data),
                )
            self.fields, self.data = {}, []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self.data.append(value)
        else:
            self.fields[name] = value
        return None


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, str, str]]:
    """(id, event, data) of an SSE body; comments (pings) are skipped."""
    parser = SseLines()
    for line in lines:
        if (event := parser.feed(line)) is not None:
            yield event


def error_shape_ok(body: bytes) -> bool:
    try:
        doc = json.loads(body)
    except ValueError:
        return False
    err = doc.get("error") if isinstance(doc, dict) else None
    return (
        isinstance(err, dict)
        and isinstance(err.get("code"), str)
        and isinstance(err.get("message"), str)
        and "details" in err
    )


class HttpLog:
    """Every status code the clients saw, and every response that breaks the API's rules:
    a 5xx other than 503, or an error without the `{"error": {code, message, details}}` shape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.violations: list[dict[str, Any]] = []
        self.errors: Counter[str] = Counter()

    def record(self, what: str, status: int, body: bytes | None = None) -> None:
        with self._lock:
            self.counts[f"{what} {status}"] += 1
            if status < 400:
                return
            shape = error_shape_ok(body or b"")
            if (status >= 500 and status != 503) or not shape:
                self.violations.append(
                    {
                        "t": time.time(),
                        "what": what,
                        "status": status,
                        "error_shape": shape,
                        "body": (body or b"")[:400].decode(errors="replace"),
                    }
                )

    def error(self, what: str, exc: BaseException) -> None:
        with self._lock:
            self.errors[f"{what} {type(exc).__name__}"] += 1

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {
                "status_counts": dict(sorted(self.counts.items())),
                "transport_errors": dict(sorted(self.errors.items())),
                "violations": list(self.violations),
                "http_500": sum(1 for v in self.violations if v["status"] >= 500),
            }


@dataclass
class TurnRecord:
    session_idx: int
    turn_idx: int
    content: str
    expected_text: str
    """What the stored assistant messages should say if every earlier turn of the session
    finished normally (the scripted provider consumes one reply per model step)."""
    tool_calls: int
    idem_key: str
    session_id: str = ""
    turn_id: str | None = None
    submit_codes: list[Any] = field(default_factory=list)
    submit_started: float = 0.0
    accepted_at: float | None = None
    submit_gave_up: bool = False
    submit_error: dict[str, Any] | None = None
    events: list[Ev] = field(default_factory=list)
    connections: int = 0
    sse_codes: list[Any] = field(default_factory=list)
    forced_disconnects: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    """Connections that ended without `done` and were not dropped on purpose."""
    saw_done: bool = False
    done_at: float | None = None
    follower_gave_up: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session_idx,
            "turn": self.turn_idx,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "submit_codes": self.submit_codes,
            "submit_gave_up": self.submit_gave_up,
            "submit_error": self.submit_error,
            "connections": self.connections,
            "sse_codes": self.sse_codes,
            "forced_disconnects": len(self.forced_disconnects),
            "dropped": self.dropped,
            "saw_done": self.saw_done,
            "events": len(self.events),
        }


@dataclass
class Observer:
    """A second client of a turn that connects fresh (no Last-Event-ID) at some moment, e.g.
    a page reload right after a fault: it must still rebuild the stored text."""

    turn_id: str
    reason: str
    started: float
    events: list[Ev] = field(default_factory=list)
    connections: int = 0
    saw_done: bool = False


@dataclass
class DriverConfig:
    sessions: int = 4
    turns: int = 5
    seed: int = 1
    token_ms: tuple[int, int] = (50, 150)
    first_token_ms: tuple[int, int] = (0, 300)
    tokens: tuple[int, int] = (8, 28)
    tool_share: float = 0.45
    """Share of turns whose first reply calls tools (then a second model step answers)."""
    burst_share: float = 0.5
    """Share of sessions that post all their turns at once (`if_busy=enqueue`)."""
    think_s: tuple[float, float] = (0.0, 0.5)
    # SSE disconnect policy (scenario 5); 0 = only faults disconnect.
    disconnect_p: float = 0.0
    """Per received event, the chance the client drops the connection and resumes."""
    late_reconnect_p: float = 0.0
    """Of those drops, the share that waits `late_reconnect_s` before resuming."""
    late_reconnect_s: float = 0.0
    use_after_param_p: float = 0.0
    """Of the resumptions, the share that uses `?after=` instead of the `Last-Event-ID` header."""
    max_disconnects: int = 10_000
    read_timeout_s: float = 30.0
    submit_timeout_s: float = 150.0
    follow_timeout_s: float = 400.0


class Driver:
    def __init__(self, base_url: str, api_key: str, cfg: DriverConfig, run_id: str) -> None:
        self.base = base_url
        self.key = api_key
        self.cfg = cfg
        self.run_id = run_id
        self.rng = random.Random(cfg.seed)
        self.http = HttpLog()
        self.records: list[TurnRecord] = []
        self.sessions: list[dict[str, Any]] = []
        self._threads: list[threading.Thread] = []
        self._followers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.abort = threading.Event()
        self.disconnects = 0
        self.disconnect_log: list[dict[str, Any]] = []
        self.started_at = 0.0
        self.finished = threading.Event()
        self.observers: list[Observer] = []
        self._observer_threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ plan

    def _text(self, rng: random.Random, tag: str) -> str:
        n = rng.randint(*self.cfg.tokens)
        return " ".join([tag, *(rng.choice(WORDS) for _ in range(n - 1))]) + "."

    def _reply(self, rng: random.Random, text: str, **extra: Any) -> dict[str, Any]:
        return {
            "text": text,
            "token_ms": rng.randint(*self.cfg.token_ms),
            "first_token_ms": rng.randint(*self.cfg.first_token_ms),
            **extra,
        }

    def _tool_calls(self, rng: random.Random) -> list[dict[str, Any]]:
        calls = []
        for _ in range(rng.choice((1, 1, 2))):
            name = rng.choice(TOOLS)
            if name == "calculate":
                args: dict[str, Any] = {
                    "expression": f"{rng.randint(2, 99)} * {rng.randint(2, 99)}"
                }
            elif name == "chaos_sleep":
                args = {"seconds": round(rng.uniform(1.0, 3.5), 2)}
            else:
                args = {}
            calls.append({"name": name, "arguments": args})
        return calls

    def plan(self) -> None:
        """Scripts and turn records for every session (deterministic for a seed)."""
        for s in range(self.cfg.sessions):
            rng = random.Random(f"{self.cfg.seed}-{s}")
            mode = "burst" if rng.random() < self.cfg.burst_share else "sequential"
            script: list[dict[str, Any]] = []
            records = []
            for k in range(self.cfg.turns):
                tag = f"S{s}T{k}"
                if rng.random() < self.cfg.tool_share:
                    first = self._text(rng, f"{tag}a")
                    calls = self._tool_calls(rng)
                    second = self._text(rng, f"{tag}b")
                    script += [
                        self._reply(rng, first + " ", tool_calls=calls),
                        self._reply(rng, second),
                    ]
                    expected, ncalls = first + " " + second, len(calls)
                else:
                    text = self._text(rng, f"{tag}a")
                    script.append(self._reply(rng, text))
                    expected, ncalls = text, 0
                records.append(
                    TurnRecord(
                        session_idx=s,
                        turn_idx=k,
                        content=f"[{self.run_id}] session {s} turn {k}: go on",
                        expected_text=expected,
                        tool_calls=ncalls,
                        idem_key=f"faults-{self.run_id}-s{s}-t{k}",
                    )
                )
            self.sessions.append({"idx": s, "mode": mode, "script": script, "id": None})
            self.records += records

    # ------------------------------------------------------------------ run

    def start(self) -> None:
        if not self.records:
            self.plan()
        self.started_at = time.time()
        for sess in self.sessions:
            t = threading.Thread(
                target=self._session, args=(sess,), name=f"session-{sess['idx']}", daemon=True
            )
            self._threads.append(t)
            t.start()
        threading.Thread(target=self._watch_done, daemon=True).start()

    def _watch_done(self) -> None:
        for t in self._threads:
            t.join()
        self.finished.set()

    def join(self, timeout: float) -> bool:
        return self.finished.wait(timeout)

    def stop(self) -> None:
        self.abort.set()

    def _client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base,
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=httpx.Timeout(30.0, connect=5.0),
        )

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless aborted; False when aborted."""
        return not self.abort.wait(seconds)

    def _session(self, sess: dict[str, Any]) -> None:
        rng = random.Random(f"{self.cfg.seed}-run-{sess['idx']}")
        mine = [r for r in self.records if r.session_idx == sess["idx"]]
        with self._client() as client:
            sid = self._create_session(client, sess)
            if sid is None:
                for r in mine:
                    r.submit_gave_up = True
                return
            for r in mine:
                r.session_id = sid
            followers = []
            for r in mine:
                if self.abort.is_set():
                    break
                if not self._submit(client, r):
                    continue  # reported as not accepted; the session goes on
                f = threading.Thread(target=self._follow, args=(r, rng.random()), daemon=True)
                f.start()
                followers.append(f)
                with self._lock:
                    self._followers.append(f)
                if sess["mode"] == "sequential":
                    f.join()
                    if not r.saw_done:
                        self._wait_terminal(client, r)
                if not self._sleep(rng.uniform(*self.cfg.think_s)):
                    break
            for f in followers:
                f.join()

    def _create_session(self, client: httpx.Client, sess: dict[str, Any]) -> str | None:
        body = {
            "name": f"faults-{self.run_id}-s{sess['idx']}",
            "tools": TOOLS,
            "metadata": {"script": sess["script"], "faults_run": self.run_id},
        }
        deadline = time.monotonic() + self.cfg.submit_timeout_s
        delay = 0.25
        while time.monotonic() < deadline and not self.abort.is_set():
            try:
                r = client.post("/v1/sessions", json=body)
                self.http.record("POST /v1/sessions", r.status_code, r.content)
                if r.status_code == 201:
                    sess["id"] = r.json()["id"]
                    return str(sess["id"])
                if r.status_code < 500 and r.status_code != 429:
                    log.error("session create refused: %s %s", r.status_code, r.text[:300])
                    return None
            except httpx.HTTPError as exc:
                self.http.error("POST /v1/sessions", exc)
            self._sleep(delay + random.uniform(0, delay))
            delay = min(delay * 2, 3.0)
        return None

    def _submit(self, client: httpx.Client, r: TurnRecord) -> bool:
        body = {"content": r.content, "if_busy": "enqueue"}
        headers = {"Idempotency-Key": r.idem_key}
        r.submit_started = time.time()
        deadline = time.monotonic() + self.cfg.submit_timeout_s
        delay = 0.25
        while time.monotonic() < deadline and not self.abort.is_set():
            try:
                resp = client.post(f"/v1/sessions/{r.session_id}/turns", json=body, headers=headers)
                self.http.record("POST /v1/sessions/{sid}/turns", resp.status_code, resp.content)
                r.submit_codes.append(resp.status_code)
                if resp.status_code == 202:
                    tid = resp.json()["id"]
                    if r.turn_id is not None and r.turn_id != tid:
                        r.submit_error = {"idempotency": f"first {r.turn_id}, then {tid}"}
                    r.turn_id = tid
                    r.accepted_at = time.time()
                    return True
                if resp.status_code < 500 and resp.status_code != 429:
                    r.submit_error = {"status": resp.status_code, "body": resp.text[:400]}
                    return False
            except httpx.HTTPError as exc:
                self.http.error("POST /v1/sessions/{sid}/turns", exc)
                r.submit_codes.append(type(exc).__name__)
            self._sleep(delay + random.uniform(0, delay))
            delay = min(delay * 2, 3.0)
        r.submit_gave_up = True
        return False

    def _wait_terminal(self, client: httpx.Client, r: TurnRecord) -> None:
        """A sequential session whose follower gave up: wait for the turn by polling."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not self.abort.is_set():
            try:
                resp = client.get(f"/v1/turns/{r.turn_id}")
                self.http.record("GET /v1/turns/{tid}", resp.status_code, resp.content)
                if resp.status_code == 200 and resp.json()["status"] in TERMINAL:
                    return
            except httpx.HTTPError as exc:
                self.http.error("GET /v1/turns/{tid}", exc)
            self._sleep(1.0)

    def _want_disconnect(self, rng: random.Random) -> bool:
        if self.cfg.disconnect_p <= 0 or rng.random() >= self.cfg.disconnect_p:
            return False
        with self._lock:
            if self.disconnects >= self.cfg.max_disconnects:
                return False
            self.disconnects += 1
            return True

    def _follow(self, r: TurnRecord, seed: float) -> None:
        rng = random.Random(seed)
        url = f"/v1/turns/{r.turn_id}/events"
        last_id: str | None = None
        deadline = time.monotonic() + self.cfg.follow_timeout_s
        delay = 0.2
        timeout = httpx.Timeout(10.0, read=self.cfg.read_timeout_s)
        with self._client() as client:
            while not r.saw_done and time.monotonic() < deadline and not self.abort.is_set():
                r.connections += 1
                conn = r.connections
                headers: dict[str, str] = {}
                params: dict[str, str] = {}
                if last_id:
                    if rng.random() < self.cfg.use_after_param_p:
                        params["after"] = last_id
                    else:
                        headers["Last-Event-ID"] = last_id
                wait = delay
                try:
                    with client.stream(
                        "GET", url, headers=headers, params=params, timeout=timeout
                    ) as resp:
                        r.sse_codes.append(resp.status_code)
                        if resp.status_code != 200:
                            self.http.record(
                                "GET /v1/turns/{tid}/events", resp.status_code, resp.read()
                            )
                        else:
                            self.http.record("GET /v1/turns/{tid}/events", 200)
                            forced = False
                            for eid, name, data in parse_sse(resp.iter_lines()):
                                try:
                                    payload = json.loads(data)
                                except ValueError:
                                    payload = {"_raw": data}
                                ev = Ev(eid, name, payload, time.time(), conn)
                                r.events.append(ev)
                                last_id = eid or last_id
                                if name == "done":
                                    r.saw_done = True
                                    r.done_at = ev.t
                                    break
                                if self._want_disconnect(rng):
                                    forced = True
                                    late = rng.random() < self.cfg.late_reconnect_p
                                    info = {
                                        "t": ev.t,
                                        "turn_id": r.turn_id,
                                        "last_id": eid,
                                        "last_event": name,
                                        "mid_step": name in ("token", "step_restart"),
                                        "late": late,
                                    }
                                    r.forced_disconnects.append(info)
                                    with self._lock:
                                        self.disconnect_log.append(info)
                                    wait = (
                                        self.cfg.late_reconnect_s if late else rng.uniform(0, 1.0)
                                    )
                                    break
                            if not r.saw_done and not forced:
                                r.dropped += 1
                            if forced or r.saw_done:
                                delay = 0.2
                except httpx.HTTPError as exc:
                    self.http.error("GET /v1/turns/{tid}/events", exc)
                    r.sse_codes.append(type(exc).__name__)
                    r.dropped += 1
                if r.saw_done:
                    break
                if not self._sleep(wait + random.uniform(0, 0.2)):
                    break
                if wait == delay:
                    delay = min(delay * 2, 3.0)
        if not r.saw_done:
            r.follower_gave_up = True

    def observe_running(self, reason: str, prefer: list[str] | None = None, max_n: int = 12) -> int:
        """Start a fresh observer for up to `max_n` accepted turns not yet seen done, the turns
        in `prefer` (e.g. those running when the fault hit) first."""
        running = [r for r in self.records if r.turn_id and not r.saw_done]
        self.rng.shuffle(running)
        first = set(prefer or ())
        running.sort(key=lambda r: r.turn_id not in first)
        for r in running[:max_n]:
            obs = Observer(str(r.turn_id), reason, time.time())
            with self._lock:
                self.observers.append(obs)
            t = threading.Thread(target=self._observe, args=(obs,), daemon=True)
            self._observer_threads.append(t)
            t.start()
        return min(len(running), max_n)

    def _observe(self, obs: Observer) -> None:
        url = f"/v1/turns/{obs.turn_id}/events"
        last_id: str | None = None
        deadline = time.monotonic() + self.cfg.follow_timeout_s
        timeout = httpx.Timeout(10.0, read=self.cfg.read_timeout_s)
        with self._client() as client:
            while not obs.saw_done and time.monotonic() < deadline and not self.abort.is_set():
                obs.connections += 1
                headers = {"Last-Event-ID": last_id} if last_id else {}
                try:
                    with client.stream("GET", url, headers=headers, timeout=timeout) as resp:
                        if resp.status_code != 200:
                            self.http.record(
                                "GET /v1/turns/{tid}/events", resp.status_code, resp.read()
                            )
                        else:
                            for eid, name, data in parse_sse(resp.iter_lines()):
                                try:
                                    payload = json.loads(data)
                                except ValueError:
                                    payload = {"_raw": data}
                                obs.events.append(
                                    Ev(eid, name, payload, time.time(), obs.connections)
                                )
                                last_id = eid or last_id
                                if name == "done":
                                    obs.saw_done = True
                                    break
                except httpx.HTTPError as exc:
                    self.http.error("GET /v1/turns/{tid}/events (observer)", exc)
                if not obs.saw_done and not self._sleep(1.0 + random.uniform(0, 0.5)):
                    break

    def join_observers(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for t in list(self._observer_threads):
            t.join(max(0.0, end - time.monotonic()))

    # ------------------------------------------------------------------ progress

    def progress(self) -> dict[str, int]:
        recs = self.records
        return {
            "planned": len(recs),
            "accepted": sum(1 for r in recs if r.turn_id),
            "streams_done": sum(1 for r in recs if r.saw_done),
        }

    def all_done(self) -> bool:
        return self.finished.is_set()
