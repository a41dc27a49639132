"""How one configured provider is reached: pure values, read from settings by the registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

ProviderKind = Literal["scripted", "openai", "azure_openai", "anthropic"]


class ProviderFields(TypedDict, total=False):
    """Some of a `ProviderConfig`'s fields, as the registry gathers them from the built-ins,
    the configuration's table and the environment (later ones win)."""

    name: str
    kind: ProviderKind
    model: str
    api_key: str
    base_url: str
    fast_model: str
    max_tokens: int
    timeout_s: float
    api_version: str
    native_tools: bool
    no_tools_models: tuple[str, ...]
    free: bool
    local: bool
    enabled: bool


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """One entry of `[llm.providers.NAME]`, with the environment's overrides applied."""

    name: str
    """The registry name sessions use (`openai`, `ollama`, `azure_openai`, `anthropic`, …)."""
    kind: ProviderKind
    """Which module speaks to it: `ollama` and other OpenAI-compatible servers are `openai`."""
    model: str
    """The default model (for Azure: the deployment name)."""
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    fast_model: str | None = None
    max_tokens: int = 4096
    timeout_s: float = 60.0
    api_version: str | None = None
    """Azure OpenAI only."""
    native_tools: bool = True
    """False: tools are offered through the prompt-level protocol instead of the API."""
    no_tools_models: tuple[str, ...] = ()
    """Model name patterns (fnmatch) without native tool support on this provider."""
    free: bool = False
    """Costs nothing (local servers such as Ollama)."""
    local: bool | None = None
    """Calls stay local (`providers.locality.is_local` decides when None)."""
    extra_headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    """False: the scripted provider outside `dev` and tests (`[llm] scripted`)."""

    @property
    def self_hosted(self) -> bool:
        """An OpenAI-compatible server of our own (Ollama, vLLM, llama.cpp): a base URL, no key."""
        return self.kind == "openai" and self.base_url is not None and not self.api_key

    def missing(self) -> str | None:
        """Why this provider cannot be used as configured, or None."""
        if not self.enabled:
            return (
                "disabled: the scripted provider is for development and tests; set "
                "CORTEX_LLM_SCRIPTED=true ([llm] scripted = true) to enable it"
            )
        # A self-hosted OpenAI-compatible server (Ollama, vLLM, llama.cpp) may need no key.
        keyless = self.self_hosted
        if self.kind in ("openai", "anthropic") and not self.api_key and not keyless:
            env = "ANTHROPIC_API_KEY" if self.kind == "anthropic" else "OPENAI_API_KEY"
            return f"no API key: set {env} or [llm.providers.{self.name}].api_key"
        if self.kind == "azure_openai":
            for value, env in (
                (self.api_key, "AZURE_OPENAI_KEY"),
                (self.base_url, "AZURE_OPENAI_BASE_URL"),
                (self.model, "AZURE_OPENAI_DEPLOYMENT"),
                (self.api_version, "AZURE_OPENAI_API_VERSION"),
            ):
                if not value:
                    return f"incomplete Azure OpenAI configuration: set {env}"
        return None
