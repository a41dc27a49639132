"""Signing secrets (docs/security.md, "Secrets"): a token secret shorter than 16 characters
stops the API at start, saying why; and the tools' pagination cursors are signed with the token
secret when no `CORTEX_SECRET_KEY` is set, never with a key anyone who knows `DATABASE_URL` can
compute."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support import Stack, free_port

from cortex_workers.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def _exit_or_serving(proc: subprocess.Popen[bytes], port: int, timeout: float = 120) -> int | None:
    """The API's exit status, or None once it answers /healthz (or is still starting)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            return code
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return None
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return None


def test_an_api_with_a_short_token_secret_refuses_to_start_saying_why(
    stack: Stack, tmp_path: Path
) -> None:
    port = free_port()
    env = {**os.environ, **stack.env, "CORTEX_TOKEN_SECRET": "twelve-chars"}
    log = tmp_path / "api.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "config.asgi:app", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        code = _exit_or_serving(proc, port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    output = log.read_text(errors="replace")
    assert code is not None and code != 0, f"the API started with a 12-character secret:\n{output}"
    assert "token_secret must be at least 16 characters" in output.lower(), output
    assert "twelve-chars" not in output  # the refusal never quotes the secret


def test_cursors_are_signed_with_the_token_secret_not_a_hash_of_the_database_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "postgresql://cortex:cortex@db.internal:5432/cortex"
    monkeypatch.setenv("DATABASE_URL", url)
    for name in ("CORTEX_SECRET_KEY", "SECRET_KEY", "CORTEX_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    from_the_url = hashlib.sha256(f"cortex-cursors:{url}".encode()).digest()
    keys = []
    for secret in ("a-token-secret-of-this-deployment", "another-token-secret-elsewhere"):
        monkeypatch.setenv("CORTEX_TOKEN_SECRET", secret)
        keys.append(Settings().cursor_key())
    assert from_the_url not in keys
    assert keys[0] != keys[1]  # the key follows the secret
