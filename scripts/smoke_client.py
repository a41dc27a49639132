"""A curl-like walk through the API with the standard library only (used by scripts/smoke)."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

BASE, KEY_FILE = sys.argv[1], Path(sys.argv[2])
SCRIPT = [
    {
        "text": "Let me check. ",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "6 * 7"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "6 times 7 is 42.", "token_ms": 20},
]


def call(method: str, path: str, body: object | None = None, key: str = "") -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        BASE + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def wait_ready(deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if call("GET", "/readyz").get("status") == "ok" and KEY_FILE.exists():
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1)
    raise SystemExit("stack not ready within the time limit")


def events(path: str, key: str) -> list[tuple[str, dict]]:
    req = urllib.request.Request(BASE + path, headers={"Authorization": f"Bearer {key}"})
    out, event = [], ""
    with urllib.request.urlopen(req, timeout=60) as r:
        for raw in r:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                out.append((event, json.loads(line.split(":", 1)[1])))
                if event == "done":
                    return out
    raise SystemExit("stream ended without done")


def main() -> None:
    wait_ready(time.monotonic() + 240)  # includes the first-use install
    key = KEY_FILE.read_text().strip()
    sid = call("POST", "/v1/sessions", {"metadata": {"script": SCRIPT}}, key)["id"]
    tid = call("POST", f"/v1/sessions/{sid}/turns", {"content": "6*7?"}, key)["id"]
    evs = events(f"/v1/turns/{tid}/events", key)
    kinds = [e for e, _ in evs]
    assert kinds.count("tool_call") == 2 and kinds.count("tool_result") == 2, kinds
    assert evs[-1][1]["status"] == "done", evs[-1]
    text = "".join(d["text"] for e, d in evs if e == "token")
    turn = call("GET", f"/v1/turns/{tid}", key=key)
    assert turn["status"] == "done" and text == "Let me check. 6 times 7 is 42.", (turn, text)
    roles = [m["role"] for m in call("GET", f"/v1/sessions/{sid}/messages", key=key)["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"], roles
    print(f"smoke: turn {tid} done with 2 tool calls; streamed text equals the stored answer")


if __name__ == "__main__":
    main()
