"""Fixtures of the page's browser tests: Debian's Chromium through Playwright (no browser
download) and a folder for screenshots: `$CORTEX_TEST_ARTIFACTS/ui/` when that is set, else
`ui-artifacts` under pytest's base temporary directory. The folder is printed at the end of the
run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright
from support import require_program

# assertions wait as long as actions may: the suite runs beside other groups on two cores
expect.set_options(timeout=20_000)

_FOLDERS: list[Path] = []


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = os.environ.get("CORTEX_TEST_ARTIFACTS")
    path = Path(base) / "ui" if base else Path(str(tmp_path_factory.mktemp("ui-artifacts")))
    path.mkdir(parents=True, exist_ok=True)
    _FOLDERS.append(path)
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    chromium = require_program("chromium", "the chat page is tested in a real browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser
        browser.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for folder in _FOLDERS:
        shots = sorted(p.name for p in folder.glob("*.png"))
        terminalreporter.write_line(f"chat page screenshots ({len(shots)}): {folder}")
