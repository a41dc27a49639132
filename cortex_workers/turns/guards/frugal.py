"""Mode `frugal`: a turn's first model call goes to the provider's `fast_model`; an answer cut
off on the output limit, or the marker `[[NEED_MORE_CONTEXT]]`, sends the step to the full
model (the partial text withdrawn with `step_restart`; the marker never shown)."""

from __future__ import annotations

from dataclasses import replace

from ...messages import Completion, Message, ModelRequest
from ...providers.registry import Route
from ...runtime import Runtime

MARKER = "[[NEED_MORE_CONTEXT]]"
MARKER_NOTE = (
    "You are a fast first responder. If you cannot answer this well (it needs more context, "
    f"more reasoning or a more capable model), reply with exactly {MARKER} and nothing else: "
    "a more capable model will then answer instead."
)


def fast_route(rt: Runtime, route: Route, *, depth: int) -> Route | None:
    """The first model call of a turn goes to the provider's fast model, when it has one that
    differs from the session's."""
    config = rt.providers.configs.get(route.provider)
    if depth != 1 or config is None or not config.fast_model or config.fast_model == route.model:
        return None
    return Route(route.provider, config.fast_model)


def with_note(request: ModelRequest, model: str) -> ModelRequest:
    """The fast call's request: its model, and the marker documented in a system message."""
    messages = list(request.messages)
    at = sum(1 for m in messages if m.role == "system")
    messages.insert(at, Message(role="system", content=MARKER_NOTE))
    return replace(request, model=model, messages=tuple(messages))


def escalation_reason(completion: Completion, marker_seen: bool) -> str | None:
    """Why the fast answer is not good enough, or None."""
    if marker_seen:
        return "marker"
    if completion.finish_reason == "length":
        return "output_limit"
    return None


class MarkerFilter:
    """Streamed text without the marker: a tail that may begin it is held back; once the
    marker is complete, nothing more is let through."""

    def __init__(self) -> None:
        self.seen = False
        self._held = ""

    def feed(self, chunk: str) -> str:
        if self.seen:
            return ""
        text = self._held + chunk
        at = text.find(MARKER)
        if at != -1:
            self.seen, self._held = True, ""
            return text[:at]
        for keep in range(min(len(MARKER) - 1, len(text)), 0, -1):
            if MARKER.startswith(text[-keep:]):
                self._held = text[-keep:]
                return text[:-keep]
        self._held = ""
        return text

    def flush(self) -> str:
        held, self._held = self._held, ""
        return "" if self.seen else held
