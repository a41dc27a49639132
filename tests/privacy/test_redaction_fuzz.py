"""A fuzz test of the redactor (hypothesis, bounded) at the size limit of a turn's text: hostile
inputs built from the shapes that make a backtracking pattern slow (runs of each built-in
pattern's prefixes: `/` before npm's `:_authToken`, `eyJ` of JWTs, `%` of an e-mail's local
part, `sk-`, PEM headers, ...), each with secrets planted in it.

Two properties per input:

- the time bound per input size: the redaction's CPU time is at most `bound_s(len(text))`
  (0.5 s + 10 µs a character: 2.5 s at 200,000 characters). Linear work takes some
  milliseconds at that size; the old patterns took (CPU time) 80 s on `/` (npm's), 50 s on
  `sk-`, 21 s on `%` (the e-mail's), 7 s on `eyJ` (the JWT's). CPU time, not the wall clock,
  so that a busy machine does not
  fail it; the redaction's own deadline (`timeout_s`, enforced inside the matching) is only the
  backstop here, and a redaction that fails on it fails the test;
- no configured secret survives: no planted value is left in the redacted text, and a fresh
  scan of it (a second redaction with the same policy) finds nothing.
"""

from __future__ import annotations

import time

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from privacy_support import bound_s

from cortex_workers.api.turn_content import MAX_TEXT
from cortex_workers.privacy import PrivacyPolicy, redact_text

LIMIT = MAX_TEXT
"""The longest text a turn may carry: the hostile inputs are this long."""
PROVIDER_KEY = "sk-configured-provider-key-0123456789"
TICKET = "TKT-204817"
POLICY = PrivacyPolicy(
    redact_secrets=True,
    redact_pii=True,
    known_secrets=(PROVIDER_KEY,),
    patterns={"ticket": r"TKT-\d{6}"},
    timeout_s=120.0,  # the backstop only: the bound below is the assertion
)

# The prefixes each built-in pattern anchors on: a run of one of them (or of a few glued
# together) is where a backtracking pattern restarts at every position.
PREFIXES = [
    "/",
    "//",
    ":_authToken=",
    "npm_",
    "eyJ",
    "eyJ.",
    ".",
    "%",
    "%@",
    "a",
    "a.",
    "@",
    "+",
    "-",
    "sk-",
    "sk-proj-",
    "T3BlbkFJ",
    "xoxb-",
    "xoxb-1-",
    "1-",
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN ",
    "-----",
    "password",
    "password=",
    "api_key: ",
    "=",
    ":",
    "::",
    "0.",
    "1",
    "1 ",
    "(",
    "AKIA",
    "ghp_",
    "pypi-AgEIcHlwaS5vcmc",
    "GB82",
    "TKT-",
    " ",
    "\n",
    '"',
]
SECRETS = [
    PROVIDER_KEY,
    TICKET,
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1B2" * 9,
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "sk-ant-api03-" + "Q" * 30,
    "xoxb-1234-5678-abcdefgh",
    "ann.lee@example.com",
]


def hostile(unit: str, size: int, planted: list[str], at: float) -> str:
    """`size` characters: runs of `unit`, with the planted secrets (space-delimited) at `at`."""
    middle = " " + " ".join(planted) + " "
    room = max(0, size - len(middle))
    filler = (unit * (room // len(unit) + 1))[:room]
    cut = int(room * at)
    return filler[:cut] + middle + filler[cut:]


@settings(
    max_examples=12,
    deadline=None,  # the bound per input size below is the time assertion
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each run is 200,000 characters
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    parts=st.lists(st.sampled_from(PREFIXES), min_size=1, max_size=4),
    size=st.one_of(st.just(LIMIT), st.integers(min_value=1_000, max_value=LIMIT)),
    planted=st.lists(st.sampled_from(SECRETS), min_size=1, max_size=3, unique=True),
    at=st.floats(min_value=0.0, max_value=1.0),
)
@example(parts=["eyJ"], size=LIMIT, planted=[SECRETS[2]], at=0.5)  # the JWT's (14 s)
@example(parts=["%"], size=LIMIT, planted=[SECRETS[-1]], at=0.5)  # the e-mail's (40 s)
@example(parts=["/"], size=LIMIT, planted=[PROVIDER_KEY], at=0.5)  # npm's (minutes)
def test_redaction_of_hostile_text_is_bounded_per_size_and_leaves_no_secret(
    parts: list[str], size: int, planted: list[str], at: float
) -> None:
    text = hostile("".join(parts), size, planted, at)
    started = time.thread_time()
    redacted = redact_text(text, POLICY)  # RedactionFailed past the backstop fails the test
    spent = time.thread_time() - started
    assert spent <= bound_s(len(text)), (
        f"{spent:.2f} s of CPU for {len(text)} characters of {parts!r}"
    )
    assert [s for s in planted if s in redacted.text] == []
    again = redact_text(redacted.text, POLICY)
    assert again.counts == {}, again.counts
