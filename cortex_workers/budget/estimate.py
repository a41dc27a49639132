"""The cost of a model call before it is made: its maximum (what a reservation holds) and a
rough expectation (what a dry run shows next to it).

The maximum bounds the input by the request's size: a token is never shorter than one byte of
UTF-8 in the tokenizers providers bill by, so the request's bytes (plus a few tokens of framing
per message and tool) bound its input tokens from above. The output is bounded by `max_tokens`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..messages import ModelRequest
from .money import call_cost_micros

FRAMING_TOKENS = 8
"""Tokens a provider adds around each message or tool (role markers, separators), at most."""
CHARS_PER_TOKEN = 4
"""The usual length of a token in English text: the expected (not the maximum) input size."""
EXPECTED_OUTPUT_SHARE = 4
"""The expectation assumes an answer of a quarter of `max_tokens`."""
IMAGE_TOKENS = 1_600
"""Input tokens one image may cost, at most, at the providers we speak to (Anthropic bills
about 1,600 for an image at its largest size; OpenAI's high detail less)."""


def image_count(request: ModelRequest) -> int:
    return sum(len(m.images) for m in request.messages)


@dataclass(frozen=True, slots=True)
class CallEstimate:
    """What one model call may cost, in tokens and micro-dollars."""

    input_tokens: int
    """The upper bound of the input tokens (from the request's size)."""
    max_output_tokens: int
    expected_input_tokens: int
    cost_micros_max: int
    """What a reservation holds: the input bound and `max_output_tokens` at list price."""
    cost_micros_expected: int


def request_bytes(request: ModelRequest) -> int:
    """The UTF-8 size of everything the request sends the model."""
    size = 0
    for message in request.messages:
        size += len(message.content.encode())
        for call in message.tool_calls:
            size += len(call.name.encode()) + len(json.dumps(call.arguments).encode())
    for tool in request.tools:
        size += len(tool.name.encode()) + len(tool.description.encode())
        size += len(json.dumps(tool.parameters).encode())
    return size


def estimate_call(
    request: ModelRequest, *, input_per_mtok: float, output_per_mtok: float, max_tokens: int
) -> CallEstimate:
    """The maximum and expected cost of sending `request` at these prices (USD per million
    tokens) with an output limit of `max_tokens` (the request's own `max_tokens` wins)."""
    output = request.max_tokens or max_tokens
    size = request_bytes(request)
    framing = FRAMING_TOKENS * (len(request.messages) + len(request.tools) + 1)
    images = IMAGE_TOKENS * image_count(request)
    bound = size + framing + images
    expected_input = size // CHARS_PER_TOKEN + framing + images
    expected_output = max(1, output // EXPECTED_OUTPUT_SHARE)
    prices = {"input_per_mtok": input_per_mtok, "output_per_mtok": output_per_mtok}
    return CallEstimate(
        input_tokens=bound,
        max_output_tokens=output,
        expected_input_tokens=expected_input,
        cost_micros_max=call_cost_micros(bound, output, **prices),
        cost_micros_expected=call_cost_micros(expected_input, expected_output, **prices),
    )
