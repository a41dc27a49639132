"""POST → `done` latency of scripted turns against a running stack (e.g. `scripts/dev`).

    python scripts/turn_latency.py [--base http://127.0.0.1:8000] [--key-file .cortex/api-key]
                                   [--runs 30]

Prints the median, p95 and max for a plain reply and for a reply with two tool calls. A
measurement, not a test: this machine is shared and noisy, so quote medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import httpx

PLAIN = [{"text": "The quick brown fox jumps over the lazy dog, twenty tokens or so in all."}]
TOOLS = [
    {
        "text": "Checking.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "6*7"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "It is 42."},
]


def one_turn(http: httpx.Client, script: list[dict[str, object]]) -> float:
    sid = http.post("/v1/sessions", json={"metadata": {"script": script}}).json()["id"]
    started = time.perf_counter()
    tid = http.post(f"/v1/sessions/{sid}/turns", json={"content": "go"}).json()["id"]
    with http.stream("GET", f"/v1/turns/{tid}/events") as r:
        for line in r.iter_lines():
            if line == "event: done":
                return time.perf_counter() - started
    raise RuntimeError("stream ended without done")


def report(name: str, samples: list[float]) -> None:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    print(
        f"{name:<22} n={len(ms):<4} median {statistics.median(ms):7.1f} ms"
        f"   p95 {p95:7.1f} ms   max {ms[-1]:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--key-file", default=".cortex/api-key")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    key = Path(args.key_file).read_text().strip()
    with httpx.Client(
        base_url=args.base, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as http:
        one_turn(http, PLAIN)  # warm up connections and workers
        for name, script in (("plain reply", PLAIN), ("two tool calls", TOOLS)):
            report(name, [one_turn(http, script) for _ in range(args.runs)])


if __name__ == "__main__":
    main()
