"""The pieces of a step's closing statement (`store.step_commit`), as SQL text.

Each piece is one CTE. The statement locks in the order every writer uses, session → turn →
step (each `SELECT … FOR UPDATE` reads the one before it, so Postgres takes the earlier lock
first; a row locked after a wait is re-read at its newest version and checked again), then
writes the step's ending under `went` (a CTE that has a row when the step is ours and the
ending may apply), and the step's record (timeline, audit rows, spend) whatever the ending
did: those are facts of the attempt, written once, with it.

Parameters are `:name` binds (`session`, `turn`, `step`, `attempt`, `tenant`, `user`, and
those of each piece); lists and documents are JSON (`jsonb_to_recordset`), so a statement
keeps few parameters whatever the record holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..vocabulary import OPEN_STEP_STATUSES

_OPEN = ", ".join(f"'{s.value}'" for s in OPEN_STEP_STATUSES)


@dataclass
class Statement:
    """CTEs in order, and the columns of the one row the statement returns."""

    ctes: list[tuple[str, str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)

    def add(self, name: str, sql: str) -> None:
        self.ctes.append((name, sql))

    def sql(self) -> str:
        withs = ",\n".join(f"{name} AS ({body})" for name, body in self.ctes)
        return f"WITH {withs}\nSELECT {', '.join(self.columns)}"


# --- locks and the fence ---------------------------------------------------------------------


def session_locks(s: Statement, *, gated: bool) -> None:
    """`ses` → `trn` (running) → `stp` (ours); `went`: `stp`, and with `gated` only while no
    later turn of the session waits (promoting one takes more than a statement)."""
    s.add("ses", "SELECT id, last_turn_seq FROM sessions WHERE id = :session FOR UPDATE")
    s.add(
        "trn",
        "SELECT id, seq FROM turns WHERE id = :turn AND status = 'running' "
        "AND EXISTS (SELECT 1 FROM ses) FOR UPDATE",
    )
    s.add(
        "stp",
        "SELECT id FROM steps WHERE id = :step AND attempt = :attempt AND status = 'leased' "
        "AND EXISTS (SELECT 1 FROM trn) FOR UPDATE",
    )
    gate = " WHERE (SELECT last_turn_seq FROM ses) = (SELECT seq FROM trn)" if gated else ""
    s.add("went", f"SELECT id FROM stp{gate}")
    s.columns += ["(SELECT id FROM stp) AS owned", "(SELECT id FROM went) AS went"]


def turn_lock(s: Statement) -> None:
    """The turn's row, before the step's (an ending that writes both without the session)."""
    s.add("trn", "SELECT id FROM turns WHERE id = :turn FOR UPDATE")


# --- endings ---------------------------------------------------------------------------------

_USAGE_SET = (
    "provider = :provider, model = :model, fallback_from = :fallback_from, "
    "input_tokens = :input_tokens, output_tokens = :output_tokens, "
    "cache_read_tokens = :cache_read_tokens, cache_write_tokens = :cache_write_tokens, "
    "cost_usd = :cost_usd, latency_ms = :latency_ms"
)


def _route_set(route: bool) -> str:
    return ", route = :route, redactions = :redactions" if route else ""


def reply(s: Statement, *, ending: bool, calls: bool, audited: bool, route: bool) -> None:
    """A model step's reply: counted in its session and turn (which it ends with `ending`),
    the step done with its usage, the assistant message, the audit row of the call; with
    `calls`, its tool calls and a tool step for each; with `ending`, the turn's other open
    steps cancelled and a summarize step when the history outgrew its window."""
    s.add(
        "cnt",
        "UPDATE sessions SET last_message_seq = last_message_seq + 1, "
        "input_tokens = input_tokens + :add_input, output_tokens = output_tokens + :add_output, "
        "cost_usd = cost_usd + :add_cost WHERE id = :session AND EXISTS (SELECT 1 FROM went) "
        "RETURNING last_message_seq, summary_upto_seq, last_turn_seq",
    )
    end_set = (
        ", status = :status, finished_at = clock_timestamp(), answer = :answer, "
        "error = CAST(:error AS JSONB)"
        if ending
        else ""
    )
    s.add(
        "tot",
        "UPDATE turns SET input_tokens = input_tokens + :add_input, "
        "output_tokens = output_tokens + :add_output, cost_usd = cost_usd + :add_cost, "
        f"model_steps = model_steps + :add_model_steps{end_set}{{warnings}} "
        "WHERE id = :turn AND EXISTS (SELECT 1 FROM went) "
        "RETURNING id, seq, status, input_tokens, output_tokens, cost_usd, error",
    )
    open_calls = ", open_calls = jsonb_array_length(:calls)" if calls else ""
    s.add(
        "fin",
        "UPDATE steps SET status = 'done', finished_at = clock_timestamp(), lease_until = NULL, "
        f"error = NULL, {_USAGE_SET}{_route_set(route)}{open_calls} "
        "WHERE id = :step AND EXISTS (SELECT 1 FROM went) RETURNING id",
    )
    s.add(
        "msg",
        "INSERT INTO messages (id, session_id, turn_id, step_id, role, content, tool_calls, seq) "
        "SELECT :message_id, :session, :turn, :step, 'assistant', :content, "
        "CAST(:message_calls AS JSONB), cnt.last_message_seq FROM fin, cnt "
        "ON CONFLICT DO NOTHING RETURNING id",
    )
    if audited:
        s.add(
            "aud",
            "INSERT INTO decisions (tenant_id, session_id, turn_id, step_id, kind, name, attempt, "
            "is_error, latency_ms, input, output) SELECT :tenant, :session, :turn, :step, "
            "'model', :call_name, :attempt, false, :latency_ms, CAST(:call_input AS JSONB), "
            "CAST(:call_output AS JSONB) FROM fin RETURNING id",
        )
    if calls:
        _tool_calls(s)
    s.columns += [
        "(SELECT row_to_json(c) FROM cnt c) AS session_counts",
        "(SELECT row_to_json(t) FROM tot t) AS turn",
    ]
    if ending:
        _end_of_turn(s, summarize=True)


def _tool_calls(s: Statement) -> None:
    """The calls a reply asks for (`tool_calls` rows) and a pending tool step for each."""
    s.add(
        "new_calls",
        "SELECT * FROM jsonb_to_recordset(:calls) AS c(id uuid, step_id uuid, step_no int, "
        "call_id text, name text, arguments jsonb)",
    )
    s.add(
        "tcs",
        "INSERT INTO tool_calls (id, turn_id, step_id, call_id, name, arguments, status, "
        "created_at) SELECT c.id, :turn, :step, c.call_id, c.name, c.arguments, 'pending', "
        "clock_timestamp() FROM new_calls c, fin ORDER BY c.step_no "
        "ON CONFLICT DO NOTHING RETURNING id",
    )
    s.add(
        "tss",
        "INSERT INTO steps (id, turn_id, step_no, kind, parent_step_id, tool_call_id, status, "
        "published_at) SELECT c.step_id, :turn, c.step_no, 'tool', :step, c.id, 'pending', "
        "now() FROM new_calls c JOIN tcs ON tcs.id = c.id ON CONFLICT DO NOTHING RETURNING id",
    )
    s.columns.append("(SELECT count(*) FROM tss) AS tool_steps")


def _end_of_turn(s: Statement, *, summarize: bool) -> None:
    """The turn's other open steps cancelled (`cut_off`: the last claimed model step among
    them) and, with `summarize`, a summarize step when the history outgrew its window."""
    s.add(
        "cxl",
        "UPDATE steps SET status = 'cancelled', finished_at = clock_timestamp(), "
        f"lease_until = NULL WHERE turn_id = :turn AND id <> :step AND status IN ({_OPEN}) "
        "AND kind <> 'summarize' AND EXISTS (SELECT 1 FROM went) "
        "RETURNING step_no, attempt, kind",
    )
    s.columns.append(
        "(SELECT ARRAY[step_no, attempt] FROM cxl WHERE kind = 'model' AND attempt > 0 "
        "ORDER BY step_no DESC, attempt DESC LIMIT 1) AS cut_off"
    )
    if not summarize:
        return
    s.add(
        "summ",
        "INSERT INTO steps (id, turn_id, step_no, kind, parent_step_id, status, published_at) "
        "SELECT :summarize_step_id, :turn, "
        "(SELECT coalesce(max(step_no), 0) + 1 FROM steps WHERE turn_id = :turn), "
        "'summarize', :step, 'pending', now() FROM fin, cnt "
        "WHERE :summarize AND cnt.last_message_seq - cnt.summary_upto_seq > :window "
        "ON CONFLICT DO NOTHING RETURNING id",
    )
    s.columns.append("(SELECT id FROM summ) AS summarize_step_id")


def fail(s: Statement, *, route: bool) -> None:
    """The step failed with the turn's error, the turn ended `failed`, its other open steps
    cancelled."""
    s.add(
        "tot",
        "UPDATE turns SET status = 'failed', finished_at = clock_timestamp(), "
        "error = CAST(:error AS JSONB){warnings} WHERE id = :turn AND EXISTS (SELECT 1 FROM went) "
        "RETURNING id, seq, status, input_tokens, output_tokens, cost_usd, error",
    )
    s.add(
        "fin",
        "UPDATE steps SET status = 'failed', finished_at = clock_timestamp(), lease_until = NULL, "
        f"error = CAST(:error AS JSONB){_route_set(route)} "
        "WHERE id = :step AND EXISTS (SELECT 1 FROM went) RETURNING id",
    )
    s.columns.append("(SELECT row_to_json(t) FROM tot t) AS turn")
    _end_of_turn(s, summarize=False)


def release(s: Statement, *, route: bool, warnings: bool) -> None:
    """The step given back, pending: available after `delay_s`, its next claim attempt
    `next_attempt` (a retry: the attempt after this one; a deferral: this one again)."""
    if warnings:
        turn_lock(s)
    after_turn = " AND EXISTS (SELECT 1 FROM trn)" if warnings else ""
    s.add(
        "fin",
        "UPDATE steps SET status = 'pending', lease_until = NULL, attempt = :next_attempt - 1, "
        "error = coalesce(CAST(:error AS JSONB), error), "
        "available_at = now() + make_interval(secs => :delay_s), published_at = now()"
        f"{_route_set(route)} WHERE id = :step AND attempt = :attempt AND status = 'leased'"
        f"{after_turn} RETURNING id",
    )
    s.add("went", "SELECT id FROM fin")
    s.columns += ["(SELECT id FROM fin) AS owned", "(SELECT id FROM went) AS went"]
    if warnings:
        s.add(
            "tot",
            "UPDATE turns SET {warnings_only} WHERE id = :turn AND EXISTS (SELECT 1 FROM went) "
            "RETURNING id",
        )


def no_ending(s: Statement) -> None:
    """Nothing but the record: the step is not ours any more (or never ran its call to an
    end), what it spent and saw is still written."""
    s.add("went", "SELECT NULL::uuid AS id WHERE false")
    s.columns += ["NULL::uuid AS owned", "NULL::uuid AS went"]


def tool_result(s: Statement, *, proposal: bool) -> None:
    """A tool step's result, under the session's lock: the step done, the call's result, the
    `tool` message, the audit row; one call fewer open in its batch, and when that was the
    last one, the turn's next model step (numbered among the session's model calls) — once,
    since every result of the batch takes the session's lock and the batch's count."""
    s.add("ses", "SELECT id FROM sessions WHERE id = :session FOR UPDATE")
    s.add(
        "trn",
        "SELECT id, status FROM turns WHERE id = :turn AND EXISTS (SELECT 1 FROM ses) FOR UPDATE",
    )
    s.add("live", "SELECT id FROM trn WHERE status = 'running'")
    s.add(
        "fin",
        "UPDATE steps SET status = 'done', finished_at = clock_timestamp(), lease_until = NULL, "
        "error = NULL, latency_ms = :latency_ms WHERE id = :step AND attempt = :attempt "
        "AND status = 'leased' AND EXISTS (SELECT 1 FROM trn) RETURNING id",
    )
    s.add("went", "SELECT id FROM fin")
    s.add(
        "par",
        "UPDATE steps SET open_calls = open_calls - 1 "
        "WHERE id = (SELECT parent_step_id FROM steps WHERE id = :step) "
        "AND EXISTS (SELECT 1 FROM fin) RETURNING id, open_calls",
    )
    s.add(
        "cnt",
        "UPDATE sessions SET last_message_seq = last_message_seq + 1, model_calls = model_calls "
        "+ (SELECT count(*) FROM par WHERE open_calls = 0 AND EXISTS (SELECT 1 FROM live)) "
        "WHERE id = :session AND EXISTS (SELECT 1 FROM fin) RETURNING last_message_seq, "
        "model_calls",
    )
    _result_rows(s)
    _next_model_step(s)
    s.columns += [
        "(SELECT id FROM fin) AS owned",
        "(SELECT id FROM went) AS went",
        "(SELECT id FROM nxt) AS next_step_id",
    ]
    if proposal:
        s.add(
            "prop",
            "INSERT INTO proposals (id, tool_call_id, status, expires_at, tenant_id, session_id, "
            "turn_id, action, product, params, rationale, blast_radius, reversible) "
            "SELECT :proposal_id, :tool_call_id, 'pending', "
            "now() + make_interval(secs => :proposal_ttl_s), :tenant, :session, :turn, "
            ":action, :product, CAST(:params AS JSONB), :rationale, :blast_radius, :reversible "
            "FROM fin ON CONFLICT DO NOTHING RETURNING *",
        )
        s.columns.append("(SELECT row_to_json(p) FROM prop p) AS proposal")


def _result_rows(s: Statement) -> None:
    """The call's result, the `tool` message the model will read, the audit row."""
    s.add(
        "res",
        "UPDATE tool_calls SET status = 'done', result = :content, is_error = :is_error, "
        "truncated = :truncated, severity = :severity, error_kind = :error_kind, "
        "latency_ms = :latency_ms, finished_at = clock_timestamp() "
        "WHERE id = :tool_call_id AND status = 'pending' AND EXISTS (SELECT 1 FROM fin) "
        "RETURNING id",
    )
    s.add(
        "msg",
        "INSERT INTO messages (id, session_id, turn_id, step_id, role, content, tool_call_id, "
        "name, is_error, images, seq) SELECT :message_id, :session, :turn, :step, 'tool', "
        ":content, :call_id, :name, :is_error, CAST(:images AS JSONB), cnt.last_message_seq "
        "FROM cnt ON CONFLICT DO NOTHING RETURNING id",
    )
    s.add(
        "aud",
        "INSERT INTO decisions (tenant_id, session_id, turn_id, step_id, kind, name, attempt, "
        "is_error, latency_ms, input, output) SELECT :tenant, :session, :turn, :step, 'tool', "
        ":name, :attempt, :is_error, :latency_ms, CAST(:audit_input AS JSONB), "
        "CAST(:audit_output AS JSONB) FROM fin RETURNING id",
    )


def _next_model_step(s: Statement) -> None:
    """The turn's next model step, when this result was its batch's last (`par` at 0) and the
    turn still runs; numbered among the session's model calls (`cnt.model_calls`)."""
    s.add(
        "nxt",
        "INSERT INTO steps (id, turn_id, step_no, kind, parent_step_id, call_index, status, "
        "published_at) SELECT :next_step_id, :turn, "
        "(SELECT coalesce(max(step_no), 0) + 1 FROM steps WHERE turn_id = :turn), 'model', "
        "par.id, cnt.model_calls - 1, 'pending', now() FROM par, cnt "
        "WHERE par.open_calls = 0 AND EXISTS (SELECT 1 FROM live) ON CONFLICT DO NOTHING "
        "RETURNING id",
    )
