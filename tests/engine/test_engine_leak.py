"""Nothing of an engine survives `del` (issue 41): on the H200, six engines built and dropped in one process
lost 4 GiB, the weights of every engine whose startup ran Dynamo, because Dynamo keeps each backend it was
given (and its cache entries) for the life of the process, and the trace-once backend held the model's
parameters in its direct call. Here, on the CPU, weak references to everything an engine built (the LLM, its
engine, worker, runner, model, every parameter and the KV cache) must all be dead after `del` and one
gc.collect(), for an eager engine and for each compile mode.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from minivllm import LLM, SamplingParams
from tests.helpers import tiny_checkpoint


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return str(tiny_checkpoint("qwen3-gqa2-d16", str(tmp_path_factory.mktemp("c"))))


def engine_objects(llm: LLM) -> dict[str, weakref.ref]:
    runner = llm.model_runner
    refs = {"LLM": llm, "engine": llm.engine, "worker": llm.worker, "runner": runner, "model": runner.model,
            "kv_cache": runner.kv_cache, "compiled": runner.compiled, "dispatcher": runner.cudagraph_dispatcher}
    refs.update({f"parameter {name}": p for name, p in runner.model.named_parameters()})
    return {name: weakref.ref(obj) for name, obj in refs.items()}


@pytest.mark.parametrize("kwargs", [
    {"enforce_eager": True},
    {"compilation_config": {"mode": 1, "backend": "eager"}},
    {"compilation_config": {"mode": 2, "backend": "eager"}},
    {"compilation_config": {"mode": 3, "backend": "eager"}},
], ids=["eager", "mode1", "mode2", "mode3"])
def test_nothing_of_an_engine_survives_del(ckpt, kwargs):
    for _ in range(2):  # a second engine of the same kind: nothing of the first stays with Dynamo's caches
        llm = LLM(ckpt, max_model_len=64, **kwargs)
        out = llm.generate([{"prompt_token_ids": [1, 2, 3]}], SamplingParams(temperature=0, max_tokens=3),
                           use_tqdm=False)
        assert len(out[0].outputs[0].token_ids) == 3
        refs = engine_objects(llm)
        del llm, out
        gc.collect()
        alive = sorted(name for name, ref in refs.items() if ref() is not None)
        assert not alive, f"alive after del + gc.collect(): {alive}"
