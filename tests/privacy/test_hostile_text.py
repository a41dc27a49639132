"""Redaction on hostile text: every pattern runs with a timeout inside the matching, the
patterns that were quadratic are linear, and a timeout fails closed (nothing is sent).

The hostile inputs of the security review (200,000 characters each) are redacted within the
time bound per input size of `privacy_support.bound_s` (CPU time: 2.5 s at that size; linear
work takes under 0.1 s on an idle machine, the old patterns 14 s to minutes), and a deadline
that has already run out makes every detector raise before it can match. The fuzz test of the
same shapes is tests/privacy/test_redaction_fuzz.py."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import regex
from privacy_support import bound_s

from cortex_workers.api.turn_content import MAX_TEXT
from cortex_workers.privacy import PrivacyPolicy, RedactionFailed, pii, redact_text, secrets
from cortex_workers.privacy.values import Deadline

ALL = PrivacyPolicy(redact_secrets=True, redact_pii=True)
BACKSTOP_S = 120.0
"""The redaction's own deadline here: the bound asserted is `bound_s`, on CPU time."""
LIMIT = MAX_TEXT
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
    policy = replace(ALL, timeout_s=BACKSTOP_S)
    started = time.thread_time()
    redacted = redact_text(HOSTILE[name], policy)  # raises RedactionFailed past the deadline
    spent = time.thread_time() - started
    assert spent <= bound_s(len(HOSTILE[name])), f"{spent:.2f} s of CPU"
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
