"""Each detector on its own: what it finds, and the near misses it leaves alone."""

from __future__ import annotations

import base64
import json

import pytest

from cortex_workers.messages import Message, ToolCall
from cortex_workers.privacy import PrivacyPolicy, RedactionFailed, redact_messages, redact_text
from cortex_workers.privacy.pii import iban_valid, luhn_valid

PII = PrivacyPolicy(redact_secrets=False, redact_pii=True)
SECRETS = PrivacyPolicy(redact_secrets=True, redact_pii=False)


def _jwt() -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': '42'})}.c2lnbmF0dXJlLXh5eg"


@pytest.mark.parametrize(
    ("number", "valid"),
    [
        ("4111111111111111", True),
        ("4111111111111112", False),
        ("5555555555554444", True),
        ("378282246310005", True),
        ("378282246310006", False),
    ],
)
def test_luhn(number: str, valid: bool) -> None:
    assert luhn_valid(number) is valid


@pytest.mark.parametrize(
    ("iban", "valid"),
    [
        ("GB82 WEST 1234 5698 7654 32", True),
        ("DE89370400440532013000", True),
        ("FR1420041010050500013M02606", True),
        ("GB82 WEST 1234 5698 7654 33", False),
        ("DE89370400440532013001", False),
    ],
)
def test_iban_checksum(iban: str, valid: bool) -> None:
    assert iban_valid(iban) is valid


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("mail jane.doe+x@example.co.uk now", "email"),
        ("card 4111 1111 1111 1111 ok", "card"),
        ("card 5555-5555-5555-4444 ok", "card"),
        ("iban GB82 WEST 1234 5698 7654 32 ok", "iban"),
        ("from 192.168.1.20 today", "ip"),
        ("v6 2001:db8::8a2e:370:7334 here", "ip"),
        ("loopback ::1 here", "ip"),
        ("ssn 123-45-6789 here", "ssn"),
        ("call +1 415 555 2671 soon", "phone"),
        ("call (415) 555-2671 soon", "phone"),
        ("appelle +33 6 12 34 56 78 vite", "phone"),
    ],
)
def test_each_pii_detector_finds_its_kind(text: str, kind: str) -> None:
    redacted = redact_text(text, PII)
    assert redacted.counts == {kind: 1}, redacted.text
    placeholder = f"[{kind.upper()}_1]"
    assert placeholder in redacted.text
    assert redacted.restore[placeholder] in text


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112 (fails Luhn)",
        "iban GB82 WEST 1234 5698 7654 33 (bad checksum)",
        "version 1.2.3.4567 and 999.1.1.1",
        "ssn 000-12-3456 is never issued",
        "call 555 0000",
        "a uuid 1b4e28ba-2fa1-11d2-883f-0016d3cca427",
        "listen on 0.0.0.0 or on ::",
    ],
)
def test_near_misses_are_left_alone(text: str) -> None:
    redacted = redact_text(text, PII)
    assert redacted.counts == {} and redacted.text == text


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("token " + _jwt() + " end", "jwt"),
        ("AKIAIOSFODNN7EXAMPLE is the id", "cloud_token"),
        ("ghp_" + "a1B2" * 9 + " in the script", "vcs_token"),
        ("glpat-" + "x1Y2z3" * 4 + " for gitlab", "vcs_token"),
        ("password=hunter2hunter", "password"),
        ('api_key: "zq8Yt5pLm2"', "password"),
        ("use sk-ant-api03-" + "Q" * 30 + " please", "api_token"),
        ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc" + " stripe", "api_token"),
    ],
)
def test_each_secret_detector_finds_its_kind(text: str, kind: str) -> None:
    redacted = redact_text(text, SECRETS)
    assert redacted.counts == {kind: 1}, redacted.text
    assert f"[{kind.upper()}_1]" in redacted.text


def test_a_whole_private_key_block_is_one_secret() -> None:
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 64 + "\n-----END RSA PRIVATE KEY-----"
    redacted = redact_text(f"here:\n{key}\nthanks", SECRETS)
    assert redacted.counts == {"private_key": 1}
    assert "MIIEow" not in redacted.text and "PRIVATE KEY" not in redacted.text


def test_the_configured_provider_keys_are_always_secrets() -> None:
    policy = PrivacyPolicy(known_secrets=("my-key-1234567",))
    redacted = redact_text("the key my-key-1234567, again my-key-1234567", policy)
    assert redacted.text == "the key [PROVIDER_KEY_1], again [PROVIDER_KEY_1]"
    assert redacted.counts == {"provider_key": 2}


def test_secrets_only_by_default_pii_stays() -> None:
    redacted = redact_text("bob@example.com password=hunter2hunter", PrivacyPolicy())
    assert redacted.text == "bob@example.com password=[PASSWORD_1]"


def test_operator_patterns_name_their_kind() -> None:
    policy = PrivacyPolicy(redact_secrets=False, patterns={"ticket": r"TCK-\d{6}"})
    redacted = redact_text("see TCK-123456 and TCK-654321, TCK-123456", policy)
    assert redacted.text == "see [TICKET_1] and [TICKET_2], [TICKET_1]"
    assert redacted.counts == {"ticket": 3}


def test_placeholders_are_consistent_across_the_messages_and_tool_arguments() -> None:
    messages = [
        Message(role="user", content="write to ann@example.com"),
        Message(
            role="assistant",
            content="",
            tool_calls=(ToolCall("c1", "send", {"to": ["ann@example.com"], "n": 1}),),
        ),
        Message(role="user", content="and bob@example.com, then ann@example.com"),
    ]
    redacted = redact_messages(messages, PII)
    assert redacted.messages[0].content == "write to [EMAIL_1]"
    assert redacted.messages[1].tool_calls[0].arguments == {"to": ["[EMAIL_1]"], "n": 1}
    assert redacted.messages[2].content == "and [EMAIL_2], then [EMAIL_1]"
    assert redacted.restore == {"[EMAIL_1]": "ann@example.com", "[EMAIL_2]": "bob@example.com"}


def test_a_pattern_that_does_not_compile_fails_closed() -> None:
    policy = PrivacyPolicy(patterns={"broken": "(unclosed"})
    with pytest.raises(RedactionFailed) as caught:
        redact_text("anything", policy)
    assert caught.value.code == "redaction_failed"


def test_a_pattern_running_past_the_timeout_fails_closed_without_the_value() -> None:
    policy = PrivacyPolicy(patterns={"slow": r"(a|aa)+$"}, timeout_s=0.2)
    secret = "card 4111111111111111 " + "a" * 60 + "b"
    with pytest.raises(RedactionFailed) as caught:
        redact_text(secret, policy)
    assert caught.value.code == "redaction_failed"
    assert "4111" not in caught.value.message and "aaaa" not in caught.value.message


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        # `[A]::[B]`: the `::` between two placeholders is no address
        ("sk-::" + "sk-proj-pypi-AgEIcHlwaS5vcmc::" * 3 + " end", {"api_token": 3}),
        # the tokens inside `password=` go first; what is left of the value is then a password
        ("x -password=(xoxb-1-password=(xoxb-1-password=(xoxb-1 end", {"password": 1}),
        # an e-mail preceded by a word character is none, until a placeholder precedes it
        ("@eyJ.ghp_eyJ.@eyJ.ghp_eyJ.@eyJ.ghp key", {"email": 2}),
    ],
)
def test_a_redacted_text_redacted_again_finds_nothing(text: str, counts: dict[str, int]) -> None:
    policy = PrivacyPolicy(redact_secrets=True, redact_pii=True)
    redacted = redact_text(text, policy)
    assert redacted.counts == counts, redacted.text
    again = redact_text(redacted.text, policy)
    assert again.counts == {} and again.text == redacted.text
    restored = redacted.text
    for placeholder, value in redacted.restore.items():
        restored = restored.replace(placeholder, value)
    assert restored == text


def test_an_operator_pattern_matching_placeholders_settles_at_once() -> None:
    """A second scan that finds only what is inside placeholders adds nothing."""
    policy = PrivacyPolicy(redact_secrets=False, redact_pii=True, patterns={"caps": r"[A-Z]+_\d"})
    redacted = redact_text("mail bob@example.com now", policy)
    assert redacted.text == "mail [EMAIL_1] now" and redacted.counts == {"email": 1}


def test_a_text_that_does_not_settle_is_not_sent() -> None:
    """Each scan finds something new next to the last placeholder: the redaction fails closed."""
    policy = PrivacyPolicy(redact_secrets=False, patterns={"next": r"(?<=\])x|^x"})
    with pytest.raises(RedactionFailed, match="still changed after 4 scans"):
        redact_text("xxxxxx", policy)
