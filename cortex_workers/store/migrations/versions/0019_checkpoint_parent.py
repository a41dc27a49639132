"""a checkpoint's parent found from the session's checkpoints, not from every turn

The trigger that writes a turn's checkpoint looked for the previous `done` turn's checkpoint by
joining every `done` turn of the database with a lower `seq` to the session's checkpoints: a
sequential scan of `turns` per finished turn, growing with the whole table (1.3 ms at 300 turns
in the benchmark). It now walks the session's checkpoints backwards on
`ix_checkpoints_session (session_id, turn_seq)` and stops at the first whose turn is `done`
(a checkpoint's `turn_seq` is its turn's `seq`).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = """
CREATE OR REPLACE FUNCTION cortex_record_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO checkpoints (id, session_id, turn_id, turn_seq, parent_id,
                             messages_upto_seq, summary, summary_upto_seq)
    SELECT gen_random_uuid(), s.id, NEW.id, NEW.seq,
           (SELECT c.id FROM checkpoints c JOIN turns t ON t.id = c.turn_id
             WHERE {parent}
             ORDER BY c.turn_seq DESC LIMIT 1),
           COALESCE((SELECT max(m.seq) FROM messages m WHERE m.turn_id = NEW.id),
                    s.last_message_seq),
           s.summary, s.summary_upto_seq
      FROM sessions s WHERE s.id = NEW.session_id
    ON CONFLICT (turn_id) DO NOTHING;
    RETURN NULL;
END $$;
"""
_PARENT = "c.session_id = s.id AND c.turn_seq < NEW.seq AND t.status = 'done'"
_PARENT_BEFORE = "c.session_id = s.id AND t.status = 'done' AND t.seq < NEW.seq"
"""As 0013 wrote it."""


def upgrade() -> None:
    op.execute(_FUNCTION.format(parent=_PARENT))


def downgrade() -> None:
    op.execute(_FUNCTION.format(parent=_PARENT_BEFORE))
