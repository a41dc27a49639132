"""Redaction on hostile text: every pattern runs with a timeout inside the matching, the
patterns that were quadratic are linear, and a timeout fails closed (nothing is sent).

Bounded work is shown by outcome, not by a stopwatch: a redaction of the hostile inputs of the
security review (200,000 characters each) completes within a deadline that linear work meets
however busy the machine (30 s; each takes under 0.1 s on an idle one) and quadratic work on
that size does not (minutes), and a deadline that has already run out makes every detector raise
before it can match."""

from __future__ import annotations

from dataclasses import replace

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex_workers.privacy import PrivacyPolicy, RedactionFailed, pii, redact_text, secrets
from cortex_workers.privacy.values import Deadline

ALL = PrivacyPolicy(redact_secrets=True, redact_pii=True)
LINEAR_S = 30.0
"""Met by linear work on `LIMIT` characters on a loaded machine; not by quadratic work."""
LIMIT = 200_000
"""The largest turn content a tenant may post."""

HOSTILE = {
    "npm token": "/" * LIMIT,
    "jwt": "eyJ" * (LIMIT // 3),
    "e-mail": "%" * LIMIT,
    "openai key": "sk-" * (LIMIT // 3),
    "private key": "-----BEGIN PRIVATE KEY-----" * (LIMIT // 27),
    "slack tokens": "xoxb-1-" * (LIMIT // 7),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_review_s_hostile_inputs_are_redacted_in_linear_time(name: str) -> None:
    policy = replace(ALL, timeout_s=LINEAR_S)
    redacted = redact_text(HOSTILE[name], policy)  # raises RedactionFailed past the deadline
    assert len(redacted.text) > 0


def test_a_deadline_that_ran_out_stops_every_built_in_pattern_before_it_matches() -> None:
    spent = Deadline.after(-1.0)
    for findings in (
        secrets.secret_findings("sk-" + "a" * 40, deadline=spent),
        pii.pii_findings("ann@example.com", deadline=spent),
    ):
        with pytest.raises(RedactionFailed):
            list(findings)


def test_a_match_that_runs_past_the_deadline_raises_inside_the_matching() -> None:
    catastrophic = regex.compile(r"(a|aa)+$")
    with pytest.raises(RedactionFailed):
        list(Deadline.after(0.05).finditer(catastrophic, "a" * 80 + "b"))


def test_a_timeout_fails_closed_and_never_quotes_the_text() -> None:
    policy = PrivacyPolicy(redact_pii=True, patterns={"slow": r"(a|aa)+$"}, timeout_s=0.05)
    with pytest.raises(RedactionFailed) as caught:
        redact_text("mail ann@example.com " + "a" * 80 + "b", policy)
    assert caught.value.code == "redaction_failed"
    assert "ann@" not in caught.value.message


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("//registry.npmjs.org/:_authToken=npm_" + "A1b2C3d4" * 5, "npm_A1b2C3d4"),
        ("mail jane.doe+x@example.co.uk now", "jane.doe+x@example.co.uk"),
        ("key sk-proj-" + "Ab1" * 10 + " ok", "sk-proj-Ab1"),
    ],
)
def test_the_linear_patterns_still_find_what_the_old_ones_did(text: str, secret: str) -> None:
    redacted = redact_text(text, ALL)
    assert secret not in redacted.text and redacted.counts


# Fragments the patterns anchor on: a fuzzer that glues them together reaches the shapes
# that make a backtracking pattern slow far more often than random text would.
FRAGMENTS = [
    "/",
    ":_authToken=",
    "npm_",
    "eyJ",
    ".",
    "%",
    "@",
    "a",
    "sk-",
    "T3BlbkFJ",
    "xoxb-",
    "1-",
    "-----BEGIN PRIVATE KEY-----",
    "-----",
    "password",
    "=",
    " ",
    "1",
    "+",
    "(",
    ":",
    "AKC",
    "ghp_",
    "pypi-AgEIcHlwaS5vcmc",
    "\n",
    '"',
    "GB82",
    "::",
    "0.",
]

SECRETS_THAT_MUST_GO = [
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1B2" * 9,
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "sk-ant-api03-" + "Q" * 30,
    "xoxb-1234-5678-abcdefgh",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=40),
    repeat=st.integers(min_value=1, max_value=2_000),
    secret=st.sampled_from(SECRETS_THAT_MUST_GO),
)
def test_fuzz_redaction_is_bounded_per_size_and_no_configured_secret_survives(
    parts: list[str], repeat: int, secret: str
) -> None:
    hostile = ("".join(parts) * repeat)[:60_000]
    # the time bound per input size, enforced inside the matching: linear, and some hundred
    # times what linear work takes on an idle machine (~20 ms at 60,000 characters), so that a
    # busy machine meets it and quadratic work (tens of seconds at that size) does not
    budget = PrivacyPolicy(
        redact_secrets=True, redact_pii=True, timeout_s=2.0 + len(hostile) / 10_000
    )
    redacted = redact_text(f"{hostile} {secret} {hostile[:100]}", budget)
    assert secret not in redacted.text
