"""Lab 08's question bank: the handbook's four interview questions, then the questions interviewers commonly ask
about CUDA graphs, torch.compile, custom ops, paged attention, continuous batching, chunked prefill, prefix
caching, startup and caches, and debugging.

Each entry is written with its right option first (`right`, then `wrong`); lab08.build() shuffles the options
with a seed taken from the question id, so the letter of the right answer carries no hint. `cites` are
(results file, key, what it is) triples: the feedback reads those numbers from assets/results/h200/ when it is
shown, so it always quotes the measurement as recorded. `lab` and `code` link to where it is measured and
implemented.
"""

from __future__ import annotations

from dataclasses import dataclass

H = "assets/results/h200/"


@dataclass(frozen=True)
class Entry:
    qid: str
    topic: str
    source: str
    prompt: str
    prompt_zh: str
    model_answer: str
    model_answer_zh: str
    right: tuple = ()  # (text, why, text_zh, why_zh)
    wrong: tuple = ()  # of such tuples
    answer: float | None = None  # numeric questions: the value, the relative tolerance and the unit
    rel_tol: float = 0.1
    unit: str = ""
    cites: tuple = ()  # (file, key, label)
    lab: str = ""  # "labs/06_paged_kv_and_batching.ipynb"
    code: str = ""  # "minivllm/engine/scheduler.py::Scheduler.schedule"


L01, L02, L03, L04, L05, L06, L07 = ("labs/01_why_cuda_graphs.ipynb", "labs/02_inside_a_cuda_graph.ipynb",
                                     "labs/03_torch_compile.ipynb", "labs/04_startup_and_cache.ipynb",
                                     "labs/05_fallback_ladder.ipynb", "labs/06_paged_kv_and_batching.ipynb",
                                     "labs/07_claims.ipynb")

BANK = (
    Entry("lab08.h1", "torch-compile", "handbook interview 1",
          "Why can CUDA graphs not replace torch.compile, and do the two stack?",
          "CUDA Graph 为什么不能完全替代 torch.compile？两者能叠加吗？",
          "Graphs remove the CPU cost of launching kernels; compile changes the kernels (fusion, fewer memory "
          "round trips). They stack, but compile gains only what is left to fuse: on this engine, whose hot ops are "
          "already hand-fused Triton kernels, level 3 + graphs is 0.94x graphs alone at batch 64.",
          "Graph 去掉的是 CPU 发射 kernel 的开销；compile 改变 kernel 本身（算子融合、少读写显存）。两者可叠加，但 compile "
          "只能赚到剩下还能融合的部分：本引擎热点算子已是手写融合的 Triton kernel，level 3 + 图在 batch 64 时是单开图的 0.94 倍。",
          right=("They remove different costs (launch vs the kernels' own work); they stack when there is something left to fuse.",
                 "Right: measured, compile on top of graphs helps only where Inductor finds ops to fuse.",
                 "两者去掉不同的开销（发射 vs kernel 本身）；还有可融合的算子时才叠加得上。", "对：实测只有 Inductor 还能融合时才有收益。"),
          wrong=(("Graphs already fuse the kernels they capture, so compile adds nothing.",
                  "A graph replays the same kernels; it fuses nothing.", "图会融合它捕获的 kernel，所以 compile 没用。",
                  "图只是原样重放 kernel，不做融合。"),
                 ("torch.compile also removes the launch overhead, because the compiled module is a single call from Python, so graphs add nothing once a model is compiled.",
                  "Compiled code is still launched kernel by kernel from Python; TPOT with compile and no graphs is ~19 ms.",
                  "torch.compile 也消除发射开销，编译后图没用。", "编译后的代码仍逐个发射 kernel；只 compile 不开图 TPOT 约 19 ms。"),
                 ("They cannot be combined: a compiled model cannot be captured.",
                  "The engine captures compiled pieces (PIECEWISE) and compiled forwards (FULL) routinely.",
                  "两者不能同时用：编译后的模型无法捕获。", "引擎经常捕获编译后的分段（PIECEWISE）和整图（FULL）。")),
          cites=((H + "compile_vs_graphs.json", "rows.2.tpot_s", "FULL graphs, batch 64, TPOT s"),
                 (H + "compile_vs_graphs.json", "rows.8.tpot_s", "level 3 + graphs, batch 64, TPOT s"),
                 (H + "compile.json", "rows.6.tpot_s", "level 2 compile without graphs, batch 1, TPOT s")),
          lab=L03, code="minivllm/compilation/levels.py::compile_model"),
    Entry("lab08.h2", "cuda-graphs", "handbook interview 2",
          "Why does the engine capture graphs for many batch sizes instead of one?",
          "为什么要捕获多个 batch size 的图，而不是只捕获一个？",
          "A graph replays one shape. One graph for the largest size would pad every small batch up to it and compute "
          "the padding; several sizes (1, 2, 4, every 8 up to 256, then every 16) keep the padding small. Capturing at run time would stall "
          "serving, so all sizes are captured at startup, in one shared memory pool.",
          "一个图只能重放一种形状。只捕获最大尺寸，每个小 batch 都要 pad 到最大并白算；多档尺寸（1、2、4，之后每 8 一档到 256，再每 16 一档）让 "
          "padding 很小。运行时再捕获会卡住服务，所以启动时一次捕获完，共用一个显存池。",
          right=("A graph has one shape; several sizes bound the padding, and all are captured at startup.",
                 "Right: padding a memory-bound decode a little is cheap, padding it to 512 rows is not.",
                 "图只有一种形状；多档尺寸限制 padding，启动时全部捕获。", "对：memory-bound 的 decode 少量 padding 很便宜，pad 到 512 行就不是了。"),
          wrong=(("Each running request needs its own graph, captured when it is admitted and replayed for each of its decode steps.", "Graphs are keyed by batch size, not by request.",
                  "每个请求需要自己的图。", "图按 batch 大小索引，与请求无关。"),
                 ("Capture is free, so more graphs cost nothing.",
                  "Capture takes seconds at startup and memory for the executables.", "捕获不花成本，多多益善。",
                  "捕获要花启动时间，图的可执行对象也占显存。"),
                 ("A graph of size 256 cannot run 5 rows at all.",
                  "It can, padded (that is what the engine does between sizes); it just wastes the padded rows.",
                  "256 的图根本跑不了 5 行。", "可以跑，pad 一下就行（尺寸之间就是这么做的），只是浪费了 padding 行。")),
          cites=((H + "latency.json", "modes.FULL.startup.phases_s.cudagraph_capture", "capture of 35 FULL sizes, s"),
                 (H + "latency.json", "modes.FULL.graph_pool_mib", "their shared pool, MiB"),
                 (H + "lab01.json", "tpot.graphs_ms.0", "batch-1 TPOT with graphs, ms")),
          lab=L02, code="minivllm/worker/cudagraph_dispatcher.py::CudagraphDispatcher.dispatch"),
    Entry("lab08.h3", "chunked-prefill", "handbook interview 3",
          "Does prefill use CUDA graphs?",
          "prefill 阶段也用 CUDA Graph 吗？",
          "In vLLM V1 and here, yes for batches up to the largest capture size (512 tokens): PIECEWISE graphs cover "
          "everything but attention, which runs eagerly between the pieces, so prefill and mixed batches replay too. "
          "FULL graphs (attention inside) are decode-only. Chunks are not fixed-size: a chunk is whatever token budget "
          "is left after the decodes, and the batch is padded to the next captured token count.",
          "在 vLLM V1 和本引擎里，不超过最大捕获尺寸（512 token）的 batch 会用：PIECEWISE 图覆盖除 attention 外的一切，"
          "attention 在分段之间 eager 执行，所以 prefill 和混合 batch 也能重放。FULL 图（含 attention）只用于纯 decode。"
          "chunk 不是固定大小：是 decode 之后剩下的 token 预算，batch 再 pad 到最近的捕获尺寸。",
          right=("Yes, up to 512 tokens, through PIECEWISE graphs with attention outside; FULL graphs are decode-only.",
                 "Right: TTFT at batch 1 drops from FULL-only to FULL_AND_PIECEWISE because the prefill replays.",
                 "会，最多 512 token，用 attention 在图外的 PIECEWISE 图；FULL 图只用于 decode。",
                 "对：batch 1 的 TTFT 在 FULL_AND_PIECEWISE 下更低，因为 prefill 也在重放。"),
          wrong=(("Never: prefill lengths vary, so it always runs eagerly.",
                  "That was vLLM 0.5's rule; V1 pads the token count to a captured size.", "从不：prefill 长度会变，只能 eager。",
                  "那是 vLLM 0.5 的做法；V1 把 token 数 pad 到捕获尺寸。"),
                 ("Yes, because chunked-prefill chunks always have the same fixed size, so the chunk shape can be captured once at startup and replayed for every prompt.",
                  "Chunks vary (the budget left after decodes); graphs are keyed by total token count.",
                  "会，因为 chunked prefill 的 chunk 固定大小，可以捕获。", "chunk 大小会变（decode 之后剩余的预算）；图按总 token 数索引。"),
                 ("Yes, every prefill of any length replays a FULL graph.",
                  "FULL graphs hold attention for decode shapes only; long prompts run eagerly.",
                  "会，任何长度的 prefill 都重放 FULL 图。", "FULL 图只含 decode 形状的 attention；长 prompt 仍 eager。")),
          cites=((H + "latency.json", "rows.9.ttft_s", "TTFT batch 1, FULL (prefill eager), s"),
                 (H + "latency.json", "rows.27.ttft_s", "TTFT batch 1, FULL_AND_PIECEWISE (prefill replayed), s")),
          lab=L02, code="minivllm/worker/cudagraph_dispatcher.py::CudagraphDispatcher.dispatch"),
    Entry("lab08.h4", "startup-caches", "handbook interview 4",
          "torch.compile makes the first start slow. What do you do about it?",
          "torch.compile 第一次很慢，怎么办？",
          "Keep the compile cache (here MINIVLLM_CACHE_DIR; in vLLM $VLLM_CACHE_ROOT/torch_compile_cache, not the "
          "non-existent VLLM_TORCH_COMPILE_CACHE_DIR): a warm start loads the compiled pieces and skips Dynamo. Dummy "
          "warm-up requests do nothing here: the batch dimension is symbolic, everything is compiled at startup.",
          "保留编译缓存（本引擎 MINIVLLM_CACHE_DIR；vLLM 是 $VLLM_CACHE_ROOT/torch_compile_cache，并没有 "
          "VLLM_TORCH_COMPILE_CACHE_DIR）：热启动直接加载编译结果、跳过 Dynamo。dummy 预热请求没有用：batch 维是符号化的，"
          "启动时已全部编译。",
          right=("Keep the on-disk compile cache so a warm start skips tracing and Inductor.",
                 "Right: measured warm start 0.23x of cold, Dynamo skipped.", "保留磁盘上的编译缓存，热启动跳过 trace 和 Inductor。",
                 "对：实测热启动是冷启动的 0.23 倍，跳过 Dynamo。"),
          wrong=(("Send a few dummy requests right after startup so that every batch size gets compiled before real traffic arrives.",
                  "With a symbolic batch dimension there is nothing left to trigger; recompiles at run time are 0.",
                  "启动后发几个 dummy 请求触发编译。", "batch 维是符号化的，没有东西可触发；运行时重编译为 0。"),
                 ("Set VLLM_TORCH_COMPILE_CACHE_DIR.", "No vLLM release reads that variable.",
                  "设置 VLLM_TORCH_COMPILE_CACHE_DIR。", "没有任何 vLLM 版本读这个变量。"),
                 ("Compile per layer instead of the whole model: it is faster.",
                  "vLLM traces the whole forward once and splits it; per layer would trace more, not less.",
                  "改成逐层 compile，更快。", "vLLM 整体 trace 一次再切分；逐层只会 trace 更多。")),
          cites=((H + "startup.json", "ratio_warm_over_cold.total", "warm / cold startup"),
                 (H + "startup.json", "warm.compile.dynamo_skipped", "Dynamo skipped when warm")),
          lab=L04, code="minivllm/compilation/levels.py::compile_model"),
    Entry("lab08.n1", "cuda-graphs", "interview",
          "Estimate the batch-1 TPOT floor of Qwen3-0.6B in bf16 (0.596e9 parameters) on an H200 whose copy bandwidth "
          "is 4.2 TB/s. Answer in ms.",
          "估算 Qwen3-0.6B（bf16，0.596e9 参数）在拷贝带宽 4.2 TB/s 的 H200 上 batch 1 的 TPOT 下限（ms）。",
          "Every weight is read once per token: 0.596e9 x 2 B / 4.2e12 B/s = 0.28 ms. The engine measures ~0.97 ms: the "
          "rest is per-kernel latency in a chain of ~240 dependent kernels, not launch cost (graphs removed that).",
          "每个 token 读一遍所有权重：0.596e9 × 2 B ÷ 4.2e12 B/s = 0.28 ms。引擎实测约 0.97 ms：其余是约 240 个相互依赖 "
          "kernel 的逐个延迟，而不是发射开销（图已消除）。",
          answer=0.284, rel_tol=0.1, unit="ms",
          cites=((H + "latency.json", "rows.9.tpot_s", "measured batch-1 TPOT, FULL graphs, s"),),
          lab=L07, code="labs/minivllm_labs/lab07.py::tpot_floor_ms"),
    Entry("lab08.n2", "paged-attention", "interview",
          "KV bytes per token of a Llama-3.2-1B shape: 16 layers, 32 query heads, 8 KV heads, head_dim 64, bf16?",
          "Llama-3.2-1B 形状（16 层，32 个 query 头，8 个 KV 头，head_dim 64，bf16）每个 token 的 KV 字节数？",
          "2 (K, V) x 16 x 8 x 64 x 2 B = 32,768 B = 32 KiB. The 32 query heads do not count: GQA shares 8 KV heads.",
          "2（K、V）× 16 × 8 × 64 × 2 B = 32,768 B = 32 KiB。32 个 query 头不计入：GQA 共享 8 个 KV 头。",
          answer=32768, rel_tol=0.05, unit="bytes", lab=L06, code="minivllm/worker/model_runner.py::ModelRunner.kv_bytes_per_block"),
    Entry("lab08.n3", "paged-attention", "interview",
          "Qwen3-0.6B keeps 112 KiB of KV per token. How many tokens fit in a 28 GiB KV cache?",
          "Qwen3-0.6B 每 token 112 KiB KV。28 GiB 的 KV Cache 能放多少 token？",
          "28 GiB / 112 KiB = 262,144 tokens (16,384 blocks of 16), what the engine reports at startup.",
          "28 GiB ÷ 112 KiB = 262,144 个 token（16,384 个 16 槽的块），与引擎启动日志一致。",
          answer=262144, rel_tol=0.05, unit="tokens",
          cites=((H + "latency.json", "modes.eager.startup.kv_cache_tokens", "KV tokens the engine chose"),),
          lab=L06, code="minivllm/worker/startup.py::choose_num_blocks"),
    Entry("lab08.n4", "cuda-graphs", "interview",
          "Roughly how many microseconds does one tiny eager PyTorch op (x.add_(1) on a CUDA tensor) cost on a modern "
          "server? (within 50%)",
          "现代服务器上一次极小的 eager PyTorch 操作（CUDA 张量上的 x.add_(1)）大约多少微秒？（误差 50% 内）",
          "About 9 us (9.1 us recorded on the H200's host): Python, the dispatcher and the driver. Replayed inside a "
          "graph the same kernel costs under 1 us.",
          "约 9 us（H200 主机上记录为 9.1 us）：Python、dispatcher 和驱动。在图里重放同一个 kernel 不到 1 us。",
          answer=9.1, rel_tol=0.5, unit="us",
          cites=((H + "lab01.json", "launch_overhead.eager_us_per_op", "eager us per op"),
                 (H + "lab01.json", "launch_overhead.graph_us_per_op", "in a graph, us per op")),
          lab=L01, code="labs/minivllm_labs/lab01_timing.py::launch_overhead"),
)
