"""PII detectors: emails, phone numbers (`phonenumbers`), card numbers (Luhn), IBANs (mod 97),
IP addresses, US social security numbers.

Every pattern runs on the `regex` module with what is left of the redaction's deadline as its
`timeout` (`Deadline.finditer`). No pattern may start inside a run of its own characters (the
e-mail's local part on `%%%…` was quadratic)."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterator

import phonenumbers
import regex

from ..vocabulary import RedactionKind
from .values import Deadline, Finding

EMAIL = regex.compile(
    r"(?<![\w.%+-])[A-Za-z0-9._%+-]++@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
)
CARD = regex.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
IBAN = regex.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
IPV4 = regex.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
IPV6 = regex.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
PHONE_CANDIDATE = regex.compile(r"(?<![\w+])\+?\(?\d[\d \t().-]{5,22}\d(?!\d)")
"""Where a phone number may be: a bounded run of digits and separators, handed to
`phonenumbers` one at a time (its matcher runs on plain `re`, without a timeout)."""
SSN = regex.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a card number (digits only)."""
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = int(char)
        if i % 2 == 1:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """ISO 13616: the country code and check digits moved to the end, mod 97 == 1."""
    iban = text.replace(" ", "").upper()
    if not 15 <= len(iban) <= 34 or not iban.isalnum():
        return False
    moved = iban[4:] + iban[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


def email_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    for match in deadline.finditer(EMAIL, text):
        yield Finding(RedactionKind.EMAIL, *match.span())


def card_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    for match in deadline.finditer(CARD, text):
        digits = "".join(c for c in match.group() if c.isdigit())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            yield Finding(RedactionKind.CARD, *match.span())


def iban_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    for match in deadline.finditer(IBAN, text):
        if iban_valid(match.group()):
            yield Finding(RedactionKind.IBAN, *match.span())


def ip_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    """Valid addresses other than the unspecified one (`0.0.0.0`, `::`): that names no host,
    and `::` is also what is left between two redacted values written `a::b`."""
    for pattern in (IPV4, IPV6):
        for match in deadline.finditer(pattern, text):
            try:
                address = ipaddress.ip_address(match.group())
            except ValueError:
                continue
            if not address.is_unspecified:
                yield Finding(RedactionKind.IP, *match.span())


def ssn_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    for match in deadline.finditer(SSN, text):
        yield Finding(RedactionKind.SSN, *match.span())


def phone_findings(text: str, region: str, deadline: Deadline) -> Iterator[Finding]:
    """Valid numbers only; `region` reads numbers written without a country code. Each
    candidate is at most 25 characters, and the deadline is checked between them."""
    for candidate in deadline.finditer(PHONE_CANDIDATE, text):
        deadline.remaining()
        at = candidate.start()
        for start, end in _phones_in(candidate.group(), region):
            yield Finding(RedactionKind.PHONE, at + start, at + end)


@functools.lru_cache(maxsize=4096)
def _phones_in(part: str, region: str) -> tuple[tuple[int, int], ...]:
    matcher = phonenumbers.PhoneNumberMatcher(part, region, phonenumbers.Leniency.VALID)
    return tuple((match.start, match.end) for match in matcher)


def pii_findings(
    text: str, region: str = "US", *, deadline: Deadline | None = None
) -> Iterator[Finding]:
    """In order of precedence (an earlier finding wins an overlap). Raises `RedactionFailed`
    when a pattern runs past `deadline` (default: 2 s)."""
    deadline = deadline or Deadline.after(2.0)
    yield from email_findings(text, deadline)
    yield from card_findings(text, deadline)
    yield from iban_findings(text, deadline)
    yield from ssn_findings(text, deadline)
    yield from ip_findings(text, deadline)
    yield from phone_findings(text, region, deadline)
