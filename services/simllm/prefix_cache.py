"""A prefix cache of the simulated engine, counted the way vLLM counts its own (in tokens, whole blocks).

vLLM caches the KV of whole blocks of prompt tokens (128 tokens per block on the CPU build) and
reuses the leading blocks a new prompt shares with an earlier one, never the block holding the
prompt's last token. So a prompt of n tokens sent twice gets ``cached_tokens`` 0 then
``(n - 1) // 128 * 128``, and the first request reports ``created_cache_tokens`` = ``n // 128 * 128``.

The sim has no real tokens for a chat request, so a block is ``BLOCK_CHARS`` characters of the
request's *key* (its messages and tools as compact JSON): block i covers key[i*512:(i+1)*512] (4
characters per token, as the sim's tokenizer), and a prompt has ``min(len(key) // 512, n // 128)``
full blocks. A block's identity is the hash of the key up to its end, so only a shared *prefix* hits.
At most ``capacity_blocks`` blocks are kept, least recently used first out (512 blocks = 65,536 tokens,
vLLM's cache for ``--kv-cache-memory-bytes 64M`` on the tiny model).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

BLOCK_TOKENS = 128
CHARS_PER_TOKEN = 4
BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN
DEFAULT_CAPACITY_BLOCKS = 512


class PrefixCache:
    """Which prompt blocks the replica holds; `admit` says what a new prompt hits and adds."""

    def __init__(self, capacity_blocks: int = DEFAULT_CAPACITY_BLOCKS) -> None:
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def admit(self, key: str, n_prompt: int) -> tuple[int, int]:
        """(cached_tokens, created_cache_tokens) of a prompt of `n_prompt` tokens whose key is `key`."""
        full = min(len(key) // BLOCK_CHARS, n_prompt // BLOCK_TOKENS)
        usable = min(full, max(0, n_prompt - 1) // BLOCK_TOKENS)
        if full == 0:
            return 0, 0
        chain = hashlib.blake2b(digest_size=16)
        hits = 0
        created = 0
        leading = True
        for index in range(full):
            chain.update(key[index * BLOCK_CHARS:(index + 1) * BLOCK_CHARS].encode())
            block = chain.digest()
            if block in self._blocks:
                self._blocks.move_to_end(block)
                if leading and index < usable:
                    hits += 1
                    continue
            else:
                self._blocks[block] = None
                created += 1
            leading = False
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
        return hits * BLOCK_TOKENS, created * BLOCK_TOKENS
