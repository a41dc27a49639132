"""LLM providers: one streaming interface, one module per provider, a registry by name."""
