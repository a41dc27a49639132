"""After a run: wait until every submitted turn is terminal (or a deadline passes), then read
Postgres, the Redis streams and what the SSE clients received, and count what went wrong.

The rules checked (each a count; the lists name the turns, with evidence):
- lost: a turn the API accepted (202) with no row, or never terminal by the deadline;
- duplicated: more than one assistant message per model step (or per turn and step number),
  more than one user message per turn or tool message per tool call, more turns in a session
  than were submitted (an Idempotency-Key retry created a second turn);
- order: within a session, a turn started before the previous one ended, turns numbered out of
  submission order, or messages of different turns interleaved in the history;
- stream vs stored: the text a client rebuilds from the SSE events it received (per step,
  dropping a step's text at `step_restart`) differs from the turn's stored assistant messages;
  the same for the Redis stream itself while it exists;
- failed visibly: status `failed` with an error (and the client got `done` with that status).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter, defaultdict
from typing import Any

from .driver import TERMINAL, Driver, Ev, TurnRecord
from .faults import FaultRecord
from .stack import Stack

log = logging.getLogger("faults.checker")
EXAMPLES = 8  # evidence items kept per problem kind


def text_of(events: list[tuple[str, dict[str, Any]]]) -> str:
    """Assistant text a client rebuilds: `token` text per step, a step's text dropped at its
    `step_restart` (docs/events.md, "The rule for clients")."""
    by_step: dict[int, str] = {}
    for event, data in events:
        if event == "token":
            step = int(data.get("step", 0))
            by_step[step] = by_step.get(step, "") + str(data.get("text", ""))
        elif event == "step_restart":
            by_step[int(data.get("step", 0))] = ""
    return "".join(by_step[k] for k in sorted(by_step))


def _id_key(eid: str) -> tuple[int, int] | None:
    ms, sep, seq = eid.partition("-")
    if not sep or not ms.isdigit() or not seq.isdigit():
        return None
    return int(ms), int(seq)


def _p50(values: list[float]) -> float | None:
    return round(sorted(values)[len(values) // 2], 2) if values else None


def _may_hit(fault_kind: str, step_kind: str) -> bool:
    """Could this fault have made a step of this kind run again?"""
    if fault_kind == "kill_llm":
        return step_kind == "model"
    if fault_kind == "kill_tools":
        return step_kind == "tool"
    return True


def _diff(a: str, b: str) -> dict[str, Any]:
    i = next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return {
        "at": i,
        "streamed_len": len(a),
        "stored_len": len(b),
        "streamed_near": a[max(0, i - 30) : i + 50],
        "stored_near": b[max(0, i - 30) : i + 50],
    }


class Checker:
    def __init__(
        self,
        stack: Stack,
        driver: Driver,
        faults: list[FaultRecord],
        *,
        scenario: str,
        t0: float,
    ) -> None:
        self.stack = stack
        self.driver = driver
        self.faults = faults
        self.scenario = scenario
        self.t0 = t0
        self.waited_s = 0.0

    # ------------------------------------------------------------------ waiting

    def _conn(self) -> Any:
        import psycopg

        return psycopg.connect(self.stack.pg_dsn, connect_timeout=5, autocommit=True)

    def wait_terminal(self, timeout_s: float) -> int:
        """Poll Postgres until every accepted turn is terminal; returns how many are not."""
        ids = [r.turn_id for r in self.driver.records if r.turn_id]
        start = time.monotonic()
        open_n = len(ids)
        while time.monotonic() - start < timeout_s:
            try:
                with self._conn() as conn:
                    open_n = conn.execute(
                        "SELECT count(*) FROM turns WHERE id = ANY(%s::uuid[]) "
                        "AND status NOT IN ('done', 'failed', 'cancelled')",
                        (ids,),
                    ).fetchone()[0]
                    present = conn.execute(
                        "SELECT count(*) FROM turns WHERE id = ANY(%s::uuid[])", (ids,)
                    ).fetchone()[0]
                open_n += len(ids) - present
                if open_n == 0:
                    break
            except Exception as exc:
                log.warning("checker: postgres not answering yet: %s", exc)
            time.sleep(1.0)
        self.waited_s = time.monotonic() - start
        return open_n

    # ------------------------------------------------------------------ reading

    def _read_db(self) -> dict[str, Any]:
        sids = [s["id"] for s in self.driver.sessions if s.get("id")]
        with self._conn() as conn:

            def rows(sql: str, *args: Any) -> list[dict[str, Any]]:
                cur = conn.execute(sql, args)
                names = [d.name for d in cur.description]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

            turns = rows(
                "SELECT id::text, session_id::text, seq, status, error, idempotency_key, "
                "created_at, started_at, finished_at FROM turns "
                "WHERE session_id = ANY(%s::uuid[]) ORDER BY session_id, seq",
                sids,
            )
            tids = [t["id"] for t in turns]
            steps = rows(
                "SELECT id::text, turn_id::text, step_no, kind, status, attempt, error, "
                "parent_step_id::text, created_at, finished_at FROM steps "
                "WHERE turn_id = ANY(%s::uuid[]) ORDER BY turn_id, step_no",
                tids,
            )
            messages = rows(
                "SELECT id::text, session_id::text, seq, role, content, turn_id::text, "
                "step_id::text, tool_call_id, created_at FROM messages "
                "WHERE session_id = ANY(%s::uuid[]) ORDER BY session_id, seq",
                sids,
            )
            calls = rows(
                "SELECT id::text, turn_id::text, step_id::text, call_id, name, status "
                "FROM tool_calls WHERE turn_id = ANY(%s::uuid[])",
                tids,
            )
        return {"turns": turns, "steps": steps, "messages": messages, "tool_calls": calls}

    def _read_streams(self, turn_ids: list[str]) -> tuple[dict[str, list[Any]], str | None]:
        out: dict[str, list[Any]] = {}
        try:
            r = self.stack.redis_client(timeout=10)
            for tid in turn_ids:
                entries = r.xrange(f"cortex:turn:{tid}:events")
                if entries:
                    out[tid] = [
                        (
                            eid.decode(),
                            f.get(b"event", b"").decode(),
                            json.loads(f.get(b"data", b"{}")),
                        )
                        for eid, f in entries
                    ]
            r.close()
        except Exception as exc:
            return out, f"{type(exc).__name__}: {exc}"
        return out, None

    # ------------------------------------------------------------------ checking

    def check(self) -> dict[str, Any]:
        db = self._read_db()
        recs = self.driver.records
        by_tid: dict[str, TurnRecord] = {r.turn_id: r for r in recs if r.turn_id}
        turns = {t["id"]: t for t in db["turns"]}
        steps_by_turn: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in db["steps"]:
            steps_by_turn[s["turn_id"]].append(s)
        step_by_id = {s["id"]: s for s in db["steps"]}
        msgs_by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
        msgs_by_turn: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for m in db["messages"]:
            msgs_by_session[m["session_id"]].append(m)
            if m["turn_id"]:
                msgs_by_turn[m["turn_id"]].append(m)
        streams, stream_error = self._read_streams(list(turns))
        problems: dict[str, list[Any]] = defaultdict(list)

        def note(kind: str, item: Any) -> None:
            problems[kind].append(item)

        # -- accepted, lost, terminal
        accepted = [r for r in recs if r.turn_id]
        not_accepted = [r for r in recs if not r.turn_id]
        for r in not_accepted:
            note(
                "not_accepted",
                {
                    "session": r.session_idx,
                    "turn": r.turn_idx,
                    "codes": r.submit_codes[-6:],
                    "error": r.submit_error,
                },
            )
        for r in accepted:
            if r.submit_error:
                note("idempotency", {"turn_id": r.turn_id, **r.submit_error})
        status_count: Counter[str] = Counter()
        for r in accepted:
            t = turns.get(r.turn_id or "")
            if t is None:
                note("lost", {"turn_id": r.turn_id, "why": "accepted (202) but no row"})
                continue
            status_count[t["status"]] += 1
            if t["status"] not in TERMINAL:
                open_steps = [
                    {k: s[k] for k in ("step_no", "kind", "status", "attempt")}
                    for s in steps_by_turn[t["id"]]
                    if s["status"] in ("pending", "leased")
                ]
                note(
                    "lost",
                    {
                        "turn_id": t["id"],
                        "why": f"still {t['status']} after the deadline",
                        "open_steps": open_steps,
                    },
                )
            elif t["status"] == "failed" and not t["error"]:
                note("failed_silently", {"turn_id": t["id"]})
        failed_visibly = [
            turns[r.turn_id]
            for r in accepted
            if r.turn_id in turns
            and turns[r.turn_id]["status"] == "failed"
            and turns[r.turn_id]["error"]
        ]

        # -- duplicates
        submitted_ids = set(by_tid)
        per_session_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for t in db["turns"]:
            per_session_rows[t["session_id"]].append(t)
            if t["id"] not in submitted_ids:
                note(
                    "duplicate_turns",
                    {
                        "turn_id": t["id"],
                        "session_id": t["session_id"],
                        "seq": t["seq"],
                        "idempotency_key": t["idempotency_key"],
                    },
                )
        assistant_per_step: Counter[str] = Counter()
        assistant_per_turn_step: Counter[tuple[str, int]] = Counter()
        user_per_turn: Counter[str] = Counter()
        tool_per_step: Counter[str] = Counter()
        for m in db["messages"]:
            if m["role"] == "assistant" and m["step_id"]:
                assistant_per_step[m["step_id"]] += 1
                step = step_by_id.get(m["step_id"])
                if step is not None:
                    assistant_per_turn_step[(step["turn_id"], step["step_no"])] += 1
                    if step["status"] != "done":
                        note(
                            "assistant_for_unfinished_step",
                            {
                                "turn_id": step["turn_id"],
                                "step_no": step["step_no"],
                                "step_status": step["status"],
                                "message_seq": m["seq"],
                            },
                        )
            elif m["role"] == "user" and m["turn_id"]:
                user_per_turn[m["turn_id"]] += 1
            elif m["role"] == "tool" and m["step_id"]:
                tool_per_step[m["step_id"]] += 1
        dup_assistant = sum(n - 1 for n in assistant_per_step.values() if n > 1) + sum(
            n - 1 for n in assistant_per_turn_step.values() if n > 1
        )
        for (tid, no), n in assistant_per_turn_step.items():
            if n > 1:
                note("duplicated_assistant", {"turn_id": tid, "step_no": no, "messages": n})
        dup_other = sum(n - 1 for n in user_per_turn.values() if n > 1) + sum(
            n - 1 for n in tool_per_step.values() if n > 1
        )
        for tid, n in user_per_turn.items():
            if n > 1:
                note("duplicated_other", {"turn_id": tid, "user_messages": n})
        for sid_, n in tool_per_step.items():
            if n > 1:
                note("duplicated_other", {"step_id": sid_, "tool_messages": n})
        # a model step that finished must have exactly one assistant message
        for s in db["steps"]:
            if s["kind"] == "model" and s["status"] == "done" and assistant_per_step[s["id"]] == 0:
                note(
                    "done_step_without_message", {"turn_id": s["turn_id"], "step_no": s["step_no"]}
                )

        # -- order within a session
        for sess in self.driver.sessions:
            sid = sess.get("id")
            if not sid:
                continue
            rows = sorted(per_session_rows.get(sid, []), key=lambda t: t["seq"])
            for a, b in zip(rows, rows[1:], strict=False):
                if b["started_at"] is None:
                    continue
                if a["finished_at"] is None or b["started_at"] < a["finished_at"]:
                    note(
                        "order",
                        {
                            "session_id": sid,
                            "why": "turn started before the previous one ended",
                            "prev": a["id"],
                            "prev_seq": a["seq"],
                            "prev_finished": str(a["finished_at"]),
                            "next": b["id"],
                            "next_seq": b["seq"],
                            "next_started": str(b["started_at"]),
                        },
                    )
            mine = sorted(
                (r for r in recs if r.session_idx == sess["idx"] and r.turn_id in turns),
                key=lambda r: r.turn_idx,
            )
            seqs = [turns[str(r.turn_id)]["seq"] for r in mine]
            if seqs != sorted(seqs):
                note(
                    "order",
                    {"session_id": sid, "why": "turn seq not in submission order", "seqs": seqs},
                )
            seq_of = {t["id"]: t["seq"] for t in rows}
            last_seq = 0
            seen_turns: set[str] = set()
            last_model_step: dict[str, int] = {}
            for m in msgs_by_session.get(sid, []):
                tid = m["turn_id"]
                if tid is None or tid not in seq_of:
                    continue
                if seq_of[tid] < last_seq:
                    note(
                        "order",
                        {
                            "session_id": sid,
                            "why": "messages of turns interleaved",
                            "message_seq": m["seq"],
                            "turn_seq": seq_of[tid],
                            "after_turn_seq": last_seq,
                        },
                    )
                last_seq = max(last_seq, seq_of[tid])
                if tid not in seen_turns:
                    seen_turns.add(tid)
                    if m["role"] != "user":
                        note(
                            "order",
                            {
                                "session_id": sid,
                                "turn_id": tid,
                                "why": "a turn's first message is not its user message",
                                "message_seq": m["seq"],
                                "role": m["role"],
                            },
                        )
                if m["role"] == "assistant" and m["step_id"] in step_by_id:
                    no = step_by_id[m["step_id"]]["step_no"]
                    if no < last_model_step.get(tid, 0):
                        note(
                            "order",
                            {
                                "turn_id": tid,
                                "why": "assistant messages out of step order",
                                "step_no": no,
                            },
                        )
                    last_model_step[tid] = no

        # -- streams vs stored
        mismatch_n = 0
        redis_mismatch_n = 0
        sse_incomplete = 0
        sse_regressions = 0
        missing_results = 0
        streams_present = 0
        partial_streams = 0
        script_mismatch = 0
        for r in accepted:
            t = turns.get(r.turn_id or "")
            if t is None:
                continue
            stored = "".join(
                m["content"] for m in msgs_by_turn.get(t["id"], []) if m["role"] == "assistant"
            )
            # what the SSE client received
            prev: tuple[int, int] | None = None
            for ev in r.events:
                key = _id_key(ev.id)
                if key is not None and prev is not None and key <= prev:
                    sse_regressions += 1
                    if len(problems["sse_id_regression"]) < EXAMPLES:
                        note(
                            "sse_id_regression",
                            {
                                "turn_id": t["id"],
                                "id": ev.id,
                                "after": f"{prev[0]}-{prev[1]}",
                                "conn": ev.conn,
                            },
                        )
                prev = key if key is not None else prev
            if t["status"] in TERMINAL:
                if not r.saw_done:
                    sse_incomplete += 1
                    note(
                        "sse_incomplete",
                        {
                            "turn_id": t["id"],
                            "status": t["status"],
                            "connections": r.connections,
                            "codes": [str(c) for c in r.sse_codes[-6:]],
                        },
                    )
                else:
                    streamed = text_of([(e.event, e.data) for e in r.events])
                    if streamed != stored:
                        mismatch_n += 1
                        note(
                            "stream_vs_stored",
                            self._evidence(r, t, streamed, stored, steps_by_turn[t["id"]]),
                        )
                    done = next(e for e in r.events if e.event == "done")
                    if done.data.get("status") != t["status"]:
                        note(
                            "sse_status_mismatch",
                            {"turn_id": t["id"], "sse": done.data, "db": t["status"]},
                        )
                    got = {e.data.get("id") for e in r.events if e.event == "tool_result"}
                    for c in db["tool_calls"]:
                        if (
                            c["turn_id"] == t["id"]
                            and c["status"] == "done"
                            and c["call_id"] not in got
                        ):
                            missing_results += 1
                            note(
                                "missing_tool_result", {"turn_id": t["id"], "call_id": c["call_id"]}
                            )
            entries = streams.get(t["id"])
            if entries is not None:
                streams_present += 1
                if entries[0][0] != "0-1":
                    # lost its beginning with a Redis restart without data: SSE readers are
                    # served from Postgres instead, so only whole streams must match
                    partial_streams += 1
                elif t["status"] in TERMINAL and any(e[1] == "done" for e in entries):
                    from_redis = text_of([(e[1], e[2]) for e in entries])
                    if from_redis != stored:
                        redis_mismatch_n += 1
                        note(
                            "redis_stream_vs_stored",
                            {
                                "turn_id": t["id"],
                                **_diff(from_redis, stored),
                                "entries": len(entries),
                            },
                        )
            # informational: the answer the script says, while the session is on script
            earlier = [
                x for x in accepted if x.session_idx == r.session_idx and x.turn_idx < r.turn_idx
            ]
            on_script = all(turns.get(x.turn_id or "", {}).get("status") == "done" for x in earlier)
            if on_script and t["status"] == "done" and stored != r.expected_text:
                script_mismatch += 1
                note("script_mismatch", {"turn_id": t["id"], **_diff(stored, r.expected_text)})

        # fresh clients that joined after a fault (no Last-Event-ID)
        observer_mismatch = 0
        observer_incomplete = 0
        for obs in self.driver.observers:
            t = turns.get(obs.turn_id)
            if t is None or t["status"] not in TERMINAL:
                continue
            if not obs.saw_done:
                observer_incomplete += 1
                note(
                    "sse_incomplete",
                    {
                        "turn_id": obs.turn_id,
                        "observer": obs.reason,
                        "connections": obs.connections,
                    },
                )
                continue
            stored = "".join(
                m["content"] for m in msgs_by_turn.get(t["id"], []) if m["role"] == "assistant"
            )
            streamed = text_of([(e.event, e.data) for e in obs.events])
            if streamed != stored:
                observer_mismatch += 1
                rec = by_tid[obs.turn_id]
                evidence = self._evidence(rec, t, streamed, stored, steps_by_turn[t["id"]])
                evidence["connections"] = obs.connections
                evidence["events"] = [
                    f"c{e.conn} {e.id} {e.event}"
                    + (f" {e.data.get('text')!r}" if e.event == "token" else "")
                    for e in obs.events
                ][:200]
                note(
                    "stream_vs_stored",
                    {
                        "observer": obs.reason,
                        "joined_s_after_start": round(obs.started - self.t0, 1),
                        **evidence,
                    },
                )
        mismatch_n += observer_mismatch
        sse_incomplete += observer_incomplete

        # -- retries and recovery
        retried = Counter(s["kind"] for s in db["steps"] if s["attempt"] > 1)
        max_attempt = max((s["attempt"] for s in db["steps"]), default=0)
        infra = [f for f in self.faults if not f.kind.startswith("sse_")]
        recovery: list[dict[str, Any]] = []
        step_recovery: list[float] = []
        for t in db["turns"]:
            if t["id"] not in submitted_ids or t["finished_at"] is None or t["started_at"] is None:
                continue
            start, end = t["started_at"].timestamp(), t["finished_at"].timestamp()
            # a turn was hit when one of its steps had to run again (attempt > 1); its recovery
            # runs from the first fault that could have hit such a step (one of its kind, while
            # the step existed and was unfinished) to the end of the turn; with no such fault
            # (a retry for another reason) it is the turn's whole duration
            retried_steps = [s for s in steps_by_turn[t["id"]] if s["attempt"] > 1]
            if not retried_steps:
                continue
            hits = []
            for s in retried_steps:
                s_start = s["created_at"].timestamp()
                s_end = s["finished_at"].timestamp() if s["finished_at"] else end
                step_hits = [
                    f for f in infra if s_start <= f.t <= s_end and _may_hit(f.kind, s["kind"])
                ]
                if step_hits and s["finished_at"] is not None:
                    # from the fault to the interrupted step done again (lease expiry,
                    # re-publish, waiting for a worker, and running the step once more)
                    step_recovery.append(s_end - min(f.t for f in step_hits))
                hits += step_hits
            if hits:
                f = min(hits, key=lambda f: f.t)
                recovery.append(
                    {
                        "turn_id": t["id"],
                        "fault": f.kind,
                        "retried": [(s["step_no"], s["kind"], s["attempt"]) for s in retried_steps],
                        "s": round(end - f.t, 2),
                        "after_fault_end_s": round(end - (f.t_end or f.t), 2),
                    }
                )
            else:
                recovery.append(
                    {
                        "turn_id": t["id"],
                        "fault": None,
                        "retried": [(s["step_no"], s["kind"], s["attempt"]) for s in retried_steps],
                        "s": round(end - start, 2),
                        "after_fault_end_s": round(end - start, 2),
                    }
                )
        recovery.sort(key=lambda x: -x["s"])
        durations = sorted(
            t["finished_at"].timestamp() - t["created_at"].timestamp()
            for t in db["turns"]
            if t["finished_at"] is not None and t["id"] in submitted_ids
        )

        # -- SSE resumption (scenario 5): time from a drop to the next event received
        resume_gaps = []
        ttl = float(self.stack.env.get("CORTEX_STREAM_TTL_S", "3600"))
        snapshot_resumes = 0
        for r in accepted:
            t = turns.get(r.turn_id or "")
            for d in r.forced_disconnects:
                nxt = next((e for e in r.events if e.t > d["t"]), None)
                if nxt is None:
                    continue
                if not d["late"]:
                    resume_gaps.append(nxt.t - d["t"])
                elif t and t["finished_at"] and nxt.t > t["finished_at"].timestamp() + ttl:
                    snapshot_resumes += 1  # the stream had expired: served from Postgres

        landed = [f for f in self.faults if f.landed]
        http = self.driver.http.summary()
        counts = {
            "planned": len(recs),
            "submitted": len(accepted),
            "not_accepted": len(not_accepted),
            "done": status_count.get("done", 0),
            "failed_visibly": len(failed_visibly),
            "failed_silently": len(problems["failed_silently"]),
            "cancelled": status_count.get("cancelled", 0),
            "lost": len(problems["lost"]),
            "duplicated_assistant_messages": dup_assistant,
            "duplicated_other_messages": dup_other,
            "duplicate_turns": len(problems["duplicate_turns"]),
            "assistant_for_unfinished_step": len(problems["assistant_for_unfinished_step"]),
            "order_violations": len(problems["order"]),
            "stream_vs_stored_mismatches": mismatch_n,
            "redis_stream_vs_stored_mismatches": redis_mismatch_n,
            "sse_incomplete": sse_incomplete,
            "sse_status_mismatches": len(problems["sse_status_mismatch"]),
            "sse_id_regressions": sse_regressions,
            "missing_tool_results": missing_results,
            "script_mismatches": script_mismatch,
            "http_5xx_not_503": http["http_500"],
            "error_shape_violations": len(http["violations"]),
            "faults_fired": len(self.faults),
            "faults_landed": len(landed),
            "steps_mid_flight_at_faults": sum(f.landed_on for f in self.faults),
            "retried_steps": dict(retried),
            "max_attempt": max_attempt,
            "longest_recovery_s": recovery[0]["s"] if recovery else None,
            "longest_recovery_after_fault_end_s": max(
                (x["after_fault_end_s"] for x in recovery), default=None
            ),
            "turns_hit": len(recovery),
            "step_recovery_p50_s": _p50(step_recovery),
            "step_recovery_max_s": round(max(step_recovery), 2) if step_recovery else None,
            "turn_seconds_p50": round(durations[len(durations) // 2], 2) if durations else None,
            "turn_seconds_max": round(durations[-1], 2) if durations else None,
            "sse_resume_gap_max_s": round(max(resume_gaps), 2) if resume_gaps else None,
            "sse_connections": sum(r.connections for r in accepted),
            "fresh_observers": len(self.driver.observers),
            "observer_mismatches": observer_mismatch,
            "sse_forced_disconnects": sum(len(r.forced_disconnects) for r in accepted),
            "sse_dropped_by_faults": sum(r.dropped for r in accepted),
            "sse_resumed_after_stream_expiry": snapshot_resumes,
            "redis_streams_present": streams_present,
            "redis_streams_partial": partial_streams,
            "wait_terminal_s": round(self.waited_s, 1),
        }
        verdict = self._verdict(counts)
        return {
            "scenario": self.scenario,
            "ok": not verdict,
            "verdict": verdict or ["ok"],
            "counts": counts,
            "problems": {k: v[:EXAMPLES] for k, v in problems.items() if v},
            "faults": [f.to_json(self.t0) for f in self.faults],
            "recovery_top": recovery[:EXAMPLES],
            "failed_turns": [
                {
                    "turn_id": t["id"],
                    "error": t["error"],
                    "steps": [
                        (s["step_no"], s["kind"], s["status"], s["attempt"])
                        for s in steps_by_turn[t["id"]]
                    ],
                }
                for t in failed_visibly
            ][:20],
            "turns": [
                {**r.to_json(), "status": turns.get(r.turn_id or "", {}).get("status")}
                for r in recs
            ],
            "http": http,
            "stream_read_error": stream_error,
        }

    @staticmethod
    def _verdict(c: dict[str, Any]) -> list[str]:
        bad = []
        for key in (
            "not_accepted",
            "lost",
            "failed_silently",
            "duplicated_assistant_messages",
            "duplicated_other_messages",
            "duplicate_turns",
            "order_violations",
            "stream_vs_stored_mismatches",
            "redis_stream_vs_stored_mismatches",
            "sse_incomplete",
            "sse_status_mismatches",
            "sse_id_regressions",
            "missing_tool_results",
            "http_5xx_not_503",
            "error_shape_violations",
        ):
            if c[key]:
                bad.append(f"{key}={c[key]}")
        if c["faults_landed"] == 0:
            bad.append("no fault landed on running work: this run does not count")
        return bad

    def _evidence(
        self,
        r: TurnRecord,
        t: dict[str, Any],
        streamed: str,
        stored: str,
        steps: list[dict[str, Any]],
    ) -> dict[str, Any]:
        def brief(e: Ev) -> str:
            text = e.data.get("text") if e.event == "token" else None
            extra = f" {text!r}" if text is not None else ""
            if e.event == "step_restart":
                extra = f" step={e.data.get('step')} attempt={e.data.get('attempt')}"
            return f"c{e.conn} {e.id} {e.event}{extra}"

        return {
            "turn_id": t["id"],
            "status": t["status"],
            **_diff(streamed, stored),
            "steps": [{k: s[k] for k in ("step_no", "kind", "status", "attempt")} for s in steps],
            "connections": r.connections,
            "events": [brief(e) for e in r.events][:200],
        }


def table(report: dict[str, Any]) -> str:
    c = report["counts"]
    rows = [
        (
            "submitted",
            c["submitted"],
            f"of {c['planned']} planned; not accepted {c['not_accepted']}",
        ),
        ("done", c["done"], ""),
        ("failed (visibly)", c["failed_visibly"], f"silently {c['failed_silently']}"),
        ("cancelled", c["cancelled"], ""),
        ("lost", c["lost"], "accepted, but no row or never terminal"),
        (
            "duplicated assistant msgs",
            c["duplicated_assistant_messages"],
            f"other msgs {c['duplicated_other_messages']}, extra turns {c['duplicate_turns']}",
        ),
        ("order violations", c["order_violations"], "within a session"),
        (
            "stream≠stored (SSE)",
            c["stream_vs_stored_mismatches"],
            f"redis stream≠stored {c['redis_stream_vs_stored_mismatches']}",
        ),
        (
            "fresh observers",
            c["fresh_observers"],
            f"of which stream≠stored {c['observer_mismatches']}",
        ),
        (
            "SSE incomplete",
            c["sse_incomplete"],
            f"id regressions {c['sse_id_regressions']}, "
            f"missing tool results {c['missing_tool_results']}",
        ),
        (
            "HTTP 5xx≠503 / bad shape",
            c["http_5xx_not_503"],
            f"{c['error_shape_violations']} total violations",
        ),
        (
            "unexpected process exits",
            c.get("unexpected_process_exits", 0),
            "processes that died on their own (restarted)",
        ),
        (
            "faults fired / landed",
            f"{c['faults_fired']} / {c['faults_landed']}",
            f"{c['steps_mid_flight_at_faults']} steps mid-flight at the faults",
        ),
        (
            "retried steps",
            sum(c["retried_steps"].values()),
            f"{c['retried_steps']} max attempt {c['max_attempt']}",
        ),
        (
            "longest recovery (s)",
            c["longest_recovery_s"],
            f"after fault end {c['longest_recovery_after_fault_end_s']}; "
            f"turns hit {c['turns_hit']}",
        ),
        (
            "step recovery p50 / max (s)",
            f"{c['step_recovery_p50_s']} / {c['step_recovery_max_s']}",
            "fault → the interrupted step done again",
        ),
        ("turn seconds p50 / max", f"{c['turn_seconds_p50']} / {c['turn_seconds_max']}", ""),
        (
            "SSE connections",
            c["sse_connections"],
            f"forced drops {c['sse_forced_disconnects']}, "
            f"fault drops {c['sse_dropped_by_faults']}, "
            f"max resume gap {c['sse_resume_gap_max_s']}, "
            f"resumed from snapshot {c['sse_resumed_after_stream_expiry']}",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"== scenario {report['scenario']} =="]
    lines += [f"  {name:<{width}}  {str(value):>9}  {note}" for name, value, note in rows]
    lines.append("  verdict: " + "; ".join(report["verdict"]))
    return "\n".join(lines)
