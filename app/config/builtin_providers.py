"""The OpenAI-compatible endpoints moa-chat knows without any configuration.

They are defaults of the configuration, like the bundled presets: `providers:` in config.yaml adds to
them and overrides them field by field.
"""

from __future__ import annotations

from .model import ProviderConfig

DEMO_PROVIDER = "demo"

BUILTIN_PROVIDERS: dict[str, ProviderConfig] = {
    p.name: p
    for p in (
        ProviderConfig("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        ProviderConfig(
            "openrouter",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
            # OpenRouter attributes traffic by these; harmless elsewhere.
            headers={"HTTP-Referer": "https://github.com/moa-chat/moa-chat", "X-Title": "moa-chat"},
        ),
        ProviderConfig("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
        ProviderConfig("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        ProviderConfig("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        ProviderConfig("mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
        # Anthropic's and Google's OpenAI-compatible layers (their docs give these base URLs).
        ProviderConfig("anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY"),
        ProviderConfig("gemini", "https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY"),
        ProviderConfig("xai", "https://api.x.ai/v1", "XAI_API_KEY"),
        ProviderConfig("fireworks", "https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"),
        ProviderConfig("cerebras", "https://api.cerebras.ai/v1", "CEREBRAS_API_KEY"),
        ProviderConfig("ollama", "http://localhost:11434/v1", None),
        ProviderConfig("lmstudio", "http://localhost:1234/v1", None),
        # Served by a provider moa-chat starts itself (providers.lifecycle): the base URL is known once it runs.
        ProviderConfig(DEMO_PROVIDER, None, None, max_retries=0),
        # llama.cpp on this machine's CPU, started by moa-chat (providers.local). It reads a long prompt
        # slowly and serves one request at a time, so its first token may take minutes.
        ProviderConfig("local", None, None, max_retries=0, network={"first_token_timeout": 600.0}),
    )
}
