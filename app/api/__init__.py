"""`moa-chat api`: the presets as models behind an OpenAI-compatible chat-completions endpoint."""
