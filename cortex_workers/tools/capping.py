"""Bounded tool output: a result over the cap is cut down visibly, never silently.

A JSON object keeps its shape: its longest lists are shortened (and long strings cut) until it
fits, and `"truncated": true` is added. Text is cut on a character boundary.
"""

from __future__ import annotations

import json
from typing import Any

from ..messages import JsonObject

MARKER = "…[truncated]"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _size(text: str) -> int:
    return len(text.encode("utf-8", errors="replace"))


def cut_text(text: str, cap: int) -> str:
    """At most `cap` UTF-8 bytes of `text`, on a character boundary."""
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= cap:
        return encoded.decode("utf-8")
    cut = max(cap, 0)
    while cut > 0 and (encoded[cut] & 0xC0) == 0x80:
        cut -= 1
    return encoded[:cut].decode("utf-8")


def cap_result(result: Any, cap: int) -> tuple[str, bool]:
    """(content, truncated) with content at most `cap` bytes."""
    if isinstance(result, str):
        if _size(result) <= cap:
            return cut_text(result, cap), False
        return cut_text(result, cap - _size(MARKER)) + MARKER, True
    content = _dumps(result)
    if _size(content) <= cap:
        return content, False
    if isinstance(result, dict):
        shrunk = _shrink(dict(result), cap)
        if shrunk is not None:
            return shrunk, True
    preview = cut_text(content, max(0, cap - 200))
    return _dumps({"truncated": True, "preview": preview}), True


def _shrink(data: JsonObject, cap: int) -> str | None:
    """Shorten the longest list (or string) field until the object fits in `cap` bytes."""
    data["truncated"] = True
    for _ in range(64):
        content = _dumps(data)
        if _size(content) <= cap:
            return content
        field, value = max(
            ((k, v) for k, v in data.items() if isinstance(v, list | str)),
            key=lambda kv: _size(_dumps(kv[1])),
            default=(None, None),
        )
        if field is None or not value:
            return None
        over = _size(content) - cap
        if isinstance(value, list):
            keep = max(
                0, len(value) - max(1, len(value) * over // max(1, _size(_dumps(value)))) - 1
            )
            data[field] = value[:keep]
        else:
            data[field] = cut_text(value, max(0, _size(value) - over - len(MARKER) - 8)) + MARKER
    return None
