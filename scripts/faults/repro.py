"""Deterministic reproductions of the stream-vs-stored mismatches the harness found.

    python -m scripts.faults.repro snapshot      # resume after expiry across a retried attempt
    python -m scripts.faults.repro stream-loss   # fresh client after Redis lost a running turn

Each starts its own small stack, runs one turn, and prints what a client rebuilt from the SSE
events next to the stored answer: MATCH (exit 0) or MISMATCH (exit 1).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

import httpx

from .checker import text_of
from .driver import parse_sse
from .stack import Stack, StackConfig


def _read(client: httpx.Client, tid: str, last_id: str | None = None, limit: int = 0) -> list[Any]:
    headers = {"Last-Event-ID": last_id} if last_id else {}
    out: list[Any] = []
    with client.stream("GET", f"/v1/turns/{tid}/events", headers=headers) as resp:
        for eid, name, data in parse_sse(resp.iter_lines()):
            out.append((eid, name, json.loads(data)))
            if name == "done" or (limit and len(out) >= limit):
                break
    return out


def _wait_done(client: httpx.Client, tid: str) -> dict[str, Any]:
    deadline = time.time() + 120
    while time.time() < deadline:
        turn: dict[str, Any] = client.get(f"/v1/turns/{tid}").json()
        if turn["status"] in ("done", "failed", "cancelled"):
            return turn
        time.sleep(0.5)
    raise TimeoutError(tid)


def _stored(client: httpx.Client, sid: str, tid: str) -> str:
    msgs = client.get(f"/v1/sessions/{sid}/messages").json()["messages"]
    return "".join(m["content"] for m in msgs if m["role"] == "assistant" and m["turn_id"] == tid)


def _verdict(events: list[Any], stored: str) -> int:
    streamed = text_of([(e[1], e[2]) for e in events])
    print("events  :", [(e[0], e[1]) for e in events][:12], "...")
    print("streamed:", repr(streamed))
    print("stored  :", repr(stored))
    print("MATCH" if streamed == stored else "MISMATCH")
    return 0 if streamed == stored else 1


def snapshot() -> int:
    """A client reads part of attempt 1 of a model step and disconnects; the llm worker is
    SIGKILLed, the step runs again (attempt 2) and the turn ends; the stream expires; the client
    resumes with its Last-Event-ID and gets the snapshot from Postgres."""
    with Stack(StackConfig(settings={"CORTEX_STREAM_TTL_S": "3"})) as st:
        c = httpx.Client(
            base_url=st.api_base, headers={"Authorization": f"Bearer {st.api_key}"}, timeout=30
        )
        script = [{"text": "one two three four five six seven eight nine ten", "token_ms": 400}]
        sid = c.post("/v1/sessions", json={"metadata": {"script": script}}).json()["id"]
        tid = c.post(f"/v1/sessions/{sid}/turns", json={"content": "go"}).json()["id"]
        seen = _read(c, tid, limit=3)
        st.kill("llm", signal.SIGKILL)
        turn = _wait_done(c, tid)
        print("steps:", [(s["step_no"], s["kind"], s["attempt"]) for s in turn["steps"]])
        r = st.redis_client()
        while r.exists(f"cortex:turn:{tid}:events"):
            time.sleep(0.5)
        rest = _read(c, tid, last_id=seen[-1][0])
        return _verdict(seen + rest, _stored(c, sid, tid))


def stream_loss() -> int:
    """Step 1 is committed and its tool runs when Redis (no persistence) is killed and
    restarted; after the turn ends, a client opens the events URL without Last-Event-ID."""
    with Stack(StackConfig(redis_persist=False)) as st:
        c = httpx.Client(
            base_url=st.api_base, headers={"Authorization": f"Bearer {st.api_key}"}, timeout=30
        )
        script = [
            {
                "text": "first step text. ",
                "tool_calls": [{"name": "chaos_sleep", "arguments": {"seconds": 4}}],
            },
            {"text": "second step " + "word " * 20, "token_ms": 100},
        ]
        sid = c.post(
            "/v1/sessions", json={"tools": ["chaos_sleep"], "metadata": {"script": script}}
        ).json()["id"]
        tid = c.post(f"/v1/sessions/{sid}/turns", json={"content": "go"}).json()["id"]
        time.sleep(2.0)
        st.redis_kill()
        time.sleep(2.0)
        st.redis_start()
        turn = _wait_done(c, tid)
        print("steps:", [(s["step_no"], s["kind"], s["attempt"]) for s in turn["steps"]])
        return _verdict(_read(c, tid), _stored(c, sid, tid))


def main(argv: list[str]) -> int:
    cases = {"snapshot": snapshot, "stream-loss": stream_loss}
    if len(argv) != 1 or argv[0] not in cases:
        print(__doc__)
        return 2
    return cases[argv[0]]()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
