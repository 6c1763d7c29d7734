"""Servers the CLI launches: the simulated engine (simllm) and the retrieval server."""
