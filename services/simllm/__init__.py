"""The simulated engine: an OpenAI-compatible vLLM stand-in (`ops serve sim`)."""
