"""Decode attention's KV-split count, from occupancy, for the H200's 132 SMs (a pure function of shapes)."""

from __future__ import annotations

import torch

from minivllm.kernels.triton_decode import choose_num_splits

H200 = {"device": torch.device("cuda"), "num_sms": 132}


def test_batch_64_long_contexts_get_a_few_splits():
    # 64 x 8 programs fill 132 SMs once; one wave of 2048-token programs read 71.7% of the copy
    # bandwidth on the H200, 3 splits 86.0%
    assert choose_num_splits(64, 8, 2048, **H200) == 3
    assert choose_num_splits(64, 8, 256, **H200) == 1  # short contexts: the merge would cost more
    assert choose_num_splits(64, 8, 1024, **H200) == 2
    assert choose_num_splits(256, 8, 2048, **H200) == 1  # plenty of programs already
    assert choose_num_splits(4096, 8, 8192, **H200) == 1


def test_batch_1_keeps_its_splits():
    # what the rule gave before it looked at occupancy past one wave: fill the GPU, >= 128 tokens a split
    assert choose_num_splits(1, 8, 2048, **H200) == 16
    assert choose_num_splits(1, 8, 512, **H200) == 4
    assert choose_num_splits(1, 8, 128, **H200) == 1
    assert choose_num_splits(1, 8, 1 << 20, **H200) == 33  # 2 programs per SM
    assert choose_num_splits(8, 8, 2048, **H200) == 5


def test_splits_never_exceed_the_context_or_the_limit():
    for batch in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        for ctx in (16, 128, 512, 2048, 32768):
            n = choose_num_splits(batch, 8, ctx, **H200)
            assert 1 <= n <= 64 and (n == 1 or ctx // n >= 128)
