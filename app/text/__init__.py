"""Text on its way to a person or a model: made inert for a terminal, redacted of private data, and worded."""
