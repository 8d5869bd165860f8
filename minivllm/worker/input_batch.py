"""Persistent input buffers at fixed device addresses.

A CUDA graph replays the exact memory addresses it saw at capture, so every input the model reads (token
ids, positions, slot mapping, block tables, lengths) lives in one buffer allocated once at startup. Each
step writes the new batch into the front of these buffers and passes views of them to the model; a graph
captured for size N reads the first N rows. Padded rows are filled with harmless values: slot -1 (the
KV-store kernel skips it) and seq_len 0 (attention writes zeros for it); their outputs are discarded.

A FULL graph of any batch (cudagraph_mode FULL, the unified attention kernel) is keyed by its token count
only, so its attention metadata has one shape for every composition: the whole per-sequence buffers
(max_num_seqs rows, the unused ones with no query and seq_len 0), the tokens past the last sequence padding.

Async scheduling: a row whose newest token is still pending (sampled by the step in flight) gets its id on
the device, gathered from that step's sampler output, so the CPU never waits for it. The host staging
buffers are reused every step, so before rewriting them we wait (an event) until the previous step's
copies out of them have run; by then the GPU has only just started that step, so the wait is short.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from minivllm.attention.metadata import AttentionMetadata
from minivllm.layers.sampler import SamplingMetadata

if TYPE_CHECKING:  # the engine's types, named in annotations only: worker/ never imports engine/
    from minivllm.engine.sched_output import SchedulerOutput
    from minivllm.engine.sequence import Sequence


@dataclass
class PreparedBatch:
    num_padded_tokens: int  # tokens the forward runs on (more than the batch's when padded for a graph)
    attn_metadata: AttentionMetadata
    logits_indices: torch.Tensor  # [len(sample_rows)] hidden-state row of each sampled sequence's last token
    sample_rows: list[int]  # which scheduled sequences get a sampled token (unfinished prefill chunks do not)


class InputBatch:
    def __init__(self, max_num_tokens: int, max_num_seqs: int, max_blocks_per_seq: int, block_size: int,
                 num_kv_heads: int, device: torch.device) -> None:
        self.device, self.block_size = device, block_size
        self.max_num_tokens, self.max_num_seqs = max_num_tokens, max_num_seqs
        self.max_blocks_per_seq = max_blocks_per_seq
        i32, i64 = torch.int32, torch.int64
        self.input_ids = torch.zeros(max_num_tokens, dtype=i64, device=device)
        self.positions = torch.zeros(max_num_tokens, dtype=i64, device=device)
        self.slot_mapping = torch.full((max_num_tokens,), -1, dtype=i64, device=device)
        self.query_start_loc = torch.zeros(max_num_seqs + 1, dtype=i32, device=device)
        self.seq_lens = torch.zeros(max_num_seqs, dtype=i32, device=device)
        self.block_tables = torch.zeros(max_num_seqs, max_blocks_per_seq, dtype=i32, device=device)
        self.logits_indices = torch.zeros(max_num_seqs, dtype=i64, device=device)
        self.pending_idx = torch.zeros(2, max_num_seqs, dtype=i64, device=device)  # (dst token, src sampled row)
        # the split decode kernel's finished-split counters (AttentionMetadata.split_counters); it re-zeroes them
        self.split_counters = torch.zeros(max_num_seqs * num_kv_heads, dtype=i32, device=device)
        # Host staging copies (pinned on CUDA so the copies are asynchronous).
        pin = device.type == "cuda"
        self.cpu_tokens = torch.zeros(4, max_num_tokens, dtype=i64, pin_memory=pin)  # ids, pos, slots, -
        self.cpu_seqs = torch.zeros(3, max_num_seqs + 1, dtype=i32, pin_memory=pin)  # qsl, seq_lens, -
        self.cpu_block_tables = torch.zeros(max_num_seqs, max_blocks_per_seq, dtype=i32, pin_memory=pin)
        self.cpu_logits_indices = torch.zeros(max_num_seqs, dtype=i64, pin_memory=pin)
        self.cpu_pending_idx = torch.zeros(2, max_num_seqs, dtype=i64, pin_memory=pin)
        self.staged = torch.cuda.Event() if pin else None  # recorded after the copies out of the host buffers
        # numpy views of the same host memory: a step's small writes cost far less host time through numpy
        # than through torch indexing, and at batch 1 host time is the step's time.
        self.np_tokens, self.np_seqs = self.cpu_tokens.numpy(), self.cpu_seqs.numpy()
        self.np_logits_indices = self.cpu_logits_indices.numpy()
        # (seq_id, blocks written) per block-table row, so a step rewrites only a sequence's new blocks.
        self.row_owner: list[tuple[int, int, int]] = [(-1, 0, 0)] * max_num_seqs
        # The attention launches of a decode batch shape (kernels/launch.LaunchPlan), kept across steps: a
        # step's metadata are views of the buffers above, at the same addresses in every step of that shape,
        # so the launches recorded by one step's first layer serve every later step's layers too. A step
        # then builds nothing before its first attention call (a PIECEWISE batch-1 step is host-bound).
        self.launch_plans: dict = {}
        self.layer_plans: dict = {}  # the same with each layer's addresses, for PIECEWISE steps

    def buffers(self) -> dict[str, torch.Tensor]:
        """Every persistent device buffer, by name (tests check their data_ptr() never changes)."""
        return {k: v for k, v in vars(self).items() if isinstance(v, torch.Tensor) and v.device == self.device
                and not k.startswith("cpu_")}

    def prepare(self, sched: SchedulerOutput, pad_tokens_to: int | None = None,
                pad_seqs_to: int | None = None, prev=None, unified: bool = False) -> PreparedBatch:
        """Write the batch into the buffers. `prev` (a ModelRunnerOutput) is the step in flight, whose sampled
        tokens are the pending ones of this batch. `unified`: lay it out for a FULL graph of any batch (the
        metadata spans all max_num_seqs rows; pad_seqs_to is then ignored)."""
        if self.staged is not None:
            self.staged.synchronize()
        bs = self.block_size
        T, S = sched.num_tokens, len(sched.scheduled)
        Tp, Sp = pad_tokens_to or T, (self.max_num_seqs if unified else pad_seqs_to or S)
        if Tp > self.max_num_tokens or Sp > self.max_num_seqs:
            raise RuntimeError(f"batch of {Tp} tokens / {Sp} seqs exceeds the buffers "
                               f"({self.max_num_tokens} / {self.max_num_seqs})")
        qsl = np.zeros(Sp + 1, dtype=np.int32)
        seq_lens = np.zeros(Sp, dtype=np.int32)
        bt = self.cpu_block_tables.numpy()
        seqs = [s.seq for s in sched.scheduled]
        for i, seq in enumerate(seqs):  # block-table rows: write only what changed since the last step
            owner = (seq.seq_id, seq.block_table_epoch)  # a recomputed or rolled-back table: rewritten
            nb, row = len(seq.block_table), self.row_owner[i]
            done = row[2] if row[:2] == owner else 0
            if nb > done:
                bt[i, done:nb] = seq.block_table[done:]
            self.row_owner[i] = (*owner, nb)
        pending: list[tuple[int, int]] = []  # (token row here, row in prev's sampled tokens)
        if sched.is_decode_only:  # the common step: one token per sequence, no per-row slicing
            ids = np.fromiter((seq.token_ids[-1] for seq in seqs), dtype=np.int64, count=S)
            pos = np.fromiter((seq.num_computed_tokens for seq in seqs), dtype=np.int64, count=S)
            qsl[1:S + 1] = np.arange(1, S + 1)
            seq_lens[:S] = pos + 1
            sample_rows = list(range(S))
            if prev is not None:
                pending = [(i, prev.row_of[seq.seq_id]) for i, seq in enumerate(seqs) if seq.num_pending]
        else:
            ids = np.empty(T, dtype=np.int64)
            pos = np.empty(T, dtype=np.int64)
            sample_rows = []
            t = 0
            for i, s in enumerate(sched.scheduled):
                seq, n, spec = s.seq, s.num_new_tokens, s.spec_token_ids
                m = n - len(spec)  # known (or pending) tokens, then the draft
                start = seq.num_computed_tokens
                known = seq.token_ids[start:start + m]
                ids[t:t + len(known)] = known
                if len(known) < m:  # the last one is pending: its id arrives on the device
                    ids[t + m - 1] = 0
                    pending.append((t + m - 1, prev.row_of[seq.seq_id]))
                if spec:
                    ids[t + m:t + n] = spec
                pos[t:t + n] = np.arange(start, start + n)
                t += n
                qsl[i + 1] = t
                seq_lens[i] = start + n
                if s.completes_prompt:
                    sample_rows.append(i)
        decode_only = sched.is_decode_only
        # Padded decode rows own one (dummy) query token each; in a padded mixed batch they own none.
        qsl[S + 1:] = T + np.arange(1, Sp - S + 1) if decode_only and not unified else T
        rows = np.arange(S) if decode_only else np.repeat(np.arange(S), np.diff(qsl[:S + 1]))
        slots = bt[rows, pos // bs].astype(np.int64) * bs + pos % bs
        # Stage on the host, then one asynchronous copy per buffer.
        ct = self.np_tokens
        ct[0, :T], ct[1, :T], ct[2, :T] = ids, pos, slots
        ct[:2, T:Tp] = 0
        ct[2, T:Tp] = -1
        cs = self.np_seqs
        cs[0, :Sp + 1] = qsl
        cs[1, :Sp] = seq_lens
        bt_rows = S if unified else Sp  # unified: rows without a query are never read, left as they are
        if bt_rows > S:
            bt[S:Sp] = 0
            self.row_owner[S:Sp] = [(-1, 0, 0)] * (Sp - S)
        k = len(sample_rows)
        self.np_logits_indices[:k] = qsl[1:S + 1][sample_rows] - 1
        ct, cs, nb_copy = self.cpu_tokens, self.cpu_seqs, self.max_blocks_per_seq
        self.input_ids[:Tp].copy_(ct[0, :Tp], non_blocking=True)
        self.positions[:Tp].copy_(ct[1, :Tp], non_blocking=True)
        self.slot_mapping[:Tp].copy_(ct[2, :Tp], non_blocking=True)
        self.query_start_loc[:Sp + 1].copy_(cs[0, :Sp + 1], non_blocking=True)
        self.seq_lens[:Sp].copy_(cs[1, :Sp], non_blocking=True)
        self.block_tables[:bt_rows, :nb_copy].copy_(self.cpu_block_tables[:bt_rows, :nb_copy], non_blocking=True)
        self.logits_indices[:k].copy_(self.cpu_logits_indices[:k], non_blocking=True)
        if pending:
            self._gather_pending(pending, prev.sampled)
        if self.staged is not None:
            self.staged.record()
        meta = AttentionMetadata(
            slot_mapping=self.slot_mapping[:Tp],
            query_start_loc=self.query_start_loc[:Sp + 1],
            seq_lens=self.seq_lens[:Sp],
            block_tables=self.block_tables[:Sp],
            max_query_len=int(np.diff(qsl).max()) if S else 0,
            max_seq_len=int(seq_lens.max()) if S else 0,
            decode_only=decode_only,
            query_start_loc_cpu=qsl.tolist(),
            seq_lens_cpu=seq_lens.tolist(),
            unified=unified,
            launch_plans=self.launch_plans, layer_plans=self.layer_plans,
            split_counters=self.split_counters,
        )
        return PreparedBatch(Tp, meta, self.logits_indices[:k], sample_rows)

    def sampling_metadata(self, seqs: list[Sequence]) -> SamplingMetadata:
        """The sampler's view of the sampled rows: their parameters and, for a seeded request, its own
        generator (created on its first sampled token, then kept with the request)."""
        params = [s.params for s in seqs]
        all_greedy = all(p.greedy for p in params)
        k = max((p.logprobs for p in params if p.logprobs is not None), default=None)
        if all_greedy:
            return SamplingMetadata(params, [], True, k)
        gens = []
        for s in seqs:
            if s.params.seed is not None and s.generator is None:
                s.generator = torch.Generator(device=self.device)
                s.generator.manual_seed(s.params.seed)
            gens.append(s.generator if s.params.seed is not None else None)
        return SamplingMetadata(params, gens, False, k)

    def dummy_decode(self, n: int) -> AttentionMetadata:
        """Fill the buffers with a dummy batch of n decode rows and return its metadata (views of the
        buffers, so a graph captured on it replays on real batches). Used by the CUDA-graph capture and the
        compile warm-up.

        Every row writes nothing (slot -1) and attends to nothing (seq_len 0, output zeros); above
        max_num_seqs rows it is one sequence of n query tokens instead (a PIECEWISE size above the batch
        limit).
        """
        if not 1 <= n <= self.max_num_tokens:
            raise ValueError(f"a dummy batch of {n} tokens does not fit the buffers ({self.max_num_tokens})")
        self.input_ids[:n].zero_()
        self.positions[:n].zero_()
        self.slot_mapping[:n].fill_(-1)
        if n > self.max_num_seqs:
            self.seq_lens[:1].zero_()
            self.query_start_loc[:2].copy_(torch.tensor([0, n], dtype=torch.int32))
            return AttentionMetadata(self.slot_mapping[:n], self.query_start_loc[:2], self.seq_lens[:1],
                                     self.block_tables[:1], max_query_len=n, max_seq_len=0, decode_only=False,
                                     query_start_loc_cpu=[0, n], seq_lens_cpu=[0])
        self.seq_lens[:n].zero_()
        self.query_start_loc[:n + 1].copy_(torch.arange(n + 1, dtype=torch.int32, device=self.device))
        return AttentionMetadata(self.slot_mapping[:n], self.query_start_loc[:n + 1], self.seq_lens[:n],
                                 self.block_tables[:n], max_query_len=1, max_seq_len=1, decode_only=True,
                                 query_start_loc_cpu=list(range(n + 1)), seq_lens_cpu=[0] * n)

    def dummy_unified(self, n: int) -> AttentionMetadata:
        """The capture batch of a FULL graph of any batch at n tokens: every token is padding (slot -1, zeros
        out), no sequence has a query. Views of the whole buffers, as prepare(unified=True) gives."""
        if not 1 <= n <= self.max_num_tokens:
            raise ValueError(f"a dummy batch of {n} tokens does not fit the buffers ({self.max_num_tokens})")
        self.input_ids[:n].zero_()
        self.positions[:n].zero_()
        self.slot_mapping[:n].fill_(-1)
        self.query_start_loc.zero_()
        self.seq_lens.zero_()
        S = self.max_num_seqs
        return AttentionMetadata(self.slot_mapping[:n], self.query_start_loc, self.seq_lens, self.block_tables,
                                 max_query_len=0, max_seq_len=0, decode_only=False,
                                 query_start_loc_cpu=[0] * (S + 1), seq_lens_cpu=[0] * S, unified=True)

    def _gather_pending(self, pending: list[tuple[int, int]], sampled: torch.Tensor) -> None:
        """input_ids[dst] = sampled[src] on the device, behind the copies above (same stream)."""
        n = len(pending)
        if all(d == j and s == j for j, (d, s) in enumerate(pending)):  # the steady state: same rows, in order
            self.input_ids[:n].copy_(sampled[:n])
            return
        self.cpu_pending_idx[:, :n] = torch.tensor(pending, dtype=torch.int64).T
        self.pending_idx[:, :n].copy_(self.cpu_pending_idx[:, :n], non_blocking=True)
        dst, src = self.pending_idx[0, :n], self.pending_idx[1, :n]
        self.input_ids.index_copy_(0, dst, sampled.index_select(0, src))
