"""checkpoints, rollback and fork

- `turns.status` may be `rolled_back`: a rollback is a state change of turns, never a delete.
- `messages.rolled_back`: the message left the history (and the model's context) with its turn.
- `sessions.forked_from_session_id` / `forked_from_turn_id`: where a fork came from.
- `checkpoints`: one row per turn that ended `done`, written by a trigger in the statement that
  ends the turn (so every path that ends one writes it), with the session's rolling summary as
  it was then and the last message it covers. See docs/checkpoints.md.

Revision ID: 0013
Revises: 0015
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUSES = ("queued", "running", "done", "failed", "cancelled")
WITH_ROLLED_BACK = (*STATUSES, "rolled_back")

CHECKPOINT_TRIGGER = """
CREATE FUNCTION cortex_record_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO checkpoints (id, session_id, turn_id, turn_seq, parent_id,
                             messages_upto_seq, summary, summary_upto_seq)
    SELECT gen_random_uuid(), s.id, NEW.id, NEW.seq,
           (SELECT c.id FROM checkpoints c JOIN turns t ON t.id = c.turn_id
             WHERE c.session_id = s.id AND t.status = 'done' AND t.seq < NEW.seq
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


def _statuses(values: Sequence[str]) -> None:
    op.drop_constraint("ck_turns_status", "turns", type_="check")
    listed = ", ".join(repr(v) for v in values)
    op.create_check_constraint("ck_turns_status", "turns", f"status IN ({listed})")


def upgrade() -> None:
    _statuses(WITH_ROLLED_BACK)
    op.add_column(
        "messages",
        sa.Column("rolled_back", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "sessions",
        sa.Column(
            "forked_from_session_id",
            sa.Uuid(),
            sa.ForeignKey("sessions.id", ondelete="SET NULL"),
        ),
    )
    op.add_column("sessions", sa.Column("forked_from_turn_id", sa.Uuid()))
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column(
            "session_id",
            sa.Uuid(),
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "turn_id",
            sa.Uuid(),
            sa.ForeignKey("turns.id", ondelete="CASCADE"),
            nullable=False,
            unique=True,
        ),
        sa.Column("turn_seq", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.Uuid(), sa.ForeignKey("checkpoints.id", ondelete="SET NULL")),
        sa.Column("messages_upto_seq", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False, server_default=""),
        sa.Column("summary_upto_seq", sa.Integer(), nullable=False, server_default="0"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.create_index("ix_checkpoints_session", "checkpoints", ["session_id", "turn_seq"])
    op.execute(CHECKPOINT_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS turns_done_checkpoint ON turns")
    op.execute("DROP FUNCTION IF EXISTS cortex_record_checkpoint()")
    op.drop_table("checkpoints")
    op.drop_column("sessions", "forked_from_turn_id")
    op.drop_column("sessions", "forked_from_session_id")
    op.drop_column("messages", "rolled_back")
    op.execute("UPDATE turns SET status = 'done' WHERE status = 'rolled_back'")
    _statuses(STATUSES)
