"""What a model costs: dollars per million input and output tokens.

`pricing:` in config.yaml adds to and overrides these. The bundled figures are the providers' list prices
for the bundled presets' models when this table was written (check your provider's page: prices change,
and OpenRouter's vary by route; a response that carries its own cost, as OpenRouter's does, wins).
Models served on this machine cost nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    input: float  # dollars per million prompt tokens
    output: float  # dollars per million completion tokens

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


FREE = Price(0.0, 0.0)
FREE_PROVIDERS = frozenset({"demo", "ollama", "lmstudio", "local"})

BUNDLED_PRICES: dict[str, Price] = {
    # OpenAI
    "openai:gpt-4.1": Price(2.00, 8.00),
    "openai:gpt-4.1-mini": Price(0.40, 1.60),
    "openai:gpt-4o-mini": Price(0.15, 0.60),
    "openai:o4-mini": Price(1.10, 4.40),
    # OpenRouter (the upstream list prices)
    "openrouter:anthropic/claude-sonnet-4": Price(3.00, 15.00),
    "openrouter:google/gemini-2.5-flash": Price(0.30, 2.50),
    "openrouter:openai/gpt-4.1-mini": Price(0.40, 1.60),
    "openrouter:deepseek/deepseek-chat": Price(0.27, 1.10),
    # Groq
    "groq:llama-3.3-70b-versatile": Price(0.59, 0.79),
    "groq:qwen/qwen3-32b": Price(0.29, 0.59),
    "groq:openai/gpt-oss-20b": Price(0.10, 0.50),
    "groq:openai/gpt-oss-120b": Price(0.15, 0.75),
}


def format_cost(dollars: float) -> str:
    """$0.0123 for small sums (a turn often costs less than a cent), $1.23 from a dollar up."""
    if dollars == 0:
        return "$0"
    if dollars < 0.01:
        return f"${dollars:.4f}"
    return f"${dollars:,.2f}" if dollars >= 1 else f"${dollars:.3f}"


def cost_label(dollars: float, *, complete: bool) -> str:
    """The cost as the header, the cards and `ask` show it: a "+" when some call that used tokens had no
    price, since the sum then leaves it out and is only a lower bound."""
    return format_cost(dollars) + ("" if complete else "+")
