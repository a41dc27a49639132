"""The chat page: static files under `/ui`, served with a strict Content-Security-Policy.

No build step and nothing from another origin: plain ES modules and one stylesheet, in
`cortex_workers/api/ui/`. docs/ui.md describes the page."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class UiFiles(StaticFiles):
    """Static files, each answer with the page's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        return response


def mount(app: FastAPI) -> None:
    """`/ui/` (and `/ui`, redirected) serves the chat page."""
    app.mount("/ui", UiFiles(directory=UI_DIR, html=True), name="ui")
