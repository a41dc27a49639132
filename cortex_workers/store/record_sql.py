"""The pieces of a step's closing statement that write its record (`store.step_commit`):
timeline events, audit rows of calls that did not answer, the spend of each call and the
counters it moves, the turn's warnings. Each is a CTE after the ending's (`store.commit_sql`).
"""

from __future__ import annotations

from .commit_sql import Statement
from .step_record_rows import Parts


def warnings_set(s: Statement, *, present: bool) -> None:
    """Fill the `{warnings}` slot of the turn's update (and a release's own)."""
    append = "coalesce(warnings, '[]'::jsonb) || CAST(:warnings AS JSONB)"
    s.ctes = [
        (
            name,
            body.replace("{warnings}", f", warnings = {append}" if present else "").replace(
                "{warnings_only}", f"warnings = {append}"
            ),
        )
        for name, body in s.ctes
    ]


def timeline(s: Statement) -> None:
    """The step's events, in the order it learned them; those of its ending only with it."""
    s.add(
        "tl",
        "INSERT INTO timeline_events (turn_id, step, kind, data, at) "
        "SELECT :turn, e.step, e.kind, e.data, e.at FROM jsonb_to_recordset(:events) "
        "AS e(n int, step int, kind text, data jsonb, at timestamptz, ending boolean) "
        "WHERE NOT e.ending OR EXISTS (SELECT 1 FROM went) ORDER BY e.n RETURNING id",
    )


def audits(s: Statement) -> None:
    """Audit rows of the attempt's calls that did not answer (they cost tokens too)."""
    s.add(
        "aud_rec",
        "INSERT INTO decisions (tenant_id, session_id, turn_id, step_id, kind, name, attempt, "
        "is_error, latency_ms, input, output) SELECT :tenant, :session, :turn, :step, a.kind, "
        "a.name, :attempt, a.is_error, a.latency_ms, a.input, a.output "
        "FROM jsonb_to_recordset(:audits) AS a(kind text, name text, is_error boolean, "
        "latency_ms int, input jsonb, output jsonb) RETURNING id",
    )


def spends(s: Statement, *, held: bool, used: bool) -> None:
    """Each provider call's cost: with `held`, reservations settled (or, settled by the
    reconciler meanwhile, corrected down to their real cost); with `used`, the usage rows of
    calls that held none; then the counters they move, in key order (every writer of counters
    takes them in that order). With `held` only (a limit in force), the alert of a limited
    money scope that crossed its threshold (once per window) and its `budget.alert` webhook
    event: a call under no limit fires no alert, even on a counter that had a limit earlier
    in its window."""
    s.add(
        "sp",
        "SELECT * FROM jsonb_to_recordset(:spends) AS x(id uuid, held boolean, call_no int, "
        "provider text, model text, amount bigint, tokens bigint, cost bigint, "
        "input_tokens int, output_tokens int, by text, day_start timestamptz)",
    )
    cases = []
    if held:
        s.add(
            "settled",
            "UPDATE budget_reservations r SET status = 'settled', settled_at = now(), "
            "settled_by = sp.by, cost_micros = coalesce(sp.cost, r.amount_micros), "
            "input_tokens = sp.input_tokens, output_tokens = sp.output_tokens FROM sp "
            "WHERE sp.held AND r.id = sp.id AND r.status = 'reserved' RETURNING r.id",
        )
        s.add(
            "corrected",
            "UPDATE budget_reservations r SET settled_by = sp.by, cost_micros = sp.cost, "
            "input_tokens = sp.input_tokens, output_tokens = sp.output_tokens FROM sp "
            "WHERE sp.held AND sp.by = 'call' AND sp.cost IS NOT NULL AND r.id = sp.id "
            "AND r.status = 'settled' AND r.settled_by = 'reconciler' "
            "AND sp.cost <= r.amount_micros RETURNING r.id",
        )
        cases += ["settled", "corrected"]
    if used:
        s.add(
            "used",
            "INSERT INTO budget_reservations (id, step_id, attempt, call_no, tenant_id, "
            'session_id, turn_id, "user", provider, model, day_start, status, amount_micros, '
            "tokens, cost_micros, input_tokens, output_tokens, settled_by, settled_at, scopes) "
            "SELECT sp.id, :step, :attempt, sp.call_no, :tenant, :session, :turn, :user, "
            "sp.provider, sp.model, sp.day_start, 'settled', sp.amount, sp.tokens, "
            "coalesce(sp.cost, sp.amount), sp.input_tokens, sp.output_tokens, sp.by, now(), "
            "'{}'::text[] FROM sp WHERE NOT sp.held "
            "ON CONFLICT (step_id, attempt, call_no) DO NOTHING RETURNING id",
        )
        cases.append("used")
    _counters(s, cases, alerts=held)


def _counters(s: Statement, cases: list[str], *, alerts: bool) -> None:
    """The counters the settled, corrected or stored spends (`cases`: the CTEs present) move,
    summed per counter, in key order; with `alerts`, the alerts that fired, with the tenant's
    `budget.alert` event."""
    happened = " OR ".join(f"(m.happens = '{c}' AND m.id IN (SELECT id FROM {c}))" for c in cases)
    s.add(
        "moves",
        "SELECT m.key, m.start, max(m.resets) AS resets, sum(m.reserved) AS reserved, "
        "sum(m.spent) AS spent FROM jsonb_to_recordset(:moves) AS m(id uuid, happens text, "
        "key text, start timestamptz, resets timestamptz, reserved bigint, spent bigint) "
        f"WHERE {happened} GROUP BY m.key, m.start",
    )
    s.add(
        "ctr",
        "INSERT INTO budget_counters AS c (scope, window_start, resets_at, reserved, spent) "
        "SELECT key, start, resets, reserved, spent FROM moves ORDER BY key, start "
        "ON CONFLICT (scope, window_start) DO UPDATE SET "
        "reserved = c.reserved + EXCLUDED.reserved, spent = c.spent + EXCLUDED.spent"
        + (
            ", alerted_at = CASE WHEN c.alerted_at IS NULL AND c.limit_amount > 0 "
            "AND c.scope NOT LIKE 'session:%' "
            "AND (c.spent + EXCLUDED.spent) * 100 >= c.limit_amount * CAST(:alert_pct AS NUMERIC) "
            "THEN now() ELSE c.alerted_at END "
            "RETURNING c.scope, c.spent, c.limit_amount, c.alerted_at = now() AS fired"
            if alerts
            else " RETURNING c.scope"
        ),
    )
    if not alerts:
        return
    s.add(
        "alerts",
        "SELECT scope, spent, limit_amount, cortex_record_event(:tenant, 'budget.alert', "
        "jsonb_build_object('tenant_id', :tenant, 'scope', 'tenant', "
        "'spent_usd', spent / 1e6, 'limit_usd', limit_amount / 1e6, "
        "'alert_at_pct', CAST(:alert_pct AS NUMERIC))) AS event "
        "FROM ctr WHERE fired AND scope LIKE 'tenant:%' "
        "UNION ALL SELECT scope, spent, limit_amount, NULL FROM ctr "
        "WHERE fired AND scope NOT LIKE 'tenant:%'",
    )
    s.columns.append(
        "(SELECT json_agg(json_build_object('key', scope, 'spent', spent, 'limit', limit_amount)) "
        "FROM alerts) AS alerts"
    )


def record(s: Statement, parts: Parts, *, turn: bool) -> str:
    """The record's pieces after the ending's (`RecordRows.parts`); `turn`: the ending updates
    the turn, whose update takes the warnings. The statement's text."""
    events, audited, held, used, warned, _route = parts
    warnings_set(s, present=warned and turn)
    if events:
        timeline(s)
    if audited:
        audits(s)
    if held or used:
        spends(s, held=held, used=used)
    return s.sql()
