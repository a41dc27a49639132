"""Privacy: secrets and PII replaced by placeholders before a call to a non-local provider,
and put back into the answer (docs/cost-and-privacy.md).

Public API:
- `PrivacyPolicy`: what to redact (`[llm.privacy]`).
- `redact_messages(messages, policy) -> Redacted` / `redact_text(text, policy) -> Redacted`:
  `Redacted.messages`, `.text`, `.counts` (kind -> count), `.restore` (placeholder -> value);
  `redact_value(value, policy) -> RedactedValue` for the strings inside a JSON-like value.
  Raises `RedactionFailed` (code `redaction_failed`) on any failure or timeout: send nothing.
- `Restorer(mapping)`: `.feed(delta) -> str`, `.flush() -> str` for a streamed answer;
  `restore_text`, `restore_value` for whole texts and tool call arguments.
"""

from .redactor import redact_messages, redact_text, redact_value
from .restore import Restorer, restore_text, restore_value
from .values import (
    REDACTION_FAILED,
    Finding,
    PrivacyPolicy,
    Redacted,
    RedactedValue,
    RedactionFailed,
)

__all__ = [
    "REDACTION_FAILED",
    "Finding",
    "PrivacyPolicy",
    "Redacted",
    "RedactedValue",
    "RedactionFailed",
    "Restorer",
    "redact_messages",
    "redact_text",
    "redact_value",
    "restore_text",
    "restore_value",
]
