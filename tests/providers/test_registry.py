"""Provider configuration, availability, model patterns, prices and fallback routes."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from support import free_port

from cortex_workers.providers import reachability
from cortex_workers.providers.registry import ConfigError, ProviderRegistry, Route
from cortex_workers.settings import Settings

ENV_NAMES = (
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "OPENAI_API_BASE",
    "AZURE_OPENAI_KEY",
    "AZURE_OPENAI_BASE_URL",
    "AZURE_OPENAI_DEPLOYMENT",
    "AZURE_OPENAI_API_VERSION",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_BASE_URL",
    "LLM_PROVIDER",
    "OLLAMA_BASE_URL",
    "OLLAMA_MODEL",
    "CORTEX_CONFIG",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    monkeypatch.setenv("CORTEX_CONFIG", str(empty))
    reachability.forget()


def registry(**values: Any) -> ProviderRegistry:
    return ProviderRegistry(Settings(**values))


def from_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> ProviderRegistry:
    path = tmp_path / "cortex.toml"
    path.write_text(text)
    monkeypatch.setenv("CORTEX_CONFIG", str(path))
    return ProviderRegistry(Settings())


def test_a_provider_without_its_secret_is_unavailable_with_the_reason() -> None:
    with socket.create_server(("127.0.0.1", 0)) as ollama:
        url = f"http://127.0.0.1:{ollama.getsockname()[1]}/v1"
        infos = {p.name: p for p in registry(ollama_base_url=url).describe()}
    assert infos["scripted"].available and infos["ollama"].available
    assert not infos["openai"].available and "OPENAI_API_KEY" in (infos["openai"].reason or "")
    assert "ANTHROPIC_API_KEY" in (infos["anthropic"].reason or "")
    assert "AZURE_OPENAI" in (infos["azure_openai"].reason or "")


def test_a_self_hosted_server_that_does_not_answer_is_unavailable_and_says_where() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    infos = {p.name: p for p in registry(ollama_base_url=url).describe()}
    assert not infos["ollama"].available
    assert f"no server answers at {url}" in (infos["ollama"].reason or "")
    assert infos["scripted"].available
    # remembered for a while: a second listing makes no new connection
    with socket.create_server(("127.0.0.1", int(url.split(":")[2].split("/")[0]))):
        again = {p.name: p for p in registry(ollama_base_url=url).describe()}
        assert not again["ollama"].available
        reachability.forget()
        fresh = {p.name: p for p in registry(ollama_base_url=url).describe()}
        assert fresh["ollama"].available


def test_the_listing_separates_model_names_from_catalog_patterns() -> None:
    infos = {p.name: p for p in registry().describe()}
    assert "llama3.1*" in infos["ollama"].model_patterns
    assert "gpt-*" in infos["openai"].model_patterns
    assert not [m for p in infos.values() for m in p.models if any(c in m for c in "*?[")]


def test_environment_variables_configure_the_builtin_providers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_MODEL", "gpt-4.1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8")
    for name, value in (
        ("AZURE_OPENAI_KEY", "az"),
        ("AZURE_OPENAI_BASE_URL", "http://az"),
        ("AZURE_OPENAI_DEPLOYMENT", "dep"),
        ("AZURE_OPENAI_API_VERSION", "2024-10-21"),
    ):
        monkeypatch.setenv(name, value)
    reg = ProviderRegistry(Settings())
    with socket.create_server(("127.0.0.1", 0)) as ollama:  # a self-hosted server answers
        monkeypatch.setenv("OLLAMA_BASE_URL", f"http://127.0.0.1:{ollama.getsockname()[1]}/v1")
        assert all(p.available for p in ProviderRegistry(Settings()).describe())
    openai = reg.configs["openai"]
    assert (openai.api_key, openai.base_url, openai.model) == (
        "sk-test",
        "http://127.0.0.1:9/v1",
        "gpt-4.1",
    )
    assert reg.configs["anthropic"].base_url == "http://127.0.0.1:8"
    azure = reg.configs["azure_openai"]
    assert (azure.model, azure.api_version) == ("dep", "2024-10-21")


def test_secrets_never_appear_in_the_settings_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    assert "sk-very-secret" not in repr(Settings())


def test_the_llm_tables_of_the_config_file_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_VLLM_KEY", "k-123")
    reg = from_toml(
        tmp_path,
        monkeypatch,
        """
[llm]
default_provider = "vllm"
fallback_providers = ["ollama"]

[llm.providers.vllm]
kind = "openai"
api_key = "${MY_VLLM_KEY}"
base_url = "http://127.0.0.1:8001/v1"
model = "qwen2.5-7b"
timeout = "90s"
max_tokens = 1024

[llm.providers.ollama]
endpoint = "http://127.0.0.1:11500/v1"
model = "llama3.1:8b"
timeout = "2m"

[llm.rate_limits.vllm]
rpm = 120
""",
    )
    vllm = reg.configs["vllm"]
    assert (vllm.kind, vllm.api_key, vllm.model, vllm.timeout_s, vllm.max_tokens) == (
        "openai",
        "k-123",
        "qwen2.5-7b",
        90.0,
        1024,
    )
    assert reg.configs["ollama"].base_url == "http://127.0.0.1:11500/v1"
    assert reg.configs["ollama"].timeout_s == 120.0
    assert reg.resolve(None, None) == ("vllm", "qwen2.5-7b")
    assert reg.settings.llm_rate_limits["vllm"].rpm == 120
    reg.validate()


def test_a_custom_provider_without_a_kind_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="needs a kind"):
        from_toml(tmp_path, monkeypatch, '[llm.providers.mine]\nmodel = "x"\n')


def test_model_names_and_patterns_choose_their_provider_and_price() -> None:
    reg = registry()
    assert reg.resolve(None, "claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert reg.resolve(None, "gpt-4o-2024-08-06") == ("openai", "gpt-4o-2024-08-06")
    assert reg.resolve(None, None) == ("scripted", "scripted-1")
    assert reg.resolve("openai", None) == ("openai", "gpt-4o-mini")
    assert reg.price("openai", "gpt-4o").cost(1_000_000, 1_000_000) == pytest.approx(12.5)
    assert reg.price("ollama", "llama3.1:8b").cost(10**6, 10**6) == 0
    assert reg.price("openai", "gpt-unknown-9").cost(10**6, 10**6) == 0  # unknown: not priced


def test_the_price_table_can_be_overridden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = from_toml(
        tmp_path,
        monkeypatch,
        """
[llm.models."gpt-4o"]
input_per_mtok = 1.0
output_per_mtok = 2.0
""",
    )
    assert reg.price("openai", "gpt-4o").cost(10**6, 10**6) == pytest.approx(3.0)
    entry = reg.catalog.lookup("gpt-4o")
    assert entry is not None and entry.context == 128000


def test_routes_go_from_the_session_model_to_backups_then_to_fallback_providers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    reg = from_toml(
        tmp_path,
        monkeypatch,
        """
[llm]
fallback_providers = ["anthropic", "azure_openai", "ollama"]

[llm.models."gpt-4o"]
backup = "gpt-4o-mini"
""",
    )
    routes = reg.routes("openai", "gpt-4o")
    assert routes == [
        Route("openai", "gpt-4o"),
        Route("openai", "gpt-4o-mini", "openai:gpt-4o"),
        Route("anthropic", "claude-sonnet-4-5", "openai:gpt-4o"),
        # azure_openai is skipped: it is not configured (unavailable)
        Route("ollama", "llama3.1", "openai:gpt-4o"),
    ]
    # two attempts per provider, then the next route; cooling providers are skipped
    assert [reg.choose(routes, attempt=a, cooling=set()).model for a in (1, 2, 3, 5, 9)] == [
        "gpt-4o",
        "gpt-4o",
        "gpt-4o-mini",
        "claude-sonnet-4-5",
        "llama3.1",
    ]
    # while openai cools down, its attempts go to the next route, which is not skipped
    assert [reg.choose(routes, attempt=a, cooling={"openai"}).provider for a in (1, 3, 5, 7)] == [
        "anthropic",
        "anthropic",
        "anthropic",
        "ollama",
    ]
    assert reg.choose(routes, attempt=9, cooling={"ollama"}).provider == "anthropic"


def test_a_cycle_of_backup_models_is_refused_at_startup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = from_toml(
        tmp_path,
        monkeypatch,
        """
[llm.models."gpt-4o"]
backup = "claude-sonnet-4-5"

[llm.models."claude-sonnet-4-5"]
backup = "gpt-4o"
""",
    )
    with pytest.raises(ConfigError, match="cycle"):
        reg.validate()


def test_unknown_default_or_fallback_providers_are_refused_at_startup() -> None:
    with pytest.raises(ConfigError, match="default provider"):
        registry(LLM_PROVIDER="nope").validate()
    with pytest.raises(ConfigError, match="fallback provider"):
        registry(llm_fallback_providers=["nope"]).validate()


def test_models_without_native_tools_use_the_prompt_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = from_toml(
        tmp_path,
        monkeypatch,
        """
[llm.providers.ollama]
no_tools_models = ["phi*"]
""",
    )
    assert reg.native_tools("ollama", "llama3.1:8b")
    assert not reg.native_tools("ollama", "llama3:70b")  # the catalog says so
    assert not reg.native_tools("ollama", "phi3")  # the provider table says so


def test_a_model_name_outside_the_catalog_is_one_bounded_metrics_label() -> None:
    registry = ProviderRegistry(Settings())
    assert registry.metric_model("openai", "gpt-4o") == "gpt-4o"  # in the catalog
    assert registry.metric_model("scripted", "scripted-1") == "scripted-1"
    names = {registry.metric_model("openai", f"made-up-{i}") for i in range(100)}
    assert names == {"other"}
