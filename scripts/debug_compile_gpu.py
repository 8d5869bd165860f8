"""GPU debugging aid: run the level-2 compiled forward at several batch sizes outside any graph capture,
then a FULL@L2 engine, printing full tracebacks and Dynamo's recompile counters. Used by gpu_check.sh."""

from __future__ import annotations

import os
import sys
import traceback

import torch
from torch._dynamo.utils import counters

from minivllm import DEFAULT_MODEL, LLM, SamplingParams
from minivllm.compilation.backend import _dummy_metadata
from minivllm.attention.metadata import set_forward_context

model = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
common = dict(max_model_len=256, max_num_seqs=8, gpu_memory_utilization=0.3)
llm = LLM(model, cudagraph_mode="NONE", compilation_config={"level": 2}, **common)
runner = llm.model_runner
for n in (8, 4, 2, 1, 3):
    before = counters["stats"].get("unique_graphs", 0)
    try:
        with torch.inference_mode(), set_forward_context(_dummy_metadata(runner, n), runner.backend, runner.kv_caches):
            runner.forward_fn(runner.input_batch.input_ids[:n], runner.input_batch.positions[:n])
        torch.cuda.synchronize()
        print(f"level 2 forward at n={n}: ok, new graphs {counters['stats'].get('unique_graphs', 0) - before}")
    except Exception:
        print(f"level 2 forward at n={n}: FAILED")
        traceback.print_exc()
out = llm.generate([{"prompt_token_ids": [5, 6, 7]}], SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)
print("NONE@L2 generate:", out[0].outputs[0].token_ids, llm.compile_report())
llm.shutdown()
for sizes in ([2, 4, 8], [1, 2, 4, 8]):
    try:
        llm = LLM(model, cudagraph_mode="FULL", compilation_config={"level": 2}, cudagraph_capture_sizes=sizes,
                  **common)
        out = llm.generate([{"prompt_token_ids": [5, 6, 7]}], SamplingParams(temperature=0, max_tokens=8),
                           use_tqdm=False)
        print(f"FULL@L2 sizes {sizes}: ok", out[0].outputs[0].token_ids, llm.compile_report())
        llm.shutdown()
    except Exception:
        print(f"FULL@L2 sizes {sizes}: FAILED")
        traceback.print_exc()
