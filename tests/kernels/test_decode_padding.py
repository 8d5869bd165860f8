"""A decode step padded past its batch (a PIECEWISE graph of more tokens than sequences) launches the decode
kernel over the batch's sequences only.

Why: the kernel's grid was the padded token count, so it read seq_lens and block_tables rows past the batch;
with a capture size above max_num_seqs (128 tokens, 32 sequences) those rows lie past the buffers and the H200
faulted ("operation not supported on global/shared address space", speculative decoding's GPU test).
"""

from __future__ import annotations

import torch

from minivllm.attention.metadata import AttentionMetadata
from minivllm.kernels import ops


def test_padded_decode_runs_the_kernel_over_the_batch_rows_only(monkeypatch):
    seen = []

    def fake_decode(q, k_cache, v_cache, block_tables, seq_lens, scale, out=None, **kw):
        seen.append((q.shape[0], out.shape[0], seq_lens.shape[0]))
        out.fill_(1.0)
        return out

    kernels = ops._triton()
    monkeypatch.setattr(ops, "_triton", lambda: type(kernels)(**{**vars(kernels), "paged_decode_attention": fake_decode}))
    S, T, H, D = 3, 8, 2, 16  # 3 sequences, padded to 8 tokens
    meta = AttentionMetadata(slot_mapping=torch.full((T,), -1), query_start_loc=torch.arange(S + 1, dtype=torch.int32),
                             seq_lens=torch.ones(S, dtype=torch.int32), block_tables=torch.zeros(S, 4, dtype=torch.int32),
                             max_query_len=1, max_seq_len=1, decode_only=True)
    cache = torch.zeros(4, 16, 1, D)
    out = torch.zeros(T, H, D)
    res = ops.paged_attention(torch.randn(T, H, D), cache, cache, meta, 1.0, "triton", out=out)
    assert seen == [(S, S, S)]
    assert res.shape == (T, H, D) and bool((out[:S] == 1).all()) and bool((out[S:] == 0).all())
