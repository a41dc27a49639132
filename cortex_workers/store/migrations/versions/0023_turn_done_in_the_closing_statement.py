"""a turn that ends `done`: its checkpoint and its webhook event written by the statement that
ends it, not by triggers

The trigger `turns_done_checkpoint` ran a PL/pgSQL function after the closing statement of
every turn that ended `done`: it read the session and the turn's messages again and inserted
the checkpoint. The reply that ends a turn `done` is the one place a turn becomes `done`; its
closing statement now inserts the checkpoint itself, from what it has just written
(`store.commit_sql.reply`, CTE `ckp`). The same statement records the `turn.completed` webhook
event, calling `cortex_record_event` only when the tenant has a webhook for it (CTE `evt`); the
trigger `turns_ended_event` now fires for the other ends only (`failed`, `cancelled`).

Measured on a plain turn's closing statement, repeated in rolled-back transactions with the
two forms interleaved in one database: the two CTEs cost about 0.19 ms, the two triggers about
0.24 ms. Most of the cost is the checkpoint row itself.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TRIGGER = """
CREATE OR REPLACE FUNCTION cortex_record_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO checkpoints (id, session_id, turn_id, turn_seq, parent_id,
                             messages_upto_seq, summary, summary_upto_seq)
    SELECT gen_random_uuid(), s.id, NEW.id, NEW.seq,
           (SELECT c.id FROM checkpoints c JOIN turns t ON t.id = c.turn_id
             WHERE c.session_id = s.id AND c.turn_seq < NEW.seq AND t.status = 'done'
             ORDER BY c.turn_seq DESC LIMIT 1),
           COALESCE((SELECT max(m.seq) FROM messages m WHERE m.turn_id = NEW.id),
                    s.last_message_seq),
           s.summary, s.summary_upto_seq
      FROM sessions s WHERE s.id = NEW.session_id
    ON CONFLICT (turn_id) DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER turns_done_checkpoint AFTER UPDATE OF status ON turns FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status = 'done')
    EXECUTE FUNCTION cortex_record_checkpoint();
"""
"""As 0013 and 0019 left it."""


_ENDED_EVENT = """
DROP TRIGGER IF EXISTS turns_ended_event ON turns;
CREATE TRIGGER turns_ended_event AFTER UPDATE OF status ON turns FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ({ends}))
    EXECUTE FUNCTION cortex_turn_ended_event();
"""


def upgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS turns_done_checkpoint ON turns")
    op.execute("DROP FUNCTION IF EXISTS cortex_record_checkpoint()")
    op.execute(_ENDED_EVENT.format(ends="'failed', 'cancelled'"))


def downgrade() -> None:
    op.execute(_ENDED_EVENT.format(ends="'done', 'failed', 'cancelled'"))
    op.execute(_TRIGGER)
