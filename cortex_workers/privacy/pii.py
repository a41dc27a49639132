"""PII detectors: emails, phone numbers (`phonenumbers`), card numbers (Luhn), IBANs (mod 97),
IP addresses, US social security numbers."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

import phonenumbers

from ..vocabulary import RedactionKind
from .values import Finding

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")


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


def email_findings(text: str) -> Iterator[Finding]:
    for match in EMAIL.finditer(text):
        yield Finding(RedactionKind.EMAIL, *match.span())


def card_findings(text: str) -> Iterator[Finding]:
    for match in CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            yield Finding(RedactionKind.CARD, *match.span())


def iban_findings(text: str) -> Iterator[Finding]:
    for match in IBAN.finditer(text):
        if iban_valid(match.group()):
            yield Finding(RedactionKind.IBAN, *match.span())


def ip_findings(text: str) -> Iterator[Finding]:
    for regex in (IPV4, IPV6):
        for match in regex.finditer(text):
            try:
                ipaddress.ip_address(match.group())
            except ValueError:
                continue
            yield Finding(RedactionKind.IP, *match.span())


def ssn_findings(text: str) -> Iterator[Finding]:
    for match in SSN.finditer(text):
        yield Finding(RedactionKind.SSN, *match.span())


def phone_findings(text: str, region: str) -> Iterator[Finding]:
    """Valid numbers only; `region` reads numbers written without a country code."""
    for match in phonenumbers.PhoneNumberMatcher(text, region, phonenumbers.Leniency.VALID):
        yield Finding(RedactionKind.PHONE, match.start, match.end)


def pii_findings(text: str, region: str = "US") -> Iterator[Finding]:
    """In order of precedence (an earlier finding wins an overlap)."""
    yield from email_findings(text)
    yield from card_findings(text)
    yield from iban_findings(text)
    yield from ssn_findings(text)
    yield from ip_findings(text)
    yield from phone_findings(text, region)
