"""Budget windows: the day in `budget_timezone` (daily limits), or none (a session's cap).

A window is named by its start; `resets_at` is when the next one begins. Days follow the
timezone's calendar, so a day around a daylight-saving change is 23 or 25 hours long.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

NO_WINDOW = datetime(1970, 1, 1, tzinfo=UTC)
"""The start of a scope that never resets (a session's token cap)."""


@dataclass(frozen=True, slots=True)
class Window:
    """[start, resets_at) in UTC."""

    start: datetime
    resets_at: datetime | None
    """None for a scope that never resets."""


def day_window(now: datetime, timezone: str) -> Window:
    """The calendar day in `timezone` that contains `now`."""
    zone = ZoneInfo(timezone)
    local = now.astimezone(zone)
    start = datetime(local.year, local.month, local.day, tzinfo=zone)
    following = start.date() + timedelta(days=1)
    end = datetime(following.year, following.month, following.day, tzinfo=zone)
    return Window(start.astimezone(UTC), end.astimezone(UTC))


def forever() -> Window:
    return Window(NO_WINDOW, None)
