"""Helpers of the page's browser tests: a tab that records what went wrong in it, screenshots,
and the layout facts the tests check (boxes, computed styles)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Browser, Locator, Page


@dataclass
class Tab:
    """A page and what went wrong in it: console errors, script errors, failed requests."""

    page: Page
    problems: list[str] = field(default_factory=list)


def new_tab(browser: Browser, width: int = 1100, height: int = 900) -> Tab:
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(30_000)
    tab = Tab(context.new_page())
    problems = tab.problems
    tab.page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    tab.page.on("pageerror", lambda e: problems.append(str(e)))
    tab.page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    return tab


def shoot(page: Page, artifacts: Path, name: str) -> Path:
    """A full-page screenshot kept as an artifact of the run."""
    path = artifacts / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height

    def holds(self, other: Box, slack: float = 0.5) -> bool:
        """`other` lies within this box (to `slack` pixels)."""
        return (
            other.x >= self.x - slack
            and other.y >= self.y - slack
            and other.right <= self.right + slack
            and other.bottom <= self.bottom + slack
        )


def box(locator: Locator) -> Box:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not laid out"
    return Box(found["x"], found["y"], found["width"], found["height"])


def display(locator: Locator) -> str:
    """The element's computed `display` (`none` when `hidden` wins over the page's rules)."""
    return str(locator.evaluate("e => getComputedStyle(e).display"))
