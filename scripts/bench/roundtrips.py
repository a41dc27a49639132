"""Round trips of one plain turn: Postgres statements per process, Redis commands in all.

K plain turns run one after another, each followed over SSE to `done`. Meanwhile Postgres logs
every statement (`log_statement = all`, switched on with ALTER SYSTEM for just this window) with
the client's application name, which the benchmark's stack sets per process (`PGAPPNAME`): each
logged statement is one round trip (psycopg sends BEGIN, every statement and COMMIT
separately). Valkey's `INFO commandstats` (reset first) gives the Redis commands of the window,
every client included: API, workers, broker traffic, task events, beat. Numbers are per turn.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

from .client import create_session, follow, submit_turn, words
from .common import Bench, run

_LINE = re.compile(r"^(?P<app>[^|\n]*)\|[^|]*\|.*?LOG:  (?:statement|execute [^:]*): (?P<sql>.*)$")
_UUID = re.compile(r"'?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'?")
_NUM = re.compile(r"\b\d+(\.\d+)?\b")


def _shape(sql: str) -> str:
    s = _NUM.sub("N", _UUID.sub("<id>", sql.strip()))
    s = re.sub(r"\s+", " ", s)
    for verb in ("INSERT INTO", "UPDATE", "DELETE FROM"):
        if s.upper().startswith(verb):
            return " ".join(s.split()[: len(verb.split()) + 1])
    if s.upper().startswith("SELECT"):
        m = re.search(r"\bFROM (\w+)", s) or re.match(r"SELECT (\w+)\.", s)
        lock = " FOR UPDATE" if "FOR UPDATE" in s.upper() else ""
        return f"SELECT … FROM {m.group(1)}{lock}" if m else s[:60]
    if s == ";":
        return "; (pool pre-ping)"
    return s[:60]


async def _turns(b: Bench, sids: list[str]) -> int:
    ok = 0
    async with b.client() as http:
        for sid in sids:
            tid = await submit_turn(http, sid)
            got = await follow(http, tid, timeout=30)
            ok += got.done is not None
    return ok


async def _sessions(b: Bench, k: int) -> list[str]:
    async with b.client() as http:
        return [await create_session(http, [{"text": words(20)}]) for _ in range(k)]


def roundtrips(b: Bench) -> None:
    stack, k = b.stack, b.args.roundtrip_turns
    sids = run(_sessions(b, k))
    log = stack.postgres_log()
    r = stack.redis_client()
    offset = log.stat().st_size
    stack.psql("ALTER SYSTEM SET log_statement = 'all'")
    stack.psql("ALTER SYSTEM SET log_line_prefix = '%a|%p|'")
    stack.psql("SELECT pg_reload_conf()")
    time.sleep(0.5)
    r.config_resetstat()
    t0 = time.monotonic()
    try:
        done = run(_turns(b, sids))
        elapsed = time.monotonic() - t0
        time.sleep(0.3)
        cmdstats = r.info("commandstats")
    finally:
        stack.psql("ALTER SYSTEM RESET log_statement")
        stack.psql("ALTER SYSTEM RESET log_line_prefix")
        stack.psql("SELECT pg_reload_conf()")
        r.close()
    per_app: Counter[str] = Counter()
    shapes: dict[str, Counter[str]] = {}
    statements: list[tuple[str, str]] = []
    with log.open("rb") as fh:
        fh.seek(offset)
        for raw in fh.read().decode(errors="replace").splitlines():
            if raw.startswith("\t") and statements:  # a multi-line statement continues
                app, sql = statements[-1]
                statements[-1] = (app, f"{sql} {raw.strip()}")
                continue
            m = _LINE.match(raw)
            if m is not None:
                statements.append((m.group("app"), m.group("sql")))
    for app, sql in statements:
        if app in ("", "[unknown]"):  # this script's own connection
            continue
        per_app[app] += 1
        shapes.setdefault(app, Counter())[_shape(sql)] += 1
    redis_calls = {
        name.removeprefix("cmdstat_"): int(v["calls"])
        for name, v in cmdstats.items()
        if isinstance(v, dict) and "calls" in v
    }
    out: dict[str, Any] = {
        "turns": k,
        "completed": done,
        "seconds": round(elapsed, 2),
        "postgres_statements_per_turn": {a: round(n / k, 2) for a, n in per_app.most_common()},
        "postgres_statement_shapes_per_turn": {
            a: {s: round(n / k, 2) for s, n in c.most_common(25)} for a, c in shapes.items()
        },
        "redis_commands_per_turn": {
            c: round(n / k, 2) for c, n in sorted(redis_calls.items(), key=lambda kv: -kv[1])
        },
        "note": "beat and the summarize,maintenance worker run the reconciler every "
        "CORTEX_RECONCILE_EVERY_S whatever the load; their rows are background, not per turn",
    }
    b.details["roundtrips"] = out
    per_turn = out["postgres_statements_per_turn"]
    for app in ("api", "llm"):
        f = b.figure(
            f"pg_statements_{app}",
            f"Postgres round trips per plain turn, {app}",
            "",
            note="incl. BEGIN, COMMIT, pool pre-ping",
            higher_is_better=False,
        )
        f.reps.append(float(per_turn.get(app, 0.0)))
    f = b.figure(
        "redis_commands",
        "Redis commands per plain turn, all clients",
        "",
        note="broker, task events, streams, SSE",
        higher_is_better=False,
    )
    f.reps.append(round(sum(redis_calls.values()) / k, 1))
    b.say(
        "roundtrips: Postgres statements per turn "
        + ", ".join(f"{a} {v}" for a, v in out["postgres_statements_per_turn"].items())
        + f"; Redis commands per turn {round(sum(redis_calls.values()) / k, 1)}"
    )
