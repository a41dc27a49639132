"""turn options and message images: what one turn asks of its model calls, and a user
message's images

`turns.options` holds a turn's own sampling and output settings and the tools its client
answers itself (`turns.options.TurnOptions`: `temperature`, `max_output_tokens`,
`result_schema`, `client_tools`), as the OpenAI-compatible Responses API sets them per
response. NULL, as for every turn that asks nothing of its own, costs nothing: the model
step's claim reads the column with the turn row it reads anyway (without its images, which
the turn's user message holds).

`messages.images` holds a user message's images (`https:` or `data:` URLs), NULL for a
message without any.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("options", JSONB(), nullable=True))
    op.add_column("messages", sa.Column("images", JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "images")
    op.drop_column("turns", "options")
