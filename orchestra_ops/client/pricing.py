"""What a model call costs: a target's price per million prompt (input) and completion (output) tokens.

A model or provider of the topology may carry `pricing: {input_per_mtok: USD, output_per_mtok: USD}`
(topology.py); every call to it then records its cost in profile.jsonl (`cost`, USD), so the spend of a
run dir is the sum over every call of every attempt. A call answered from the response cache costs
nothing; a failed call has no usage and is counted at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

PER = 1_000_000


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float:
        """USD for one call's usage (missing counts are 0)."""
        return ((prompt_tokens or 0) * self.input_per_mtok + (completion_tokens or 0) * self.output_per_mtok) / PER


def format_usd(amount: float | None) -> str:
    """`$0.0123`: 4 significant digits below a dollar, cents above."""
    if amount is None:
        return "-"
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4g}"
