"""The one duration grammar and `${NAME}` substitution, shared by the settings and the plugin
manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex_workers.settings import (
    Settings,
    env_references,
    parse_duration,
    reset_settings,
    substitute_env,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("10s", 10.0),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
        (" 60 s ", 60.0),
        ("45", 45.0),
        ("2.5", 2.5),
        (".5s", 0.5),
    ],
)
def test_a_duration_is_a_number_of_seconds_or_numbers_with_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["soon", "", "s", "-1", "1e3", "inf", "1.2.3", "10s5", "2 days"])
def test_anything_else_is_not_a_duration_and_the_error_says_what_to_write(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a duration: .* \(use e\.g\. 60s, 2m, 500ms\)"):
        parse_duration(text)


def test_env_references_are_replaced_and_an_unset_one_by_nothing() -> None:
    env = {"TOKEN": "t0k", "HOST": "h"}
    assert env_references("${TOKEN}@${HOST}:${PORT}") == ["TOKEN", "HOST", "PORT"]
    assert substitute_env("${TOKEN}@${HOST}:${PORT}", env) == "t0k@h:"
    assert substitute_env("$TOKEN ${ not a ref }", env) == "$TOKEN ${ not a ref }"


def test_the_settings_read_durations_from_the_config_file_with_env_substitution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "cortex.toml"
    config.write_text('[llm]\ncooldown = "1m30s"\nrate_limit_max_wait = "${WAIT}"\n')
    monkeypatch.setenv("CORTEX_CONFIG", str(config))
    for name in ("CORTEX_LLM_COOLDOWN_S", "CORTEX_LLM_RATE_WAIT_MAX_S"):  # the environment wins
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WAIT", "500ms")
    reset_settings()
    try:
        settings = Settings()
        assert settings.llm_cooldown_s == 90.0 and settings.llm_rate_wait_max_s == 0.5
        monkeypatch.setenv("CORTEX_LLM_COOLDOWN_S", "soon")
        with pytest.raises(ValueError, match="not a duration: 'soon'"):
            Settings()
    finally:
        reset_settings()
