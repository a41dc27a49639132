"""A fake OpenAI Chat Completions server (also Azure OpenAI's deployment routes).

Speaks the streaming wire protocol as the real APIs do:

- `POST /v1/chat/completions` with `Authorization: Bearer KEY`;
- `POST /openai/deployments/{deployment}/chat/completions?api-version=...` with `api-key: KEY`
  (Azure also sends a first chunk with `choices: []` and `prompt_filter_results`).

A stream is `data: {chat.completion.chunk}` events: a role delta, text in several `content`
deltas, tool calls (first delta per call carries index, id, type, name and empty arguments;
later deltas carry argument fragments; parallel calls are interleaved by index), a chunk with
the `finish_reason`, then, with `stream_options.include_usage`, a chunk with `choices: []` and
`usage`, then `data: [DONE]`. Errors are `{"error": {"message", "type", "param", "code"}}`.
Requests are validated like the real API does (model, messages, tool-call pairing); requests
without `stream: true` are answered 400 (this fake only streams).
"""

from __future__ import annotations

import json
import re
import secrets
import string
import time
from collections.abc import Iterator
from typing import Any

from .sse_server import DROP, Frame, RecordedRequest, Reply, SseServer, message_text, sse

_DEPLOYMENT_PATH = re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions$")
_PIECE = re.compile(r"\S+\s*|\s+")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    408: "timeout",
    409: "conflict",
    429: "requests",
}
_DEFAULT_MESSAGES = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "You are not allowed to sample from this model.",
    404: "The model does not exist or you do not have access to it.",
    408: "Request timed out.",
    409: "Conflict.",
    429: "Rate limit reached for requests.",
    500: "The server had an error while processing your request. Sorry about that!",
    502: "Bad gateway.",
    503: "The engine is currently overloaded, please try again later.",
}
_MISSING_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with "
    "blank username) if you're accessing the API from your browser and are prompted for a "
    "username. You can obtain an API key from https://platform.openai.com/account/api-keys."
)
_AZURE_ACCESS_DENIED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
    "valid key for an active subscription and use a correct regional API endpoint for your "
    "resource."
)


def _random_id(prefix: str, length: int = 24) -> str:
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def split_text(text: str, size: int = 6) -> list[str]:
    """Text as streamed deltas: words with their trailing spaces, long ones cut into pieces."""
    pieces: list[str] = []
    for word in _PIECE.findall(text):
        pieces.extend(word[i : i + size] for i in range(0, len(word), size))
    return pieces


def split_arguments(arguments: str, size: int = 5) -> list[str]:
    """Argument JSON in fragments, as models stream it."""
    return [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]


class FakeOpenAI(SseServer):
    """OpenAI's (and Azure OpenAI's) Chat Completions, streamed, with scripted scenarios.

    `api_key`: when set, only this key is accepted; otherwise any non-empty key is.
    """

    name = "fake-openai"

    def __init__(self, *, api_key: str | None = None) -> None:
        super().__init__()
        self.api_key = api_key

    # routing, auth and validation ----------------------------------------------------------

    def respond(self, request: RecordedRequest, reply: Reply) -> None:
        azure = _DEPLOYMENT_PATH.match(request.path)
        if request.method != "POST" or not (azure or request.path == "/v1/chat/completions"):
            reply.json(404, self._error(f"Invalid URL ({request.method} {request.path})", 404))
            return
        if azure:
            if not request.query.get("api-version"):
                reply.json(404, {"error": {"code": "404", "message": "Resource not found"}})
                return
            key = request.headers.get("api-key", "")
            if not key or (self.api_key is not None and key != self.api_key):
                reply.json(401, {"error": {"code": "401", "message": _AZURE_ACCESS_DENIED}})
                return
        else:
            auth = request.headers.get("authorization", "")
            key = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
            if not key:
                reply.json(401, self._error(_MISSING_KEY, 401))
                return
            if self.api_key is not None and key != self.api_key:
                reply.json(401, self._error(_DEFAULT_MESSAGES[401], 401, code="invalid_api_key"))
                return
        problem = self.validate(request.body, azure=azure is not None)
        if problem is not None:
            reply.json(400, self._error(problem, 400))
            return
        self.serve(request, reply, self.next_response(request))

    @staticmethod
    def validate(body: Any, *, azure: bool) -> str | None:
        """What the real API would reject this request for, or None."""
        if not isinstance(body, dict):
            return "We could not parse the JSON body of your request."
        if not azure and not body.get("model"):
            return "you must provide a model parameter"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "[] is too short - 'messages'"
        if body.get("stream") is not True:
            return "FakeOpenAI only streams: set stream=true"
        pending: set[str] = set()
        for i, m in enumerate(messages):
            role = m.get("role") if isinstance(m, dict) else None
            if role not in ("system", "developer", "user", "assistant", "tool"):
                return (
                    f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                    f"'user', 'tool', and 'developer'. (messages[{i}].role)"
                )
            if role == "tool":
                call_id = m.get("tool_call_id")
                if call_id not in pending:
                    return (
                        "Invalid parameter: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'."
                    )
                pending.discard(call_id)
                continue
            if pending:
                return (
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                    f"response messages: {', '.join(sorted(pending))}"
                )
            if role == "assistant":
                calls = m.get("tool_calls") or []
                if m.get("content") is None and not calls:
                    return (
                        f"Invalid value for 'content': expected a string, got null. "
                        f"(messages[{i}].content)"
                    )
                for call in calls:
                    fn = call.get("function") or {}
                    if call.get("type") != "function" or not isinstance(fn.get("arguments"), str):
                        return f"Invalid tool call in messages[{i}]"
                    pending.add(call.get("id"))
            elif not isinstance(m.get("content"), str | list):
                return f"Invalid type for 'messages[{i}].content'"
        for t in body.get("tools") or []:
            if t.get("type") != "function" or not (t.get("function") or {}).get("name"):
                return "Missing required parameter: 'tools[0].function.name'."
        return None

    # responses ---------------------------------------------------------------------------------

    @staticmethod
    def _error(
        message: str, status: int, *, type_: str | None = None, code: Any = None
    ) -> dict[str, Any]:
        kind = type_ or _ERROR_TYPES.get(status, "server_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def error_body(self, status: int, error: dict[str, Any]) -> Any:
        message = error.get("message") or _DEFAULT_MESSAGES.get(status, f"Error {status}")
        return self._error(message, status, type_=error.get("type"), code=error.get("code"))

    def stream_frames(self, request: RecordedRequest, response: dict[str, Any]) -> Iterator[Frame]:
        body = request.body
        azure = bool(_DEPLOYMENT_PATH.match(request.path))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base: dict[str, Any] = {
            "id": _random_id("chatcmpl-", 29),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model") or "gpt-4o-2024-08-06",
            "service_tier": "default",
            "system_fingerprint": "fp_fake0001",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice: dict[str, Any] = {
                "index": 0,
                "delta": delta,
                "logprobs": None,
                "finish_reason": finish,
            }
            if azure:
                choice["content_filter_results"] = {}
            out = {**base, "choices": [choice]}
            if include_usage:
                out["usage"] = None
            out["obfuscation"] = secrets.token_hex(3)
            return sse(out)

        if azure:
            yield sse(
                {
                    "choices": [],
                    "created": 0,
                    "id": "",
                    "model": "",
                    "object": "",
                    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
                }
            )
        text = str(response.get("text") or "")
        calls = list(response.get("tool_calls") or [])
        pieces = split_text(text)
        broken = response.get("error_mid_stream") or response.get("drop_mid_stream")
        if broken:
            pieces = pieces[: max(1, len(pieces) // 2)] or ["…"]
            calls = []
        if pieces or not calls:
            yield chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in pieces:
            yield chunk({"content": piece})
        if response.get("error_mid_stream"):
            error = response.get("error") or {}
            yield sse(
                {
                    "error": {
                        "message": error.get("message")
                        or "The server had an error while processing "
                        "your request. Sorry about that!",
                        "type": error.get("type") or "server_error",
                        "param": None,
                        "code": error.get("code"),
                    }
                }
            )
            return
        if response.get("drop_mid_stream"):
            yield DROP
            return
        yield from self._tool_call_chunks(calls, chunk, first=not pieces)
        finish = response.get("finish_reason") or ("tool_calls" if calls else "stop")
        yield chunk({}, finish)
        if include_usage:
            usage = response.get("usage") or {}
            prompt = int(usage.get("input", self._prompt_words(body)))
            output = int(usage.get("output", len(pieces) + 8 * len(calls)))
            yield sse(
                {
                    **base,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": output,
                        "total_tokens": prompt + output,
                        "prompt_tokens_details": {
                            "cached_tokens": int(usage.get("cached", 0)),
                            "audio_tokens": 0,
                        },
                        "completion_tokens_details": {
                            "reasoning_tokens": 0,
                            "audio_tokens": 0,
                            "accepted_prediction_tokens": 0,
                            "rejected_prediction_tokens": 0,
                        },
                    },
                    "obfuscation": secrets.token_hex(3),
                }
            )
        yield sse("[DONE]")

    @staticmethod
    def _tool_call_chunks(
        calls: list[dict[str, Any]], chunk: Any, *, first: bool
    ) -> Iterator[bytes]:
        """Each call's opening delta and argument fragments, interleaved across calls."""
        per_call: list[list[dict[str, Any]]] = []
        for index, call in enumerate(calls):
            arguments = call.get("arguments", {})
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            opening = {
                "index": index,
                "id": call.get("id") or _random_id("call_"),
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }
            fragments = [
                {"index": index, "function": {"arguments": f}} for f in split_arguments(raw) if f
            ]
            per_call.append([opening, *fragments])
        step = 0
        while any(per_call):
            for deltas in per_call:
                if not deltas:
                    continue
                delta: dict[str, Any] = {"tool_calls": [deltas.pop(0)]}
                if first and step == 0:
                    delta = {"role": "assistant", "content": None, **delta, "refusal": None}
                yield chunk(delta)
                step += 1

    @staticmethod
    def _prompt_words(body: dict[str, Any]) -> int:
        return sum(
            len(message_text(m.get("content")).split()) + 4
            for m in body.get("messages") or []
            if isinstance(m, dict)
        )
