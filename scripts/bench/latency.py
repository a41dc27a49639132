"""Figures 2 and 3, on an otherwise idle stack, one turn at a time.

2. POST → `done`: from just before `POST /v1/sessions/{sid}/turns` to the parsed `done` event
   of `GET /v1/turns/{tid}/events` (opened right after the 202), on kept-alive connections.
   Plain: 20 tokens, no delay, no tools. One tool call: the model calls `calculate`, the tool
   worker runs it, a second model step answers (two model steps, one tool step).
3. Added time to first token: the scripted model waits `first_token_ms` and then yields its
   first token. The worker runs `scripts.bench.launch`, which notes CLOCK_MONOTONIC just before
   the provider hands that token to the model step; the client notes CLOCK_MONOTONIC when it
   has parsed the token's SSE event. The difference is what the system adds between the model
   yielding a token and the client having it (cancel check, XADD, the API's XREAD wake-up,
   SSE framing, HTTP, client parsing). Both ends read the same kernel clock.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from .client import Followed, create_session, follow, submit_turn, words
from .common import Bench, run
from .launch import MARK
from .stack import WorkerSpec
from .stats import percentile, summary

PLAIN: list[dict[str, Any]] = [{"text": words(20)}]
ONE_TOOL: list[dict[str, Any]] = [
    {
        "text": "Checking.",
        "tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}],
    },
    {"text": "It is 42."},
]


SEGMENTS = ("post", "to_first_token", "to_last_message", "to_done")


async def _timed_turns(
    b: Bench, script: list[dict[str, Any]], tools: list[str], n: int
) -> tuple[list[float], dict[str, list[float]], list[str]]:
    """POST→done of `n` turns (ms), the parts of each (the POST itself; from its response to
    the first token; from there to the last `message`; from there to `done`), and errors."""
    out: list[float] = []
    parts: dict[str, list[float]] = {k: [] for k in SEGMENTS}
    errors: list[str] = []
    async with b.client() as http:
        sids = [await create_session(http, script, tools) for _ in range(n + 1)]
        for i, sid in enumerate(sids):
            t0 = time.monotonic()
            tid = await submit_turn(http, sid)
            t1 = time.monotonic()
            got = await follow(http, tid, timeout=30)
            done = got.done
            if done is None or done.json().get("status") != "done":
                errors.append(got.error or f"turn ended {done.json() if done else None}")
                continue
            if not i:  # the first one warms connections and the workers' caches
                continue
            out.append((done.t - t0) * 1000)
            first = got.first("token")
            last_msg = [e for e in got.events if e.event == "message"][-1:]
            if first is not None and last_msg:
                marks = (t0, t1, first.t, last_msg[0].t, done.t)
                for k, (a, z) in zip(SEGMENTS, zip(marks, marks[1:], strict=False), strict=True):
                    parts[k].append((z - a) * 1000)
    return out, parts, errors


def latency(b: Bench) -> None:
    a = b.args
    details: dict[str, Any] = {"n_per_rep": a.latency_n, "reps": []}
    figs = {
        ("plain", p): b.figure(
            f"latency_plain_p{p}",
            f"POST→done, plain turn, p{p}",
            "ms",
            target="≤ 20 ms" if p == 50 else "",
            higher_is_better=False,
        )
        for p in (50, 95, 99)
    }
    figs.update(
        {
            ("tool", p): b.figure(
                f"latency_tool_p{p}",
                f"POST→done, one tool call, p{p}",
                "ms",
                higher_is_better=False,
            )
            for p in (50, 95, 99)
        }
    )
    for rep in range(a.reps):
        row: dict[str, Any] = {}
        for kind, script, tools in (("plain", PLAIN, []), ("tool", ONE_TOOL, ["calculate"])):
            samples, parts, errors = run(_timed_turns(b, script, tools, a.latency_n))
            row[kind] = {
                **summary(samples),
                "parts_p50_ms": {k: percentile(v, 50) for k, v in parts.items()},
                "errors": errors,
            }
            for p in (50, 95, 99):
                figs[(kind, p)].reps.append(percentile(samples, p))
        details["reps"].append(row)
        b.say(
            f"  rep {rep + 1}: plain p50 {row['plain']['p50']:.1f} ms, "
            f"tool p50 {row['tool']['p50']:.1f} ms"
        )
    figs[("plain", 50)].reached = figs[("plain", 50)].value <= 20.0
    b.details["latency"] = details
    if a.profile:
        b.say(f"latency: profiling sequential plain turns into {a.profile}")
        b.details["profile_idle"] = _profile_idle(b, Path(a.profile), seconds=8.0)


def _profile_idle(b: Bench, out_dir: Path, *, seconds: float) -> dict[str, Any]:
    """py-spy on the API and the llm worker while plain turns run one after another."""
    from .profiling import py_spy_record, summarize

    out_dir.mkdir(parents=True, exist_ok=True)
    spawner = b.stack.spawner
    assert spawner is not None
    spies = []
    for name in ("api", "llm"):
        for gil in (True, False):
            path = out_dir / f"idle-{name}-{'gil' if gil else 'wall'}.collapsed.txt"
            pid = b.stack.pid(name)
            spy = spawner.call(lambda: py_spy_record(pid, path, seconds, gil=gil))  # noqa: B023
            spies.append((path, spy))

    async def turns() -> int:
        count = 0
        deadline = time.monotonic() + seconds
        async with b.client() as http:
            while time.monotonic() < deadline:
                sid = await create_session(http, PLAIN)
                await follow(http, await submit_turn(http, sid), timeout=30)
                count += 1
        return count

    out: dict[str, Any] = {"turns": run(turns())}
    for path, spy in spies:
        spy.wait(seconds + 60)
        out[path.name] = summarize(path) if path.exists() else {"error": "no profile"}
    return out


async def _ttft_turns(b: Bench, n: int, first_token_ms: int) -> list[tuple[str, float, Followed]]:
    """(marker, POST instant, what the follower got) of `n` sequential turns."""
    out: list[tuple[str, float, Followed]] = []
    async with b.client() as http:
        marks = [f"{MARK}{uuid.uuid4().hex[:12]}" for _ in range(n + 1)]
        sids = [
            await create_session(
                http, [{"text": words(20, prefix=m), "first_token_ms": first_token_ms}]
            )
            for m in marks
        ]
        for i, (mark, sid) in enumerate(zip(marks, sids, strict=True)):
            t0 = time.monotonic()
            tid = await submit_turn(http, sid)
            got = await follow(http, tid, timeout=30)
            if i:
                out.append((mark, t0, got))
    return out


def _yield_times(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            mark, _, at = line.partition(" ")
            out[mark] = float(at)
    return out


def ttft(b: Bench) -> None:
    a, stack = b.args, b.stack
    spec = stack.worker_specs.get("llm", WorkerSpec())
    log_path = stack.workdir / "ttft.log"
    b.say(f"ttft: llm worker {spec.label} with the instrumented scripted model")
    stack.run_worker(
        "llm",
        WorkerSpec(spec.pool, spec.concurrency, instrumented=True),
        env={"BENCH_TTFT_LOG": str(log_path)},
    )
    added = {
        p: b.figure(
            f"ttft_added_p{p}",
            f"added time to first token (model yield → client), p{p}",
            "ms",
            target="≤ 2 ms" if p == 50 else "",
            higher_is_better=False,
        )
        for p in (50, 95)
    }
    overhead = b.figure(
        "ttft_post_overhead_p50",
        f"POST → first token minus the model's {a.first_token_ms} ms, p50",
        "ms",
        higher_is_better=False,
    )
    details: dict[str, Any] = {"first_token_ms": a.first_token_ms, "reps": []}
    try:
        for rep in range(a.reps):
            turns = run(_ttft_turns(b, a.latency_n, a.first_token_ms))
            yielded = _yield_times(log_path)
            deltas, pre, missing = [], [], 0
            for mark, t0, got in turns:
                first = got.first("token")
                if first is None or mark not in yielded:
                    missing += 1
                    continue
                deltas.append((first.t - yielded[mark]) * 1000)
                pre.append((first.t - t0) * 1000 - a.first_token_ms)
            for p in (50, 95):
                added[p].reps.append(percentile(deltas, p))
            overhead.reps.append(percentile(pre, 50))
            details["reps"].append(
                {
                    "added_ms": summary(deltas),
                    "post_to_first_token_minus_model_ms": summary(pre),
                    "missing": missing,
                }
            )
            b.say(
                f"  rep {rep + 1}: added p50 {percentile(deltas, 50):.2f} ms "
                f"p95 {percentile(deltas, 95):.2f} ms; POST→first token −"
                f" {a.first_token_ms} ms p50 {percentile(pre, 50):.1f} ms"
            )
    except KeyboardInterrupt:
        raise  # everything is about to be stopped: no point in restoring the worker
    except BaseException:
        stack.run_worker("llm", WorkerSpec(spec.pool, spec.concurrency))
        raise
    stack.run_worker("llm", WorkerSpec(spec.pool, spec.concurrency))
    added[50].reached = added[50].value <= 2.0
    b.details["ttft"] = details
