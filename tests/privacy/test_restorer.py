"""The streaming restorer puts the values back, holding a split placeholder until complete."""

from __future__ import annotations

import pytest

from cortex_workers.privacy import Restorer, restore_text, restore_value

MAPPING = {"[EMAIL_1]": "ann@example.com", "[CARD_1]": "4111 1111 1111 1111"}


def _stream(chunks: list[str]) -> tuple[list[str], str]:
    restorer = Restorer(MAPPING)
    shown = [restorer.feed(c) for c in chunks]
    return shown, "".join(shown) + restorer.flush()


@pytest.mark.parametrize(
    "chunks",
    [
        ["mail [EMAIL_1] now"],
        ["mail [", "EMAIL_1] now"],
        ["mail [EM", "AIL", "_1", "] now"],
        ["mail [EMAIL_1", "] now"],
        ["m", "a", "i", "l", " ", "[", "E", "M", "A", "I", "L", "_", "1", "]", " now"],
    ],
)
def test_a_placeholder_split_across_tokens_is_restored_whole(chunks: list[str]) -> None:
    shown, whole = _stream(chunks)
    assert whole == "mail ann@example.com now"
    assert not any("[" in s or "EMAIL" in s for s in shown), shown


def test_text_before_a_partial_placeholder_is_not_held_back() -> None:
    restorer = Restorer(MAPPING)
    assert restorer.feed("pay with [CA") == "pay with "
    assert restorer.feed("RD_1] today") == "4111 1111 1111 1111 today"


def test_brackets_that_are_no_placeholder_pass_through() -> None:
    shown, whole = _stream(["a list [1, 2] and [x", "] and [UNKNOWN_9] end ["])
    assert whole == "a list [1, 2] and [x] and [UNKNOWN_9] end ["


def test_an_unfinished_placeholder_at_the_end_is_flushed_as_is() -> None:
    restorer = Restorer(MAPPING)
    assert restorer.feed("dangling [EMAIL_") == "dangling "
    assert restorer.flush() == "[EMAIL_"


def test_without_a_mapping_everything_passes_at_once() -> None:
    restorer = Restorer({})
    assert restorer.feed("[EM") == "[EM"


def test_whole_texts_and_tool_arguments() -> None:
    assert (
        restore_text("to [EMAIL_1], [CARD_1]", MAPPING) == "to ann@example.com, 4111 1111 1111 1111"
    )
    args = {"to": ["[EMAIL_1]"], "n": 1, "note": "card [CARD_1]"}
    assert restore_value(args, MAPPING) == {
        "to": ["ann@example.com"],
        "n": 1,
        "note": "card 4111 1111 1111 1111",
    }
