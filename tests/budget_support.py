"""Budget test support: extra `llm` worker processes, and tenants with their own limits."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from dataclasses import dataclass

from sqlalchemy import text

from cortex_workers.runtime import get_runtime
from cortex_workers.store import new_turns, repo
from cortex_workers.store.db import transaction
from cortex_workers.vocabulary import LlmMode


@dataclass
class LlmWorkers:
    """Extra worker processes on the `llm` queue."""

    procs: list[subprocess.Popen[bytes]]

    def kill_all(self) -> None:
        """SIGKILL, as a crash or an OOM kill would."""
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def new_tenant(overrides: dict[str, int | LlmMode | None] | None = None) -> tuple[uuid.UUID, str]:
    """A tenant with the given overrides (tenant columns) and one API key."""
    from cortex_workers.runtime import get_runtime
    from cortex_workers.store import tenant_admin, tenants
    from cortex_workers.store.db import transaction

    name = f"budget-{uuid.uuid4().hex[:8]}"
    with transaction(get_runtime().db) as db:
        row = tenant_admin.create_tenant(db, name)
        assert row is not None
        if overrides:
            tenant_admin.set_overrides(db, name, overrides)
        key = tenants.create_api_key(db, row.id)
    return row.id, key


def held_step(tenant_id: uuid.UUID) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """A session with a started turn whose first step a live worker seems to hold."""
    with transaction(get_runtime().db) as db:
        session = repo.insert_session(db, tenant_id)
        turn = new_turns.insert_turn(
            db, tenant_id=tenant_id, session_id=session.id, start_timeout_s=600, content="x"
        )
        assert turn.first_step_id is not None
        db.execute(
            text(
                "UPDATE steps SET status = 'leased', attempt = 1, "
                "lease_until = now() + interval '10 minutes' WHERE id = :id"
            ),
            {"id": turn.first_step_id},
        )
        return session.id, turn.id, turn.first_step_id
