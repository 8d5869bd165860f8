"""The rest of Lab 08's bank (see lab08_bank.py for the format): multiple-choice questions, right option first."""

from __future__ import annotations

from minivllm_labs.lab08_bank import L01, L02, L03, L04, L05, L06, Entry, H


def mc(qid, topic, prompt, prompt_zh, answer, answer_zh, right, wrong, cites=(), lab="", code=""):
    return Entry(qid, topic, "interview", prompt, prompt_zh, answer, answer_zh, right=right, wrong=wrong,
                 cites=cites, lab=lab, code=code)


MORE = (
    mc("lab08.c1", "cuda-graphs", "A batch of 5 decodes replays the size-8 graph. What happens to rows 6-8?",
       "5 条 decode 重放 size 8 的图，第 6-8 行怎样？",
       "They are computed (the graph runs 8 rows) with harmless inputs: slot -1, which the KV store skips, and "
       "seq_len 0; their logits are dropped. In a memory-bound decode the extra rows cost little.",
       "它们照样被计算（图跑 8 行），输入无害：slot -1（KV 写入跳过）、seq_len 0；logits 被丢弃。memory-bound 的 decode 多几行很便宜。",
       ("Computed on dummy inputs (slot -1, length 0) and discarded.", "Right: see InputBatch.prepare.",
        "用无害输入（slot -1、长度 0）计算后丢弃。", "对：见 InputBatch.prepare。"),
       (("Skipped by the GPU: a graph runs only the live rows.", "A graph's shapes are fixed at capture; it runs all 8.",
         "GPU 跳过：图只跑有效行。", "图的形状在捕获时固定，8 行都会跑。"),
        ("They write their keys and values into block 0 and so corrupt the KV cache of whichever sequence owns it.", "Their slot is -1, so nothing is written.",
         "它们会写坏别的序列的 KV Cache。", "slot 为 -1，什么都不写。"),
        ("The engine captures a size-5 graph on the fly.", "No capture happens at run time.",
         "引擎临时捕获一个 size 5 的图。", "运行时不做捕获。")),
       lab=L02, code="minivllm/worker/input_batch.py::InputBatch.prepare"),
    mc("lab08.c2", "cuda-graphs", "Which of these fails inside torch.cuda.graph capture?", "以下哪个在 CUDA Graph 捕获中会失败？",
       "A host sync such as tensor.item() (the CPU would wait for a result that capture never produces). Allocation "
       "works: it comes from the graph's private pool.",
       "像 tensor.item() 这样的主机同步（CPU 要等一个捕获时不会产生的结果）。分配显存可以：来自图的私有池。",
       ("Calling .item() on a GPU tensor.", "Right: a host sync is not capturable.", "对 GPU 张量调用 .item()。", "对：主机同步不可捕获。"),
       (("Allocating a new tensor.", "Allowed: it is served from the graph's private memory pool.", "分配新张量。",
         "允许：由图的私有显存池提供。"),
        ("A matmul followed by softmax.", "Plain kernels are exactly what a graph records.", "matmul 后接 softmax。",
         "普通 kernel 正是图要录制的。"),
        ("Writing into a preallocated buffer with copy_().", "That is how inputs get into a graph.",
         "用 copy_() 写进预分配的 buffer。", "输入就是这样进入图的。")),
       lab=L02, code="minivllm/worker/cuda_graph.py::capture_graphs"),
    mc("lab08.c3", "cuda-graphs", "An article says each captured graph of a 7B model takes ~150 MB, so 10 graphs take "
       "1.5 GB. What do you measure instead?", "文章说 7B 模型每个图约 150 MB，10 个图 1.5 GB。实测如何？",
       "All sizes are captured largest first into one shared pool; smaller graphs reuse its blocks. The pool holds "
       "tens of MiB for 35 sizes of a 0.6B model; the graph executables add ~10 KiB per kernel node outside it.",
       "所有尺寸从大到小捕获进同一个共享池，小图复用它的块。0.6B 模型 35 个尺寸的池只有几十 MiB；图的可执行对象在池外，"
       "每个 kernel 节点约 10 KiB。",
       ("One shared pool, captured largest first: tens of MiB for all sizes.", "Right: measured pool below.",
        "一个共享池，从大到小捕获：所有尺寸共几十 MiB。", "对：见下面实测的池大小。"),
       (("About 150 MB per captured size, growing linearly with the number of sizes, so 35 sizes need several GB.", "Only with separate pools per graph.",
         "每个 150 MB，随尺寸数线性增长。", "只有每个图单独一个池时才会这样。"),
        ("Nothing: graphs use no memory.", "The pool and the executables do take memory.", "不占：图不用显存。",
         "池和可执行对象都占显存。"),
        ("The whole KV cache is copied into each graph.", "Graphs read the one KV cache by address.",
         "整个 KV Cache 被拷进每个图。", "图按地址读同一个 KV Cache。")),
       cites=((H + "latency.json", "modes.FULL.graph_pool_mib", "FULL graphs' pool, 35 sizes, MiB"),
              (H + "latency.json", "modes.FULL.graph_free_memory_drop_mib", "free-memory drop around the capture, MiB")),
       lab=L02, code="minivllm/worker/cuda_graph.py::capture_all_sizes"),
    mc("lab08.c4", "cuda-graphs", "A sampling kernel with random numbers is captured once and replayed three times. "
       "What do the three replays produce?", "带随机数的采样 kernel 捕获一次、重放三次，结果如何？",
       "Three different samples: PyTorch registers the generator with the graph and advances its offset on each "
       "replay. The seed is not frozen at capture.",
       "三个不同的样本：PyTorch 把随机数生成器登记到图上，每次重放推进 offset，种子不会在捕获时冻结。",
       ("Three different samples: the RNG offset advances per replay.", "Right.", "三个不同样本：每次重放推进 RNG offset。", "对。"),
       (("The same sample three times: replay reuses the capture's seed.", "That is the article's claim; PyTorch "
         "advances the Philox offset.", "三次相同：重放沿用捕获时的种子。", "这是文章的说法；PyTorch 会推进 Philox offset。"),
        ("An error: RNG cannot be captured.", "It can; CUDA graphs support PyTorch's generators.", "报错：随机数不能捕获。",
         "可以；CUDA Graph 支持 PyTorch 的生成器。"),
        ("Zeros: random kernels are skipped in graphs.", "Nothing is skipped.", "全零：图里跳过随机 kernel。", "什么都不会跳过。")),
       lab=L02, code="minivllm/worker/cuda_graph.py::reset_rng_after_failed_capture"),
    mc("lab08.t1", "torch-compile", "How does vLLM apply torch.compile to the model?", "vLLM 如何对模型应用 torch.compile？",
       "It traces the whole forward once with Dynamo (symbolic batch size) and splits the graph at each attention op; "
       "the pieces between are compiled and captured as PIECEWISE graphs, attention runs between them.",
       "用 Dynamo 整体 trace 一次 forward（batch 维符号化），在每个 attention 处切分；中间的分段被编译并捕获为 PIECEWISE "
       "图，attention 在分段之间运行。",
       ("One trace of the whole forward, split at attention into pieces.", "Right: 28 attention splits, 29 pieces here.",
        "整体 trace 一次，在 attention 处切成分段。", "对：这里 28 处切分、29 个分段。"),
       (("Each decoder layer is compiled separately (the default scope).", "That is the handbook's claim; vLLM does "
         "not compile per layer.", "每个 decoder 层单独编译（默认范围）。", "这是手册的说法；vLLM 不逐层编译。"),
        ("Only a selected set of ops (norms, activations) is compiled; the rest of every layer, attention included, stays eager.", "custom ops choose kernels; the trace covers all.",
         "只编译选定的算子，其余 eager。", "custom ops 只决定用哪个 kernel；trace 覆盖全部。"),
        ("Once per batch size seen at run time.", "The batch dimension is symbolic: one trace.", "运行时每遇到一个 batch 大小编译一次。",
         "batch 维是符号化的：只 trace 一次。")),
       cites=((H + "latency.json", "modes.PIECEWISE.compile_report.attention_splits", "attention splits"),
              (H + "latency.json", "modes.PIECEWISE.compile_report.pieces", "pieces")),
       lab=L03, code="minivllm/worker/cuda_graph.py::capture_graphs"),
    mc("lab08.t2", "torch-compile", "Batches of 1, 7, 33 and 200 tokens arrive after startup. How many recompiles does "
       "the engine's compiled forward do?", "启动后来了 1、7、33、200 token 的 batch，编译后的 forward 会重编译几次？",
       "None: the batch dimension is marked dynamic, so one trace covers every size; the recorded run-time recompile "
       "counter is 0.", "零次：batch 维标记为动态，一次 trace 覆盖所有大小；记录的运行时重编译计数为 0。",
       ("Zero: one trace with a symbolic batch size.", "Right.", "零次：batch 维符号化，只 trace 一次。", "对。"),
       (("Four: each new shape re-traces once, then it is cached for later batches of the same size.", "Only with static shapes (the handbook's claim).", "四次：每个新形状重 trace。",
         "只有静态形状才会（手册的说法）。"),
        ("One per power of two.", "There is no such bucketing in Dynamo.", "每个 2 的幂一次。", "Dynamo 没有这种分桶。"),
        ("It falls back to eager for unseen sizes.", "No fallback happens; the compiled code runs.", "没见过的大小退回 eager。",
         "不会退回，运行的是编译代码。")),
       cites=((H + "latency.json", "modes.PIECEWISE.compile_report.recompiles_at_runtime", "run-time recompiles"),),
       lab=L04, code="minivllm/compilation/levels.py::compile_model"),
    mc("lab08.o1", "custom-ops", "Why register paged attention as a custom op (torch.library) for torch.compile?",
       "为什么要把 paged attention 注册为 torch.library 自定义算子？",
       "Dynamo then sees one opaque op with a declared signature instead of Python it cannot trace: no graph breaks, "
       "and the graph can be split at it for piecewise graphs. Unregistered, the engine measured 76 graph breaks and "
       "a 1.8x slower decode.",
       "这样 Dynamo 看到的是一个签名明确的不透明算子，而不是无法 trace 的 Python：没有 graph break，还能在它那里切分图。"
       "不注册时实测 76 次 graph break、decode 慢 1.8 倍。",
       ("Dynamo sees one opaque op: no graph breaks, and a split point for piecewise graphs.", "Right.",
        "Dynamo 看到一个不透明算子：无 graph break，且可作为分段切分点。", "对。"),
       (("Registration makes the kernel itself faster.", "The kernel is the same; what changes is the graph around it.",
         "注册让 kernel 本身变快。", "kernel 没变，变的是它周围的图。"),
        ("Registration lets Inductor fuse attention with the output projection and the residual add into one kernel.", "An opaque op is not fused; that is the point.",
         "这样 Inductor 能把 attention 和后面的 matmul 融合。", "不透明算子不会被融合，这正是目的。"),
        ("It is needed only for CPU execution.", "It matters most on the GPU, under compile.", "只在 CPU 上需要。",
         "在 GPU、compile 下最重要。")),
       cites=((H + "attention_unregistered.json", "modes.NONE@L1.compile_report.graph_breaks", "graph breaks, unregistered"),
              (H + "attention_registered.json", "rows.0.tpot_s", "registered, batch 1 TPOT s"),
              (H + "attention_unregistered.json", "rows.0.tpot_s", "unregistered, batch 1 TPOT s")),
       lab=L03, code="minivllm/attention/layer.py"),
    mc("lab08.o2", "custom-ops", "An untraceable custom attention is left unregistered and the model is compiled with "
       "fullgraph=True. What happens?", "未注册且不可 trace 的自定义 attention，用 fullgraph=True 编译，会怎样？",
       "Compilation fails at startup: fullgraph forbids graph breaks. Without fullgraph it breaks the graph (slower); "
       "if Dynamo can trace it, it is baked in, possibly wrongly. Register it.",
       "启动时编译失败：fullgraph 不允许 graph break。不加 fullgraph 则断图（更慢）；若 Dynamo 能 trace，则被烤进图里，"
       "可能出错。应该注册它。",
       ("Compilation fails at startup.", "Right.", "启动时编译失败，报 graph break 错误。", "对。"),
       (("It silently falls back to an eager region around the op and compiles the rest of the model as usual.", "Only without fullgraph.", "静默退回 eager 区段。", "只有不加 fullgraph 时才会。"),
        ("It runs faster because the op stays in Python.", "Graph breaks cost time, never save it.",
         "更快，因为算子留在 Python。", "graph break 只会花时间。"),
        ("torch.compile registers it automatically.", "Registration is explicit (torch.library).",
         "torch.compile 会自动注册。", "注册必须显式（torch.library）。")),
       lab=L03, code="minivllm/attention/layer.py"),
    mc("lab08.p1", "paged-attention", "What problem does a paged KV cache solve?", "分页 KV Cache 解决了什么问题？",
       "Reserving max_model_len of KV per request wastes most of it; blocks allocated on demand waste at most one "
       "partly-filled block per sequence (<1% of slots on the standard workload at block size 16), so more "
       "sequences fit and the batch grows.",
       "按 max_model_len 为每个请求预留 KV 会浪费大部分；按需分配块则每条序列最多浪费一个未满的块（标准负载、block 16 下"
       "不到 1%），能放下更多序列，batch 更大。",
       ("Memory waste from reserving the maximum length: blocks are allocated on demand.", "Right.",
        "按最大长度预留造成的浪费：块按需分配。", "对。"),
       (("Kernel launch overhead.", "That is what CUDA graphs address.", "kernel 发射开销。", "那是 CUDA Graph 解决的。"),
        ("The compute cost of attention, which paging reduces by skipping the empty parts of long sequences.", "Paging does not change the FLOPs.", "attention 的计算量。", "分页不改变 FLOPs。"),
        ("Numerical precision of the cache.", "Paging changes layout, not precision.", "缓存的数值精度。", "分页改布局不改精度。")),
       cites=((H + "lab06.json", "fragmentation.waste_pct_by_block.16", "empty slots at block size 16, %"),),
       lab=L06, code="minivllm/engine/block_manager.py::BlockManager.allocate"),
    mc("lab08.p2", "paged-attention", "How does a FULL CUDA graph work with a block table that changes every step?",
       "block table 每步都变，FULL CUDA Graph 怎么用？",
       "The block table is an input in a persistent buffer at a fixed address; the runner copies the step's block ids "
       "into it, and the graph's attention kernel reads them. No conflict, nothing pre-allocated per graph.",
       "block table 是放在固定地址持久化 buffer 里的输入；runner 每步把 block id 拷进去，图里的 attention kernel 读取它。"
       "没有冲突，也没有为图预分配块。",
       ("It reads the block ids from a persistent buffer the runner refills.", "Right.", "从 runner 每步刷新的持久化 buffer 读 block id。", "对。"),
       (("Each graph pre-allocates its own physical blocks.", "The article's claim; measured wrong.", "每个图预分配自己的物理块。",
         "文章的说法；实测不对。"),
        ("CUDA graphs are switched off for any step in which the block manager allocates a new block.", "Those steps replay normally.", "分配新块时禁用图。",
         "这些步照常重放。"),
        ("The block table is baked into the graph at capture.", "Only its address is.", "block table 在捕获时固化进图。",
         "固化的只是地址。")),
       cites=((H + "lab06.json", "graphs.graphs.replays_with_new_blocks", "FULL replays in steps with a new block"),),
       lab=L06, code="minivllm/worker/input_batch.py::InputBatch.prepare"),
    mc("lab08.b1", "continuous-batching", "What makes continuous batching 'continuous'?", "连续批处理的“连续”指什么？",
       "The batch is re-formed every step: finished requests leave and waiting ones join at once, so the GPU never "
       "waits for the slowest request of a static batch.",
       "每一步重新组 batch：完成的请求立即离开，等待的立即加入，GPU 不必等静态 batch 里最慢的那条。",
       ("The scheduler re-forms the batch every step.", "Right: mean batch ~129 sequences on the standard workload.",
        "调度器每一步重新组 batch。", "对：标准负载下平均每步约 129 条序列。"),
       (("Requests are streamed to the client token by token.", "Streaming is an API matter, not batching.",
         "请求逐 token 流式返回。", "流式是接口层面的事，与批处理无关。"),
        ("The GPU never idles between kernels.", "That is about launches, not batching.", "GPU 在 kernel 之间从不空闲。",
         "那是发射的问题。"),
        ("Batches are padded to a fixed size.", "Padding is a graph detail; the batch size varies.", "batch 被 pad 到固定大小。",
         "padding 是图的细节；batch 大小是变化的。")),
       cites=((H + "throughput.json", "minivllm.mean_batch_seqs", "mean sequences per step"),
              (H + "throughput.json", "minivllm.output_tok_s", "output tok/s")),
       lab=L06, code="minivllm/engine/scheduler.py::Scheduler.schedule"),
    mc("lab08.b2", "continuous-batching", "Raising max_num_seqs from 16 to 256 on a 256-request offline workload: what "
       "happens to throughput and to each request's TPOT?", "离线 256 个请求，max_num_seqs 从 16 提到 256，吞吐和单请求 TPOT 如何变化？",
       "Throughput rises (more tokens per memory-bound step), each request's TPOT rises too (a bigger step takes "
       "longer), and TTFT falls because requests no longer queue for a slot.",
       "吞吐上升（每个 memory-bound 步出更多 token），单请求 TPOT 也上升（步更大更慢），TTFT 下降（不再排队等空位）。",
       ("Throughput up, TPOT up, TTFT down.", "Right.", "吞吐升、TPOT 升、TTFT 降。", "对。"),
       (("Throughput up, TPOT down.", "A bigger step cannot be faster per step.", "吞吐升、TPOT 降。", "更大的步不会更快。"),
        ("No change: the GPU is saturated at 16.", "A 0.6B decode at 16 rows is far from saturated.", "不变：16 条时 GPU 已饱和。",
         "0.6B 模型 16 行 decode 远未饱和。"),
        ("Throughput down because of preemptions.", "The KV cache holds all 256 here: no preemption.", "吞吐下降，因为抢占。",
         "KV Cache 能放下 256 条：不抢占。")),
       cites=((H + "lab06.json", "workload.rows.0.output_tok_s", "max_num_seqs 16, tok/s"),
              (H + "lab06.json", "workload.rows.2.output_tok_s", "max_num_seqs 256, tok/s")),
       lab=L06, code="minivllm/engine/scheduler.py::Scheduler.schedule"),
    mc("lab08.b3", "continuous-batching", "KV blocks run out mid-decode. What does this engine (like vLLM V1) do?",
       "decode 中途 KV 块用完，本引擎（与 vLLM V1 一样）怎么做？",
       "Preempt the most recently admitted request: free its blocks, keep its tokens, put it at the head of the "
       "queue, and recompute its KV when blocks free up; it continues where it stopped. The recomputed KV equals "
       "the original in fp32; in bf16 it can differ by rounding and flip a near-tie (Lab 06's H200 record: 2 of 3 "
       "requests identical to a large-cache run).",
       "抢占最晚进入的请求：释放其块、保留 token、放回队首，有空块时重算其 KV，从断点继续。fp32 下重算的 KV 与原来一致；"
       "bf16 下可能因舍入不同而翻转近似平局（Lab 06 的 H200 记录：3 个请求中 2 个与大缓存时完全一致）。",
       ("Preempt the newest request by recompute; its tokens are kept.", "Right.", "以重算方式抢占最新请求，token 保留。", "对。"),
       (("Abort the request with an out-of-memory error.", "Preemption avoids that.", "以 OOM 错误终止请求。", "抢占就是为了避免它。"),
        ("Swap its KV blocks out to pinned CPU memory and copy them back when the GPU has room again.", "vLLM V0's swap; V1 recomputes.", "把 KV 换出到 CPU 内存。", "那是 V0 的 swap；V1 重算。"),
        ("Evict the oldest request's blocks.", "The newest gives way, so old requests finish.", "驱逐最早请求的块。",
         "让最新的让路，老请求才能完成。")),
       cites=((H + "lab06.json", "preemption.preemptions", "preemptions with a small cache"),
              (H + "lab06.json", "preemption.same_tokens", "requests with identical tokens")),
       lab=L06, code="minivllm/engine/scheduler.py::Scheduler._preempt"),
    mc("lab08.b4", "continuous-batching", "What does async scheduling overlap?", "异步调度重叠了什么？",
       "The CPU work of step n+1 (schedule, prepare inputs, launch) with the GPU work of step n; step n+1 takes its "
       "pending token ids from step n's sampler output on the device.",
       "第 n+1 步的 CPU 工作（调度、准备输入、发射）与第 n 步的 GPU 工作重叠；第 n+1 步的待定 token id 直接在设备上取自第 n "
       "步的采样输出。",
       ("Step n+1's CPU work with step n's GPU work.", "Right.", "第 n+1 步的 CPU 工作与第 n 步的 GPU 工作。", "对。"),
       (("Prefill and decode kernels of the same step.", "Those run in one forward.", "同一步的 prefill 与 decode kernel。",
         "它们在同一次 forward 里。"),
        ("Graph capture with serving.", "Capture happens at startup only.", "图捕获与服务。", "捕获只在启动时。"),
        ("KV-cache copies with attention.", "Not what it schedules.", "KV 拷贝与 attention。", "它调度的不是这个。")),
       cites=((H + "latency_async_vs_sync.json", "rows.0.tpot_s", "async, batch 1 TPOT s"),
              (H + "latency_async_vs_sync.json", "rows.2.tpot_s", "sync, batch 1 TPOT s")),
       lab=L01, code="minivllm/engine/llm_engine.py::LLMEngine.step"),
    mc("lab08.f1", "chunked-prefill", "A 1,536-token prompt arrives while 3 requests decode. What does chunked prefill change?",
       "3 条请求 decode 时来了 1,536 token 的 prompt，chunked prefill 改变了什么？",
       "The prompt is cut into pieces of at most the token budget, each sharing a step with the decodes, so no step "
       "holds more than the budget, and the long prompt's TTFT grows. That shortens the decoders' worst wait only "
       "where a step's time grows with its tokens. In Lab 06's H200 recording it did not: a step that is not a "
       "decode-only graph replay runs eagerly and costs about the same at any token count within a run (unchunked: "
       "26 ms for 24 tokens, 29 ms for 1,539; chunked: 44 ms for 24, 45 ms for 256), so chunking did not shorten "
       "the decoders' longest step; the chunked configuration's eager steps were even slower throughout (cause "
       "not measured): 45 ms against 29 ms. "
       "Chunking pays off where prefill time grows with tokens: larger models, longer prompts.",
       "prompt 被切成不超过 token 预算的小块，每块与 decode 同一步执行，任何一步都不超过预算，长 prompt 的 TTFT 变长。"
       "只有当一步的耗时随 token 数增长时，这才缩短 decode 最坏的等待。Lab 06 的 H200 记录里并非如此：不是纯 decode 图重放的步"
       "以 eager 运行，同一次运行里耗时几乎与 token 数无关（不分块：24 个 token 26 ms，1,539 个 29 ms；分块：24 个 44 ms，256 个 45 ms），"
       "所以分块没有缩短 decode 最长的一步；分块配置下的 eager 步反而一直更慢（原因未测）：45 ms 对 29 ms。模型更大、prompt 更长、prefill 耗时随 token 增长时，分块才划算。",
       ("It caps the tokens of every step at the budget.",
        "Right: no step held more than 256 tokens chunked (1,539 unchunked); what that does to the decoders' wait "
        "depends on whether step time grows with tokens: see the times cited.",
        "把每一步的 token 数限制在预算以内。",
        "对：分块时没有一步超过 256 个 token（不分块 1,539）；这对 decode 等待的影响取决于步耗时是否随 token 增长，见引用的时间。"),
       (("It makes the long prompt's own TTFT shorter, because each small chunk is processed faster than the whole prompt.", "Chunking spreads it over steps: TTFT grows.", "让长 prompt 的 TTFT 更短。",
         "分块分散到多步：TTFT 变长。"),
        ("It lets the prompt skip the KV cache.", "Every chunk's K/V is stored.", "让 prompt 跳过 KV Cache。", "每块的 K/V 都会存。"),
        ("It reduces the FLOPs of the prefill.", "Same tokens, same FLOPs.", "减少 prefill 的 FLOPs。", "token 一样，FLOPs 一样。")),
       cites=((H + "lab06.json", "chunked.0.max_ms_with_decodes", "chunked: longest step with decodes, ms"),
              (H + "lab06.json", "chunked.1.max_ms_with_decodes", "not chunked: longest step with decodes, ms")),
       lab=L06, code="minivllm/engine/scheduler.py::Scheduler.schedule"),
    mc("lab08.f2", "chunked-prefill", "How big is a chunk?", "一个 chunk 有多大？",
       "Whatever budget is left: max_num_batched_tokens minus the decodes already scheduled this step, or the rest of "
       "the prompt if smaller. So chunks vary step to step; they are not a fixed captured shape.",
       "剩下多少预算就多大：max_num_batched_tokens 减去本步已排的 decode，或 prompt 的剩余部分（若更小）。所以 chunk 每步不同，"
       "不是固定的捕获形状。",
       ("The token budget left after this step's decodes.", "Right.", "本步 decode 之后剩下的 token 预算。", "对。"),
       (("A fixed 512 tokens, so that each chunk matches one captured CUDA graph exactly.", "The handbook's claim; chunks vary.", "固定 512 token，作为图捕获。",
         "手册的说法；chunk 是变化的。"),
        ("One KV block.", "Blocks are storage; chunks are scheduling.", "一个 KV 块。", "块是存储单位；chunk 是调度单位。"),
        ("max_model_len / 2.", "No such rule.", "max_model_len / 2。", "没有这种规则。")),
       cites=((H + "lab06.json", "chunked.0.step_tokens", "tokens per step, chunked"),),
       lab=L06, code="minivllm/engine/scheduler.py::Scheduler.schedule"),
    mc("lab08.x1", "prefix-caching", "How does the block manager know two prompts share a prefix?",
       "block manager 怎么知道两个 prompt 有共同前缀？",
       "Each full block is hashed together with the previous block's hash (a chain), so equal hashes mean equal "
       "prefixes; the tokens are compared too, so a collision can never serve wrong K/V. The last token is always "
       "computed, because its logits are needed.",
       "每个满块的哈希链接前一块的哈希，哈希相等即前缀相等；还会比对 token，哈希碰撞也不会给出错误的 K/V。最后一个 token "
       "总要计算，因为需要它的 logits。",
       ("A hash chain over full blocks, tokens compared as well.", "Right.", "满块上的链式哈希，并比对 token。", "对。"),
       (("It compares the decoded prompt strings of the waiting request and of every cached request.", "It works on token ids, per block.", "比较 prompt 字符串。", "按块比较 token id。"),
        ("Any block with equal tokens matches, wherever it is.", "Without the chain, equal blocks after different "
         "prefixes would wrongly match.", "任何 token 相同的块都匹配，不管位置。", "没有链式哈希，不同前缀后的相同块会被错配。"),
        ("It caches partial blocks too.", "Only full blocks are hashed.", "未满的块也缓存。", "只有满块才计算哈希。")),
       cites=((H + "lab06.json", "prefix.cached_tokens", "prompt tokens served from the cache"),),
       lab=L06, code="minivllm/engine/block_manager.py::BlockManager.find_cached_prefix"),
    mc("lab08.x2", "prefix-caching", "Three running requests share a 40-token prompt (block size 8). What are the "
       "reference counts of the shared blocks?", "3 条运行中的请求共享 40 token 的 prompt（block size 8），共享块的引用计数是多少？",
       "3: the 5 full blocks of the shared prompt are held once per request. When a request finishes its count drops; "
       "at 0 the block goes to the free queue but keeps its hash until it is reused.",
       "3：共享 prompt 的 5 个满块每条请求各持有一次。请求结束时计数减一；到 0 时块进入空闲队列，但保留哈希直到被复用。",
       ("3, one per request.", "Right.", "3，每个请求一次。", "对。"),
       (("1: a cached block belongs to whoever computed it.", "Sharing takes a reference per user.", "1：缓存块属于计算它的请求。",
         "共享时每个使用者各持一个引用。"),
        ("0: cached blocks are not counted.", "Running requests hold references.", "0：缓存块不计数。", "运行中的请求持有引用。"),
        ("5, one per block.", "The count is per block, not the number of blocks.", "5，每块一个。", "计数按块计，不是块的数量。")),
       cites=((H + "lab06.json", "prefix.ref_counts", "reference counts after the first step"),),
       lab=L06, code="minivllm/engine/block_manager.py::BlockManager.admit"),
    mc("lab08.s1", "startup-caches", "In vLLM, where does the torch.compile cache live, and how do you turn it off?",
       "vLLM 的 torch.compile 缓存在哪里？如何关闭？",
       "Under $VLLM_CACHE_ROOT/torch_compile_cache (default ~/.cache/vllm), keyed by a hash of config and code; "
       "VLLM_DISABLE_COMPILE_CACHE=1 turns it off. VLLM_TORCH_COMPILE_CACHE_DIR does not exist. This engine uses "
       "MINIVLLM_CACHE_DIR.",
       "在 $VLLM_CACHE_ROOT/torch_compile_cache（默认 ~/.cache/vllm），按配置与代码的哈希分目录；VLLM_DISABLE_COMPILE_CACHE=1 "
       "关闭。VLLM_TORCH_COMPILE_CACHE_DIR 并不存在。本引擎用 MINIVLLM_CACHE_DIR。",
       ("$VLLM_CACHE_ROOT/torch_compile_cache; VLLM_DISABLE_COMPILE_CACHE=1.", "Right.",
        "$VLLM_CACHE_ROOT/torch_compile_cache；VLLM_DISABLE_COMPILE_CACHE=1。", "对。"),
       (("VLLM_TORCH_COMPILE_CACHE_DIR; unset it to disable.", "No release reads that variable.",
         "VLLM_TORCH_COMPILE_CACHE_DIR；取消设置即关闭。", "没有版本读这个变量。"),
        ("Under VLLM_TORCH_COMPILE_CACHE_DIR, next to the model weights; delete the directory to turn the cache off.", "The cache is per user, not per checkpoint.", "模型目录里，权重旁边。",
         "缓存按用户存放，不在 checkpoint 里。"),
        ("Nowhere: torch.compile never writes to disk.", "Inductor and vLLM both cache on disk.", "不存在：torch.compile 从不写盘。",
         "Inductor 和 vLLM 都在磁盘上缓存。")),
       cites=((H + "startup.json", "cold.compile.seconds", "cold compile, s"),
              (H + "startup.json", "warm.compile.seconds", "warm compile, s")),
       lab=L04, code="minivllm/config.py::CompilationConfig.resolved_cache_dir"),
    mc("lab08.s2", "startup-caches", "With gpu_memory_utilization fixed, what does --enforce-eager do to memory?",
       "gpu_memory_utilization 固定时，--enforce-eager 对显存有什么影响？",
       "It skips the graphs' pool and executables (a few hundred MiB at most here) and that memory goes to the KV cache: "
       "the total the engine takes stays the same.",
       "跳过图的显存池和可执行对象（这里最多几百 MiB），这部分显存归 KV Cache：引擎占用的总量不变。",
       ("The graphs' few hundred MiB go to the KV cache; the total is unchanged.", "Right.",
        "图的几百 MiB 归 KV Cache；总量不变。", "对。"),
       (("It saves 10-15% of GPU memory, which the process hands back to the driver for other processes.", "The total is set by gpu_memory_utilization.", "节省 10-15% 显存。",
         "总量由 gpu_memory_utilization 决定。"),
        ("It frees the whole KV cache.", "The KV cache is needed in eager mode too.", "释放整个 KV Cache。", "eager 也需要 KV Cache。"),
        ("Nothing: graphs use no memory.", "They use a pool and executables.", "没影响：图不占显存。", "图占用显存池与可执行对象。")),
       cites=((H + "latency.json", "modes.FULL.graph_free_memory_drop_mib", "free-memory drop of FULL capture, MiB"),),
       lab=L05, code="minivllm/llm.py::LLM._graph_memory_estimate"),
    mc("lab08.d1", "debugging", "Startup fails with 'cudaGraphInstantiate failed'. What do you try first?",
       "启动报 'cudaGraphInstantiate failed'，先试什么？",
       "Turn graphs off (--enforce-eager, or cudagraph_mode NONE) to confirm the graph layer is at fault; then look "
       "for the uncapturable op (host sync, dynamic shape) or shrink the capture sizes.",
       "先关图（--enforce-eager 或 cudagraph_mode NONE）确认是图这一层的问题；再找不可捕获的算子（主机同步、动态形状）或缩小"
       "捕获尺寸。",
       ("--enforce-eager (graphs off) to confirm it is the graph layer.", "Right.", "--enforce-eager（关图）确认是图的问题。", "对。"),
       (("Turn torch.compile off first.", "The message names the graph layer.", "先关 torch.compile。", "报错指明是图这一层。"),
        ("Switch the model to fp32, because graph instantiation fails on bf16 kernels.", "Precision does not make a graph capturable.", "换 fp32。", "精度不会让图变得可捕获。"),
        ("Increase gpu_memory_utilization.", "It is not an out-of-memory error.", "调大 gpu_memory_utilization。", "这不是 OOM。")),
       lab=L05, code="minivllm/compilation/diagnose.py::diagnose"),
    mc("lab08.d2", "debugging", "Greedy outputs differ between the batched run and one-by-one runs in bf16, not in "
       "fp32. What is the likely cause?", "bf16 下批量运行与逐条运行的贪心输出不同，fp32 下相同。最可能的原因？",
       "Rounding: batch-dependent kernels (GEMM tiling, split-KV) sum in different orders, and near-ties flip in "
       "bf16. In fp32 all 16 requests match; a scheduling bug would differ in fp32 too.",
       "舍入：依赖 batch 的 kernel（GEMM 分块、split-KV）累加顺序不同，bf16 下接近并列的 token 会翻转。fp32 下 16 条全部一致；"
       "若是调度 bug，fp32 也会不同。",
       ("bf16 rounding in batch-dependent kernels; fp32 matching rules out a bug.", "Right.",
        "依赖 batch 的 kernel 的 bf16 舍入；fp32 一致排除了 bug。", "对。"),
       (("A scheduler bug that mixes up the rows of different sequences in a batch.", "Then fp32 would differ too.", "调度器把序列搞混的 bug。", "那样 fp32 也会不同。"),
        ("CUDA graphs replay stale inputs.", "Then eager and fp32 would differ too.", "CUDA Graph 重放了旧输入。",
         "那样 eager 和 fp32 也会不同。"),
        ("The sampler's seed.", "Greedy sampling uses no randomness.", "采样器的种子。", "贪心采样不用随机数。")),
       cites=((H + "throughput.json", "correctness.matching", "bf16: identical requests of 16"),
              (H + "throughput.json", "correctness_fp32.matching", "fp32: identical requests of 16")),
       lab=L05, code="minivllm/bench/throughput.py::check_correctness"),
)
