"""Figure 5: concurrent SSE clients on one API process while tokens flow.

One turn whose model waits before its first token (`--sse-first-ms`, by default 2 s + 5 ms per
client, about the time it takes to connect them all here), then streams 40 tokens 250 ms apart
(~10 s). Right after the POST, N clients open `GET /v1/turns/{tid}/events` at once (from this
process: asyncio, one httpx client per follower). A client was *served live* when it got every
token as its own event, in order, and `done`, within the turn's time plus 30 s. A client whose
request the API only got round to after the turn had ended receives the whole text as one
snapshot event from Postgres (correct, but not live): counted apart. A level counts when every
client was served live and was connected before the last token arrived (so all N were being
served at once while tokens flowed). Also recorded: how many were connected before the first
token, the spread of the last token's arrival across clients (last client minus first), the
API process's peak RSS and its CPU time.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psutil

from .client import Followed, create_session, follow, submit_turn, words
from .common import Bench, Sampler, run
from .stats import percentile

TOKENS = 40
TOKEN_MS = 250


async def _fan_out(b: Bench, n: int, first_ms: int) -> dict[str, Any]:
    expected = words(TOKENS)
    model_s = (first_ms + (TOKENS - 1) * TOKEN_MS) / 1000
    connected = 0

    def on_connect() -> None:
        nonlocal connected
        connected += 1

    async with b.client() as ctl:
        sid = await create_session(
            ctl, [{"text": expected, "first_token_ms": first_ms, "token_ms": TOKEN_MS}]
        )
        t_post = time.monotonic()
        tid = await submit_turn(ctl, sid)
    async with b.clients(n, timeout=model_s + 60) as clients:
        results: list[Followed | BaseException] = await asyncio.gather(
            *(follow(http, tid, timeout=model_s + 30, on_connect=on_connect) for http in clients),
            return_exceptions=True,
        )
    got = [r for r in results if isinstance(r, Followed)]
    complete = [
        r
        for r in got
        if r.done is not None and "".join(e.json()["text"] for e in r.tokens) == expected
    ]
    # live: every token as its own event, as it was written (a client whose connection was
    # set up only after the turn ended gets the whole text as one snapshot event instead)
    good = [r for r in complete if len(r.tokens) == TOKENS]
    firsts = [r.tokens[0].t for r in got if r.tokens]
    first_token_at = min(firsts, default=float("nan"))
    last_token_at = min((r.tokens[-1].t for r in good), default=float("nan"))
    connects = [r.connected_at - t_post for r in got if r.connected_at is not None]
    before_first = sum(1 for c in connects if c + t_post <= first_token_at)
    before_last = sum(1 for c in connects if c + t_post <= last_token_at)
    lasts = [r.tokens[-1].t for r in good]
    spread = [t - min(lasts) for t in lasts] if lasts else []
    errors: dict[str, int] = {}
    good_ids = {id(r) for r in good}
    for r in results:
        if isinstance(r, BaseException):
            key = f"{type(r).__name__}: {r}"[:120]
        elif r.error:
            key = r.error
        elif id(r) not in good_ids:
            text = "".join(e.json().get("text", "") for e in r.tokens)
            key = (
                f"{len(r.tokens)} token events ("
                + ("text complete" if text == expected else "text incomplete")
                + ("" if r.done else ", no done")
                + ", events: "
                + ",".join(sorted({e.event for e in r.events}))
                + ")"
            )
        else:
            key = ""
        if key:
            errors[key] = errors.get(key, 0) + 1
    return {
        "n": n,
        "succeeded": len(good),
        "complete_incl_snapshot": len(complete),
        "connected": connected,
        "connected_before_first_token": before_first,
        "connected_before_last_token": before_last,
        "connect_s": {
            "p50": percentile(connects, 50),
            "max": max(connects, default=float("nan")),
        },
        "post_to_first_token_s": first_token_at - t_post,
        "post_to_last_token_s": last_token_at - t_post,
        "last_token_spread_s": {
            "p50": percentile(spread, 50),
            "p99": percentile(spread, 99),
            "max": max(spread, default=float("nan")),
        },
        "errors": errors,
    }


def fanout(b: Bench) -> None:
    a, stack = b.args, b.stack
    levels = [n for n in a.sse_levels if n <= a.sse_max]
    api = psutil.Process(stack.pid("api"))
    details: dict[str, Any] = {"tokens": TOKENS, "token_ms": TOKEN_MS, "levels": []}
    best = 0
    fig = b.figure(
        "sse_clients",
        "SSE clients served live by one API process",
        "clients",
        target="≥ 2,000",
    )
    for n in levels:
        per_rep: list[dict[str, Any]] = []
        for _ in range(a.sse_reps):
            t = api.cpu_times()
            cpu0 = t.user + t.system
            first_ms = a.sse_first_ms or 2000 + 5 * n
            with Sampler(lambda: api.memory_info().rss / 2**20, every=0.5) as mem:
                res = run(_fan_out(b, n, first_ms))
            res["first_token_ms"] = first_ms
            t = api.cpu_times()
            res["api_cpu_s"] = round(t.user + t.system - cpu0, 2)
            res["api_rss_peak_mib"] = round(max(mem.values(), default=0.0), 1)
            per_rep.append(res)
            b.say(
                f"  N={n}: {res['succeeded']}/{n} complete; connected before the first token"
                f" {res['connected_before_first_token']}, before the last"
                f" {res['connected_before_last_token']}; API RSS"
                f" {res['api_rss_peak_mib']:.0f} MiB, CPU {res['api_cpu_s']:.1f} s;"
                f" errors {res['errors'] or 'none'}"
            )
            time.sleep(1.0)  # let the API close the finished streams
        details["levels"].append({"n": n, "reps": per_rep})
        succeeded = sorted(r["succeeded"] for r in per_rep)[len(per_rep) // 2]
        if succeeded == n and min(r["connected_before_last_token"] for r in per_rep) == n:
            best = n
        else:
            break
    fig.reps.append(best)
    fig.reached = best >= 2000
    b.details["fanout"] = details
