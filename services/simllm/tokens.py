"""The sim's tokenizer, served like vLLM's `/tokenize` and `/detokenize`: pure and exactly invertible.

A text is cut into tokens of 4 characters from its start (the last may be shorter), so a text of
n characters has ``ceil(n / 4)`` tokens: the same count as ``replies.estimate_tokens``. A token's id
packs its characters' code points, 21 bits each, under a marker bit that gives its length:
``id = (1 << 21 * k) | sum(ord(c_i) << 21 * i)`` for a token of k characters. Decoding any run
of ids gives back exactly the characters they came from.

The id ``TEMPLATE_TOKEN`` (1: a token of no characters) stands for a chat template's own tokens
(role markers), ``TEMPLATE_TOKENS_PER_MESSAGE`` per message; tokenize_routes.py serves them.
"""

from __future__ import annotations

CHARS = 4
BITS = 21
MASK = (1 << BITS) - 1
TEMPLATE_TOKEN = 1
TEMPLATE_TOKENS_PER_MESSAGE = 4


def encode(text: str) -> list[int]:
    ids = []
    for start in range(0, len(text), CHARS):
        piece = text[start:start + CHARS]
        value = 1 << (BITS * len(piece))
        for i, char in enumerate(piece):
            value |= ord(char) << (BITS * i)
        ids.append(value)
    return ids


def decode(ids: list[int]) -> str:
    chars: list[str] = []
    for value in ids:
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{value!r} is not a token of this tokenizer")
        length = (value.bit_length() - 1) // BITS
        chars.extend(chr((value >> (BITS * i)) & MASK) for i in range(length))
    return "".join(chars)
