"""a step is one claim and one commit

- `steps.open_calls`: on a model step that asked for tools, how many of its calls have no
  result yet. Each result takes one off in the statement that stores it; the one that brings
  it to 0 adds the turn's next model step (docs/architecture.md, "The step").
- `budget_reservations.scopes`: the counters a reservation took (`global`, `tenant:ID`,
  `session:ID`): only the scopes with a limit are reserved; the others are only counted when
  the call is settled. Open reservations of before this revision took every scope.
- `cortex_reserve(...)`: a call's reservation in one statement: every limited counter taken,
  in the order given, all or nothing, and the reservation row inserted only when all were.

Revision ID: 0016
Revises: 0014
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RESERVE = """
CREATE FUNCTION cortex_reserve(
    p_id uuid, p_step_id uuid, p_attempt int, p_call_no int, p_tenant_id uuid,
    p_session_id uuid, p_turn_id uuid, p_user text, p_provider text, p_model text,
    p_day_start timestamptz, p_amount bigint, p_tokens bigint,
    p_keys text[], p_starts timestamptz[], p_resets timestamptz[], p_limits bigint[],
    p_amounts bigint[], p_initial bigint[]
) RETURNS TABLE (reservation_id uuid, amount bigint, tokens bigint, refused_key text,
                 refused_limit bigint, spent bigint, reserved bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    i int;
    j int;
    took int;
    held record;
BEGIN
    SELECT r.id, r.amount_micros, r.tokens INTO held FROM budget_reservations r
    WHERE r.step_id = p_step_id AND r.attempt = p_attempt AND r.call_no = p_call_no;
    IF FOUND THEN  -- a repeated call of the same attempt holds what it held
        RETURN QUERY SELECT held.id, held.amount_micros, held.tokens,
            NULL::text, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        INSERT INTO budget_counters AS c (scope, window_start, resets_at, limit_amount,
                                          reserved, spent)
        SELECT p_keys[i], p_starts[i], p_resets[i], p_limits[i], p_amounts[i], p_initial[i]
        WHERE p_initial[i] + p_amounts[i] <= p_limits[i]
        ON CONFLICT (scope, window_start) DO UPDATE
        SET reserved = c.reserved + p_amounts[i], limit_amount = p_limits[i]
        WHERE c.spent + c.reserved + p_amounts[i] <= p_limits[i]
        RETURNING 1 INTO took;
        IF took IS NULL THEN  -- this scope cannot take it: give back what was taken
            FOR j IN 1 .. i - 1 LOOP
                UPDATE budget_counters SET reserved = budget_counters.reserved - p_amounts[j]
                WHERE scope = p_keys[j] AND window_start = p_starts[j];
            END LOOP;
            RETURN QUERY SELECT NULL::uuid, NULL::bigint, NULL::bigint, p_keys[i], p_limits[i],
                coalesce((SELECT c.spent FROM budget_counters c
                          WHERE c.scope = p_keys[i] AND c.window_start = p_starts[i]),
                         p_initial[i]),
                coalesce((SELECT c.reserved FROM budget_counters c
                          WHERE c.scope = p_keys[i] AND c.window_start = p_starts[i]), 0);
            RETURN;
        END IF;
        took := NULL;
    END LOOP;
    INSERT INTO budget_reservations (id, step_id, attempt, call_no, tenant_id, session_id,
        turn_id, "user", provider, model, day_start, status, amount_micros, tokens, scopes)
    VALUES (p_id, p_step_id, p_attempt, p_call_no, p_tenant_id, p_session_id, p_turn_id, p_user,
        p_provider, p_model, p_day_start, 'reserved', p_amount, p_tokens, p_keys);
    RETURN QUERY SELECT p_id, p_amount, p_tokens,
        NULL::text, NULL::bigint, NULL::bigint, NULL::bigint;
END $$;
"""


def upgrade() -> None:
    op.add_column("steps", sa.Column("open_calls", sa.Integer(), nullable=True))
    op.add_column(
        "budget_reservations", sa.Column("scopes", postgresql.ARRAY(sa.Text()), nullable=True)
    )
    # the batches in flight: each model step with tool steps still open
    op.execute(
        """
        UPDATE steps p SET open_calls = o.n
        FROM (SELECT parent_step_id, count(*) AS n FROM steps
              WHERE kind = 'tool' AND status IN ('pending', 'leased')
                AND parent_step_id IS NOT NULL
              GROUP BY parent_step_id) o
        WHERE p.id = o.parent_step_id
        """
    )
    # open reservations took every scope (the session's tokens too, for a step's call)
    op.execute(
        """
        UPDATE budget_reservations
        SET scopes = ARRAY['global', 'tenant:' || tenant_id]
            || CASE WHEN session_id IS NULL THEN ARRAY[]::text[]
                    ELSE ARRAY['session:' || session_id] END
        """
    )
    op.execute(RESERVE)


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION IF EXISTS cortex_reserve(uuid, uuid, int, int, uuid, uuid, uuid, text, "
        "text, text, timestamptz, bigint, bigint, text[], timestamptz[], timestamptz[], "
        "bigint[], bigint[], bigint[])"
    )
    op.drop_column("budget_reservations", "scopes")
    op.drop_column("steps", "open_calls")
