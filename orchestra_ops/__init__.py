"""orchestra-ops: one topology file, five commands, for LLM evals on your own GPU fleet."""

__version__ = "0.1.0"
