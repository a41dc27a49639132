"""Recovery after SIGKILL, and a rolling restart under load, at the product's default settings.

    python -m scripts.faults.restarts --kills 10          # SIGKILL → resumed, per kill
    python -m scripts.faults.restarts --rolling --turns 40  # SIGTERM every llm and tools worker

A stack of the harness (its own Postgres and Valkey) with two workers per queue (`llm`,
`llm-b`, `tools`, `tools-b`), with the harness's short test leases reset to the defaults (30 s
lease, reconcile every 5 s, 4 s liveness, drain 20 s): what an operator gets.

Kills: one turn at a time streams a long scripted reply (~20 s); once it streams, the worker
holding its step (`steps.holder` names the pid) is SIGKILLed; the time until the turn's Redis
stream shows the `step_restart` of the next attempt is the recovery time. Every turn must end
`done` with one assistant message.

Rolling: sessions keep posting turns (each ~3 s of tokens, a third with a tool call); every
llm and tools worker in turn gets SIGTERM, and the next one only once it is back. Reported:
turns failed, the longest turn during the restarts vs before, and the worst extra time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from typing import Any

import httpx
import psycopg

from .stack import Stack, StackConfig

DEFAULTS = {
    "CORTEX_LEASE_S": "30",
    "CORTEX_REPUBLISH_AFTER_S": "30",
    "CORTEX_RECONCILE_EVERY_S": "5",
    "CORTEX_RETRY_BASE_S": "1",
    "CORTEX_RETRY_MAX_S": "30",
    "CORTEX_TOOL_TIMEOUT_S": "30",
}
"""The product's defaults for what the harness shortens (liveness, takeover and drain are
left at their defaults)."""
EXTRA = {"llm-b": "llm", "tools-b": "tools"}


def start_stack(settings: dict[str, str]) -> Stack:
    stack = Stack(StackConfig(settings={**DEFAULTS, **settings}, restart_delay_s=(0.5, 1.0)))
    stack.start()
    cli = [*stack.procs["llm"].argv[:3]]
    for name, queues in EXTRA.items():
        stack._add(name, [*cli, "worker", "--queues", queues, "--hostname", f"{name}@%h"])
        stack._spawn_proc(stack.procs[name])
        stack.wait_worker_ready(name, timeout=120)
    return stack


def _client(stack: Stack) -> httpx.Client:
    return httpx.Client(
        base_url=stack.api_base,
        headers={"Authorization": f"Bearer {stack.api_key}"},
        timeout=30,
    )


def _session(http: httpx.Client, *replies: dict[str, Any]) -> str:
    r = http.post("/v1/sessions", json={"metadata": {"script": list(replies)}})
    r.raise_for_status()
    return str(r.json()["id"])


def _submit(http: httpx.Client, sid: str) -> str:
    r = http.post(f"/v1/sessions/{sid}/turns", json={"content": "go"})
    r.raise_for_status()
    return str(r.json()["id"])


def _wait_turn(http: httpx.Client, tid: str, timeout: float = 180) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        turn = http.get(f"/v1/turns/{tid}").json()
        if turn["status"] in ("done", "failed", "cancelled"):
            return dict(turn)
        time.sleep(0.2)
    raise TimeoutError(f"turn {tid} did not end in {timeout}s")


def _holder_pid(stack: Stack, tid: str) -> int | None:
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT holder FROM steps WHERE turn_id = %s AND status = 'leased'", (tid,)
        ).fetchone()
    return int(row[0].split(":")[1]) if row and row[0] else None


def _stream_has(stack: Stack, tid: str, event: bytes) -> bool:
    r = stack.redis_client(timeout=2.0)
    try:
        entries = r.xrange(f"cortex:turn:{tid}:events")
        return any(f.get(b"event") == event for _, f in entries)
    finally:
        r.close()


def one_kill(stack: Stack, http: httpx.Client) -> dict[str, Any]:
    text = " ".join(f"k{i}" for i in range(400))
    sid = _session(http, {"text": text, "token_ms": 50})
    tid = _submit(http, sid)
    end = time.monotonic() + 60
    while not _stream_has(stack, tid, b"token") and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(1.0)
    pid = _holder_pid(stack, tid)
    name = next(n for n, p in stack.procs.items() if p.popen and p.popen.pid == pid)
    killed = time.monotonic()
    stack.kill(name)
    while not _stream_has(stack, tid, b"step_restart"):
        time.sleep(0.05)
        if time.monotonic() - killed > 120:
            raise TimeoutError("no step_restart within 120 s")
    resumed = time.monotonic() - killed
    turn = _wait_turn(http, tid)
    messages = http.get(f"/v1/sessions/{sid}/messages").json()["messages"]
    assistant = [m for m in messages if m["role"] == "assistant" and m["turn_id"] == tid]
    stack.wait_worker_ready(name, timeout=120)
    return {
        "worker": name,
        "resumed_s": round(resumed, 2),
        "status": turn["status"],
        "attempt": turn["steps"][0]["attempt"],
        "assistant_messages": len(assistant),
        "answer_ok": turn["answer"] == text,
    }


def measure_kills(stack: Stack, kills: int) -> dict[str, Any]:
    runs = []
    with _client(stack) as http:
        for i in range(kills):
            run = one_kill(stack, http)
            print(f"kill {i + 1}: {json.dumps(run)}", flush=True)
            runs.append(run)
            time.sleep(3)  # the restarted worker beats and takes deliveries again
    times = [r["resumed_s"] for r in runs]
    return {
        "kills": len(runs),
        "resumed_p50_s": round(statistics.median(times), 2),
        "resumed_max_s": max(times),
        "resumed_min_s": min(times),
        "all_done_once": all(
            r["status"] == "done" and r["assistant_messages"] == 1 and r["answer_ok"] for r in runs
        ),
        "runs": runs,
    }


class Load:
    """Sessions posting turns one after another until stopped; each turn's POST→done time."""

    def __init__(self, stack: Stack, sessions: int) -> None:
        self.stack, self.sessions = stack, sessions
        self.turns: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(sessions)]

    def _run(self) -> None:
        text = " ".join(f"r{i}" for i in range(30))
        tool = {
            "text": "",
            "tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}],
        }
        with _client(self.stack) as http:
            replies: list[dict[str, Any]] = []
            for i in range(200):
                replies += [tool] if i % 3 == 0 else []
                replies.append({"text": text, "token_ms": 100})
            sid = _session(http, *replies)
            while not self._stop.is_set():
                posted = time.time()
                tid = _submit(http, sid)
                turn = _wait_turn(http, tid, timeout=300)
                done = time.time()
                self.turns.append(
                    {"id": tid, "posted": posted, "done": done, "status": turn["status"]}
                )

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(300)


def rolling_restart(stack: Stack, sessions: int, warmup_s: float) -> dict[str, Any]:
    load = Load(stack, sessions)
    load.start()
    time.sleep(warmup_s)
    began = time.time()
    stops = []
    for name in ("llm", "llm-b", "tools", "tools-b"):
        t = time.monotonic()
        proc = stack.procs[name]
        pid = stack.kill(name, sig=15)
        assert proc.popen is not None
        code = proc.popen.wait(60)
        stopped_s = time.monotonic() - t
        stack.wait_worker_ready(name, timeout=120)
        stops.append({"worker": name, "pid": pid, "exit": code, "stopped_s": round(stopped_s, 1)})
        print(f"restarted {json.dumps(stops[-1])}", flush=True)
    ended = time.time()
    time.sleep(warmup_s)
    load.stop()
    before = [t["done"] - t["posted"] for t in load.turns if t["done"] < began]
    during = [
        t["done"] - t["posted"] for t in load.turns if t["posted"] < ended and t["done"] > began
    ]
    base = statistics.median(before) if before else 0.0
    return {
        "workers_restarted": stops,
        "turns": len(load.turns),
        "failed": sum(t["status"] != "done" for t in load.turns),
        "turn_s_before_p50": round(base, 2),
        "turn_s_before_max": round(max(before), 2) if before else None,
        "turn_s_during_max": round(max(during), 2) if during else None,
        "worst_extra_s": round(max(during) - base, 2) if during else None,
        "restart_window_s": round(ended - began, 1),
        "slowest": [
            {
                "id": t["id"],
                "s": round(t["done"] - t["posted"], 1),
                "at": round(t["posted"] - began),
            }
            for t in sorted(load.turns, key=lambda t: t["posted"] - t["done"])[:3]
        ],
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m scripts.faults.restarts")
    p.add_argument("--kills", type=int, default=0)
    p.add_argument("--rolling", action="store_true")
    p.add_argument("--sessions", type=int, default=6)
    p.add_argument("--warmup", type=float, default=20.0)
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    stack = start_stack({})
    out: dict[str, Any] = {"id": uuid.uuid4().hex[:8]}
    try:
        if args.kills:
            out["kills"] = measure_kills(stack, args.kills)
            print(json.dumps({k: v for k, v in out["kills"].items() if k != "runs"}))
        if args.rolling:
            out["rolling"] = rolling_restart(stack, args.sessions, args.warmup)
            print(json.dumps(out["rolling"]))
    finally:
        stack.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
