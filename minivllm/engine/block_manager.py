"""Paged KV-cache bookkeeping: which physical block holds which tokens, who uses it, what is cached.

Blocks are reference counted. A block whose count drops to zero goes back on the free queue but keeps its
content hash, so a later request with the same prefix can take it back ("prefix caching", evicted lazily in
least-recently-freed order). A block's hash chains over the hash of the block before it, so equal hashes
mean equal prefixes; the tokens are compared as well, so a hash collision can never serve wrong K/V.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from minivllm.engine.sequence import Sequence


def hash_block(parent: bytes | None, token_ids: list[int] | tuple[int, ...]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    if parent is not None:
        h.update(parent)
    h.update(np.asarray(token_ids, dtype=np.int64).tobytes())
    return h.digest()


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    block_hash: bytes | None = None
    parent_hash: bytes | None = None
    token_ids: tuple[int, ...] = ()


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.cached: dict[bytes, int] = {}  # block hash -> block id
        self.num_cache_queries = 0
        self.num_cache_hits = 0  # in tokens

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    def blocks_needed(self, num_tokens: int) -> int:
        return (num_tokens + self.block_size - 1) // self.block_size

    # ---- prefix cache -------------------------------------------------------------------------------
    def find_cached_prefix(self, seq: Sequence) -> list[int]:
        """Block ids holding the longest cached run of seq's full blocks (always leaving one token to compute,
        because the last token's logits are needed)."""
        if not self.enable_prefix_caching:
            return []
        bs = self.block_size
        max_blocks = (seq.num_tokens - 1) // bs
        found: list[int] = []
        parent: bytes | None = None
        for i in range(max_blocks):
            tokens = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = hash_block(parent, tokens)
            block_id = self.cached.get(h)
            if block_id is None:
                break
            b = self.blocks[block_id]
            if b.block_hash != h or b.parent_hash != parent or b.token_ids != tokens:
                break  # collision or stale entry: never reuse
            found.append(block_id)
            parent = h
        return found

    def can_admit(self, cached_block_ids: list[int], num_new_tokens: int) -> bool:
        """Would admitting a sequence with these cached blocks plus num_new_tokens fit in the free blocks?"""
        reclaimed = sum(1 for b in cached_block_ids if self.blocks[b].ref_count == 0)
        need = self.blocks_needed(len(cached_block_ids) * self.block_size + num_new_tokens) - len(cached_block_ids)
        return need + reclaimed <= self.num_free_blocks

    def admit(self, seq: Sequence, cached_block_ids: list[int]) -> None:
        """Give seq the cached prefix blocks (taking a reference on each)."""
        assert not seq.block_table, "admit() expects a sequence without blocks"
        self.num_cache_queries += seq.num_tokens
        for block_id in cached_block_ids:
            b = self.blocks[block_id]
            if b.ref_count == 0:
                del self.free_queue[block_id]
            b.ref_count += 1
            seq.block_table.append(block_id)
            seq.block_hashes.append(b.block_hash)  # type: ignore[arg-type]
        seq.num_computed_tokens = len(cached_block_ids) * self.block_size
        seq.num_cached_tokens = seq.num_computed_tokens
        self.num_cache_hits += seq.num_cached_tokens

    # ---- allocation ---------------------------------------------------------------------------------
    def can_allocate(self, seq: Sequence, num_new_tokens: int) -> bool:
        need = self.blocks_needed(seq.num_computed_tokens + num_new_tokens) - len(seq.block_table)
        return need <= self.num_free_blocks

    def allocate(self, seq: Sequence, num_new_tokens: int) -> None:
        """Grow seq's block table so it covers its computed tokens plus num_new_tokens."""
        need = self.blocks_needed(seq.num_computed_tokens + num_new_tokens) - len(seq.block_table)
        if need > self.num_free_blocks:
            raise RuntimeError(f"out of KV blocks: need {need}, free {self.num_free_blocks}")
        for _ in range(need):
            block_id, _ = self.free_queue.popitem(last=False)
            b = self.blocks[block_id]
            if b.block_hash is not None:  # evict its cached content
                if self.cached.get(b.block_hash) == block_id:
                    del self.cached[b.block_hash]
                b.block_hash, b.parent_hash, b.token_ids = None, None, ()
            b.ref_count = 1
            seq.block_table.append(block_id)

    def cache_full_blocks(self, seq: Sequence) -> None:
        """Register the hashes of seq's blocks that became full of computed tokens."""
        if not self.enable_prefix_caching:
            return
        bs = self.block_size
        num_full = min(seq.num_computed_tokens, seq.num_tokens) // bs  # a pending token's id is not known yet
        for i in range(len(seq.block_hashes), num_full):
            parent = seq.block_hashes[i - 1] if i > 0 else None
            tokens = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = hash_block(parent, tokens)
            seq.block_hashes.append(h)
            b = self.blocks[seq.block_table[i]]
            if b.block_hash is None:
                b.block_hash, b.parent_hash, b.token_ids = h, parent, tokens
                self.cached.setdefault(h, b.block_id)

    def free_tail(self, seq: Sequence, num_tokens: int) -> None:
        """Drop seq's blocks past the first blocks_needed(num_tokens) (speculative decoding: the blocks of
        rejected draft tokens), last first, as free() does."""
        keep = self.blocks_needed(num_tokens)
        assert keep >= len(seq.block_hashes), "a hashed block would be freed"
        for block_id in reversed(seq.block_table[keep:]):
            b = self.blocks[block_id]
            b.ref_count -= 1
            assert b.ref_count >= 0, f"block {block_id} freed twice"
            if b.ref_count == 0:
                self.free_queue[block_id] = None
        if keep < len(seq.block_table):
            del seq.block_table[keep:]
            seq.block_table_epoch += 1

    def free(self, seq: Sequence) -> None:
        """Drop seq's references; blocks reaching zero go to the back of the free queue (evicted last)."""
        for block_id in reversed(seq.block_table):
            b = self.blocks[block_id]
            b.ref_count -= 1
            assert b.ref_count >= 0, f"block {block_id} freed twice"
            if b.ref_count == 0:
                self.free_queue[block_id] = None
        seq.block_table = []
        seq.block_hashes = []

    def reconcile(self, live: Iterable[Sequence]) -> None:
        """Recount every block's references from the block tables of the live sequences: a block no live
        sequence holds goes (back) to the free queue, keeping its cached content. Used after an interrupt,
        which may have left a reference taken halfway or a sequence holding blocks outside the scheduler.
        Assignments from scratch, so running it again (after another interrupt) gives the same state."""
        counts = Counter(block_id for seq in live for block_id in seq.block_table)
        for b in self.blocks:
            b.ref_count = counts[b.block_id]
            if b.ref_count == 0:
                self.free_queue.setdefault(b.block_id, None)
            else:
                self.free_queue.pop(b.block_id, None)
        for h, block_id in list(self.cached.items()):
            if self.blocks[block_id].block_hash != h:
                self.cached.pop(h, None)

    def check_invariants(self) -> None:
        """Used by tests: ref counts, free queue and hash index agree with each other."""
        for b in self.blocks:
            assert b.ref_count >= 0
            assert (b.ref_count == 0) == (b.block_id in self.free_queue), b
        for h, i in self.cached.items():
            assert self.blocks[i].block_hash == h
