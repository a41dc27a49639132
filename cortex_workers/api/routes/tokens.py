"""Session tokens: a tenant hands a front end a grant to one session, not its API key."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from ...store.db import transaction
from ...vocabulary import TokenScope
from ..deps import RuntimeDep, TenantDep
from ..session_tokens import SessionGrant, sign
from ..views import require_session

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
MAX_TTL_S = 7 * 24 * 3600


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ttl_s: int = Field(default=3600, ge=1, le=MAX_TTL_S, description="Seconds until it expires.")
    scope: TokenScope = TokenScope.CHAT


class TokenOut(BaseModel):
    token: str
    expires_at: datetime


@router.post(
    "/{session_id}/tokens",
    status_code=201,
    response_model=TokenOut,
    responses={503: {"description": "no token secret is configured (CORTEX_TOKEN_SECRET)"}},
)
def create_token(
    session_id: uuid.UUID, body: TokenCreate, rt: RuntimeDep, tenant_id: TenantDep
) -> TokenOut:
    """A signed token for this session alone, for a browser or another front end: `read` reads
    the session, its messages, turns, proposals and both event streams; `chat` also posts and
    cancels turns and answers proposals. Send it as `Authorization: Bearer`, or as `?token=` on
    the two event streams. It cannot be revoked; it expires after `ttl_s` seconds."""
    secret = rt.settings.session_token_secret()
    if secret is None:
        raise HTTPException(
            503, "session tokens are off: set CORTEX_TOKEN_SECRET in every API process"
        )
    with transaction(rt.db) as db:
        require_session(db, session_id, tenant_id)
    expires = int(time.time()) + body.ttl_s
    token = sign(secret, SessionGrant(tenant_id, session_id, body.scope, expires))
    return TokenOut(token=token, expires_at=datetime.fromtimestamp(expires, UTC))
