"""The OpenAI-compatible API: Responses, Conversations and Models in OpenAI's shapes, mapped
onto sessions and turns (a response is a turn, a conversation a session); no second pipeline.
docs/openai-compatibility.md describes what is supported."""

from __future__ import annotations

from fastapi import FastAPI

from . import conversations, models, responses
from .errors import OpenAIErrors

__all__ = ["OpenAIErrors", "install"]


def install(app: FastAPI) -> None:
    """The routes; the caller adds `OpenAIErrors` outside the body-size limit."""
    for module in (responses, conversations, models):
        app.include_router(module.router)
