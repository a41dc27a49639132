"""Put the original values back into a model's output, also while it streams: a placeholder
split across tokens is held back until it is complete."""

from __future__ import annotations

from typing import Any

import regex

PLACEHOLDER = regex.compile(r"\[[A-Z][A-Z0-9_]*_\d+\]")
PARTIAL = regex.compile(r"\[[A-Z0-9_]*\Z")


def restore_text(text: str, mapping: dict[str, str]) -> str:
    """Known placeholders replaced by their values; unknown ones left as they are."""
    if not mapping or "[" not in text:
        return text
    restored: str = PLACEHOLDER.sub(lambda m: mapping.get(m.group(), m.group()), text)
    return restored


def restore_value(value: Any, mapping: dict[str, str]) -> Any:
    """Strings inside JSON-like values (a tool call's arguments)."""
    if isinstance(value, str):
        return restore_text(value, mapping)
    if isinstance(value, list):
        return [restore_value(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: restore_value(v, mapping) for k, v in value.items()}
    return value


class Restorer:
    """Feed the streamed text deltas; each call returns what may be shown now."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self._mapping = mapping
        self._longest = max((len(p) for p in mapping), default=0)
        self._held = ""

    def feed(self, chunk: str) -> str:
        if not self._mapping:
            return chunk
        text = restore_text(self._held + chunk, self._mapping)
        cut = text.rfind("[")
        if cut != -1 and len(text) - cut < self._longest and PARTIAL.match(text, cut):
            self._held = text[cut:]
            return text[:cut]
        self._held = ""
        return text

    def flush(self) -> str:
        """What is still held back at the end of the stream (an incomplete placeholder)."""
        held, self._held = self._held, ""
        return held
