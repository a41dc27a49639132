"""Flat with data: POST→done and the claim's plan on an empty database, then after loading
synthetic history of `--growth-sizes` turns (default 100k, 1M) with bulk COPY.

Each synthetic turn is finished (`done`, 1–90 days old) in a session of 50 turns, with its
model step, its user and assistant messages and one audit row: per 100k turns, 2k sessions,
100k steps, 200k messages, 100k decisions. Sizes are cumulative (the 1M level adds 900k to the
100k). After each load: `VACUUM ANALYZE`, then `--latency-n` plain turns one at a time (their
POST→done p50 and p95) and `EXPLAIN (ANALYZE, BUFFERS)` of the model-step claim (with its
context) on a fresh step, rolled back. Target: p50 within 1.2× of the empty database.
"""

from __future__ import annotations

from typing import Any

from .common import Bench, run
from .history import load_history
from .latency import PLAIN, _timed_turns
from .stats import percentile


def claim_plan(database_url: str) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the model-step claim on a fresh step, rolled back."""
    from datetime import timedelta as td

    from cortex_workers.store import claims, new_turns, repo, tenants
    from cortex_workers.store.db import make_engine, make_sessionmaker

    engine = make_engine(database_url, pool_size=1)
    try:
        with make_sessionmaker(engine)() as db:
            tenant = tenants.ensure_tenant(db, "growth-probe")
            session = repo.insert_session(db, tenant.id)
            new = new_turns.insert_turn(
                db, tenant_id=tenant.id, session_id=session.id, start_timeout_s=60, content="u"
            )
            params = claims.ClaimWithViewParams(
                step_id=new.first_step_id,
                lease=td(seconds=30),
                liveness=td(seconds=4),
                worker="growth:0:probe",
                window=20,
            )
            conn = db.connection()
            form = claims._CLAIM_WITH_VIEW._compile(conn.dialect)
            raw = conn.connection.dbapi_connection
            assert raw is not None
            rows = raw.execute(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + form.sql, form.bind(params)
            ).fetchall()
            db.rollback()
    finally:
        engine.dispose()
    return "\n".join(r[0] for r in rows)


def _level(b: Bench, label: str, loaded_s: float | None) -> dict[str, Any]:
    times, _, errors = run(_timed_turns(b, PLAIN, [], b.args.latency_n))
    plan = claim_plan(b.stack.database_url)
    level = {
        "history_turns": label,
        "load_s": None if loaded_s is None else round(loaded_s, 1),
        "post_to_done_ms_p50": round(percentile(times, 50), 1),
        "post_to_done_ms_p95": round(percentile(times, 95), 1),
        "turns": len(times),
        "errors": errors[:3],
        "claim_plan": plan,
        "claim_execution_ms": next(
            (float(x.split(":")[1].split()[0]) for x in plan.splitlines() if "Execution" in x),
            None,
        ),
        "seq_scans_in_claim": plan.count("Seq Scan"),
    }
    b.say(
        f"growth {label}: p50 {level['post_to_done_ms_p50']} ms, claim executes in "
        f"{level['claim_execution_ms']} ms, {level['seq_scans_in_claim']} seq scans"
    )
    return level


def growth(b: Bench) -> None:
    sizes = [int(s) for s in b.args.growth_sizes.split(",") if s.strip()]
    levels = [_level(b, "0", None)]
    loaded = 0
    for size in sizes:
        took = load_history(b.stack.pg_dsn, size - loaded)
        loaded = size
        levels.append(_level(b, f"{size:,}", took))
    b.details["growth"] = levels
    base = levels[0]["post_to_done_ms_p50"]
    for level in levels[1:]:
        ratio = level["post_to_done_ms_p50"] / base if base else float("nan")
        f = b.figure(
            f"growth_{level['history_turns'].replace(',', '')}",
            f"POST→done p50 with {level['history_turns']} turns of history / empty",
            "×",
            target="≤ 1.2",
            higher_is_better=False,
        )
        f.reps.append(ratio)
        f.reached = ratio <= 1.2
        f.note = f"{level['post_to_done_ms_p50']} ms vs {base} ms"
