"""The value grammar of settings: durations (`"60s"`, `"2m"`, `"500ms"`), optional text and
secrets where a blank means unset, and comma-separated lists from environment variables."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, SecretStr
from pydantic_settings import NoDecode

_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_DURATION_PART = re.compile(_NUMBER + r"(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in `"60s"`, `"2m"`, `"500ms"`, `"1h"`, `"1m30s"` or a bare number of seconds;
    spaces are ignored. Raises ValueError naming the text when it is none of these."""
    compact = "".join(text.split())
    if re.fullmatch(_NUMBER, compact):
        return float(compact)
    parts = _DURATION_PART.findall(compact)
    if not parts or "".join(number + unit for number, unit in parts) != compact:
        raise ValueError(f"not a duration: {text!r} (use e.g. 60s, 2m, 500ms)")
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def _duration(value: Any) -> Any:
    """A duration string (`parse_duration`) or a number of seconds."""
    return parse_duration(value) if isinstance(value, str) else value


Duration = Annotated[float, BeforeValidator(_duration)]


def _blank_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


OptionalText = Annotated[str | None, BeforeValidator(_blank_is_none)]
OptionalSecret = Annotated[SecretStr | None, BeforeValidator(_blank_is_none)]


def _comma_list(value: Any) -> Any:
    """`"a, b"` (an environment variable) → `["a", "b"]`; a list stays as it is."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


CommaList = Annotated[list[str], NoDecode, BeforeValidator(_comma_list)]
