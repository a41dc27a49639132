"""Fold messages that fell out of the window into the session's rolling summary."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from ..errors import TerminalError
from ..messages import PREVIOUS_SUMMARY, Completion, Message, ModelRequest
from ..providers.registry import Route
from ..runtime import Runtime, get_runtime
from ..store import repo
from ..store import steps as step_store
from ..store.db import transaction
from ..store.models import Message as StoredMessage
from ..store.models import Tenant
from ..store.step_commit import write_record
from ..store.steps import Claim
from ..vocabulary import LlmMode, StepKind
from . import spend
from .context import to_message
from .guards import provider_gate
from .guards.degradation import kept_previous
from .guards.modes import AUTO, mode_in_force
from .leases import keeper
from .liveness import holder
from .observe import StepOutcome, count_step, step_scope
from .step_record import StepRecord
from .steps import NextStep

log = logging.getLogger(__name__)

INSTRUCTION = (
    "Summarize the conversation below for your own later reference. Keep names, decisions, "
    "numbers and open questions; drop pleasantries. Start from the previous summary if any."
)


def run_summarize_step(step_id: uuid.UUID) -> list[NextStep]:
    rt = get_runtime()
    me = holder(rt)
    with transaction(rt.db) as db:
        claim = step_store.claim_step(db, step_id, lease_s=rt.settings.lease_s, holder=me)
        if claim is None:
            count_step(StepKind.SUMMARIZE, StepOutcome.DUPLICATE)
            return []
        turn = repo.get_turn(db, claim.turn_id)
        assert turn is not None
        session = repo.get_session(db, turn.session_id)
        assert session is not None
        start = session.summary_upto_seq
        upto = session.last_message_seq - rt.settings.history_window
        folded = list(repo.messages_between(db, session.id, after=start, upto=upto + 50))
        # Never cut between an assistant's tool calls and their results.
        folded_upto = [m for m in folded if m.seq <= upto]
        rest = [m for m in folded if m.seq > upto]
        while rest and rest[0].role == "tool":
            folded_upto.append(rest.pop(0))
        provider_name, model = rt.providers.resolve(session.provider, session.model)
        previous, session_id, tenant_id = session.summary, session.id, session.tenant_id
        tenant = db.get(Tenant, session.tenant_id)
        tenant_mode = tenant.mode if tenant is not None else None
        mode = mode_in_force(rt.settings, tenant=tenant_mode, session=session.mode)
        routed = session.route is not None or model == AUTO
    fold = Fold(
        folded_upto, start, previous, provider_name, model, session_id, tenant_id, mode, routed
    )
    with step_scope(claim, session_id=session_id):
        _summarize(rt, claim, fold)
    return []


@dataclass(frozen=True, slots=True)
class Fold:
    """What a summarize step read: the messages to fold and the session's summary so far."""

    messages: list[StoredMessage]
    start: int
    previous: str | None
    provider_name: str
    model: str
    session_id: uuid.UUID
    tenant_id: uuid.UUID
    mode: LlmMode = LlmMode.NORMAL
    routed: bool = False
    """The session lets the router choose: its summaries go to the cheapest fast model."""


def _summarize(rt: Runtime, claim: Claim, fold: Fold) -> None:
    step_id, folded_upto, previous = claim.step_id, fold.messages, fold.previous
    provider_name, model = fold.provider_name, fold.model
    if not folded_upto:
        with transaction(rt.db) as db:
            step_store.finish_step(db, step_id, claim.attempt)
        count_step(StepKind.SUMMARIZE, StepOutcome.DONE)
        return
    messages = [Message(role="system", content=INSTRUCTION)]
    if previous:
        messages.append(Message(role="system", content=PREVIOUS_SUMMARY + previous))
    messages += [to_message(m) for m in folded_upto]
    request = ModelRequest(
        model=model, messages=tuple(messages), purpose="summarize", attempt=claim.attempt
    )
    try:  # routed, local-only and redacted like a model step: nothing is sent if it fails
        gated = provider_gate.guard(
            rt, Route(provider_name, model), request, mode=fold.mode, routed=fold.routed
        )
        with keeper(rt).hold(claim.step_id, claim.attempt):
            provider_gate.wait_for_rate_limit(rt, gated)
            completion = provider_gate.send(rt, gated, _reserve(rt, claim, fold))
    except TerminalError as exc:
        if exc.code not in SKIPPED:
            raise
        log.warning("summary of session %s skipped: %s", fold.session_id, exc.code)
        with transaction(rt.db) as db:
            step_store.finish_step(db, step_id, claim.attempt)
        count_step(StepKind.SUMMARIZE, StepOutcome.FAILED)
        return
    _store(rt, claim, fold, completion)


SKIPPED = frozenset({"no_route", "local_only", "redaction_failed", "budget_exhausted"})
"""A summary refused for these waits for a later turn's (nothing was sent)."""


def _reserve(rt: Runtime, claim: Claim, fold: Fold) -> provider_gate.Reserve:
    def reserve(route: Route, request: ModelRequest) -> spend.Admitted:
        owner = (fold.tenant_id, fold.session_id)
        admitted = spend.reserve_summary(rt, claim, owner, route, request)
        if admitted is None:
            raise TerminalError("no budget left for the summary", code="budget_exhausted")
        return admitted

    return reserve


def _store(rt: Runtime, claim: Claim, fold: Fold, completion: Completion) -> None:
    """The summarize step finished, with the new summary unless it degraded the context (the
    anomaly and the action taken in the step's timeline)."""
    record = StepRecord(claim.step_no)
    keep = kept_previous(rt, record, fold.previous, completion.text)  # context_degradation
    with transaction(rt.db) as db:
        write_record(db, turn_id=claim.turn_id, rows=record.rows(), tenant_id=fold.tenant_id)
        finished = step_store.finish_step(
            db,
            claim.step_id,
            claim.attempt,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
        )
        if finished and not keep:
            repo.fold_summary(
                db,
                fold.session_id,
                expected_upto=fold.start,
                upto=fold.messages[-1].seq,
                summary=completion.text,
            )
    count_step(StepKind.SUMMARIZE, StepOutcome.DONE)
