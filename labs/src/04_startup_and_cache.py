# Source of labs/04_startup_and_cache.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 04

# %% [markdown]
# # Lab 04 · Startup and the compile cache · 启动耗时与编译缓存

# %% [markdown] tags=["lang-en"]
# The handbook (chapter 03, §3) says startup does four things: load the weights (*seconds to minutes*), a
# profile run (*~10 s*), torch.compile (*once per size, tens of seconds to minutes*) and CUDA graph capture
# (*a few seconds*), *1-5 minutes in total*. Its fixes: `--enforce-eager`, `{"level": 0}` (vLLM's name is now
# `{"mode": 0}`: [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)),
# a disk cache in `VLLM_TORCH_COMPILE_CACHE_DIR`, and (interview question 4) *warm-up requests that
# trigger the compile*. vLLM runs these phases in another order: its profile run is a forward that compiles the
# model, so Dynamo and Inductor run inside it
# ([vllm/v1/worker/gpu_worker.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_worker.py)
# `determine_available_memory`), and, by default since v0.20.0, the CUDA-graph memory it estimates while profiling
# is subtracted from the KV budget before the real capture (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`:
# [vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py)). This engine profiles
# eagerly, sizes the KV cache, then compiles and captures
# ([where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm)).
#
# This lab times every phase of this engine's startup, then checks each fix:
#
# - **a)** the phases for `enforce_eager`, graphs without compile (mode 0) and mode 3 + graphs, against the
#   estimates;
# - **b)** a cold start vs a warm one from the compile cache: what the cache is keyed by, where it lives,
#   what a warm start skips; and what vLLM actually calls its cache;
# - **c)** a cache entry corrupted on purpose, detected and rebuilt; a config change that misses the cache;
# - **d)** the recipes measured: `enforce_eager` (startup vs TPOT), `{"mode": 0}`, warm-up requests.
#
# Cells come in three kinds: **setup**, **recorded results** (an H200, loaded with their provenance) and
# **run it here** (the same code on your machine: a CUDA GPU, else the tiny embedded model on the CPU).

# %% [markdown] tags=["lang-zh"]
# 手册（第 03 章 §3）说启动要做四件事：加载权重（*几秒到几分钟*）、profile run（*~10 秒*）、torch.compile
# （*每个 size 一次，几十秒到几分钟*）、CUDA Graph capture（*几秒*），*总共 1-5 分钟*。给的解药是
# `--enforce-eager`、`{"level": 0}`（vLLM 现在叫 `{"mode": 0}`：
# [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)）、用
# `VLLM_TORCH_COMPILE_CACHE_DIR` 做磁盘缓存，以及（面试题 4）*启动后跑几个 dummy 请求触发编译*。vLLM 的阶段顺序不同：
# 它的 profile run 是一次会编译模型的 forward，Dynamo 和 Inductor 在其中运行
# （[vllm/v1/worker/gpu_worker.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_worker.py) 的
# `determine_available_memory`）；从 v0.20.0 起默认还会在 profile 时估算 CUDA Graph 显存，并在真正捕获之前从 KV 预算里扣掉
# （`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`：[vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py)）。
# 本引擎先 eager 地 profile、确定 KV 缓存大小，再编译和捕获
# （[minivllm 与 vLLM 的不同](../README.md#where-minivllm-differs-from-vllm)）。
#
# 本实验给这个引擎的启动逐阶段计时，再逐条验证这些解药：
#
# - **a)** `enforce_eager`、只开图不编译（mode 0）、mode 3 + 图三种配置下每个阶段的耗时，和手册的估计对比；
# - **b)** 冷启动 vs 命中编译缓存的热启动：缓存按什么做 key、存在哪、热启动跳过了什么；vLLM 真正的缓存变量叫什么；
# - **c)** 故意损坏一个缓存条目，看它被发现并重建；改一个配置，看缓存不命中；
# - **d)** 实测手册的配方：`enforce_eager`（启动时间 vs TPOT）、`{"mode": 0}`、warmup 请求。
#
# 单元格分三类：**环境准备**、**H200 实测记录**（带来源信息加载）、**在本机运行**（同一份代码：有 CUDA GPU
# 就用 GPU，否则在 CPU 上用内置的小模型）。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("04")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% tags=["nbval-check-output"]
import os
import tempfile

from IPython.display import display

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果

# %% [markdown] tags=["lang-en"]
# Two recordings. `startup.json` is `minivllm bench startup --compilation-config '{"level": 3}'` (random
# Qwen3-0.6B, default capture sizes), cold and warm, each in its own process. `lab04.json` is this lab's
# recorder, `python -m minivllm_labs.record lab04`, which runs every cell of part 3 on the GPU. They ran different
# trees and their cold / warm totals differ; the second cell says which one the book and the README quote.

# %% [markdown] tags=["lang-zh"]
# 两份记录。`startup.json` 是 `minivllm bench startup --compilation-config '{"level": 3}'`（随机权重的
# Qwen3-0.6B，默认 capture sizes）的冷启动和热启动，各在一个独立进程里。`lab04.json` 是本实验的记录器
# `python -m minivllm_labs.record lab04`，它在 GPU 上把第 3 部分的每个单元格跑一遍。两者跑的是不同的代码版本，
# 冷/热启动的总时间不同；第二个单元格说明书和 README 引用的是哪一个。

# %% tags=["nbval-check-output"]
print(lab.bench_startup_table())

# %% tags=["nbval-check-output"]
print(lab.startup_figures_text(rec))

# %% [markdown] tags=["lang-en"]
# ### a) The phases · 启动阶段
#
# One bar per phase, one colour per engine (the buttons show one engine at a time). torch.compile is split
# by PyTorch's own timers into **Dynamo** (tracing the Python bytecode into an FX graph) and **AOT autograd +
# Inductor** (the compiler backend: the split at attention, then Inductor generating and compiling kernels);
# *compile (other)* is the first run over a dummy batch. Compare each with the handbook's column, and note
# *graphs traced*: at mode 3, one graph for every batch size.
#
# The "graphs" engine is mode 0. Its compile phase is empty: Dynamo and the backend take {rec}`lab04.json:phases.graphs.phases_s.Dynamo:.0f` s and no graph is
# traced, as vLLM's mode 0 applies no torch.compile
# ([vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)). Its
# startup is almost all graph capture: without a traced graph there are no pieces, so it captures the full decode
# graphs only (FULL_DECODE_ONLY) and prefill runs eagerly. vLLM's mode 0 alone turns graphs off
# ([where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm)). The lines under the table
# read these numbers from the record.

# %% [markdown] tags=["lang-zh"]
# ### a) 启动阶段
#
# 每个阶段一根柱子，每种引擎一种颜色（按钮可以只看一种）。torch.compile 按 PyTorch 自己的计时拆成
# **Dynamo**（把 Python 字节码 trace 成 FX 图）和 **AOT autograd + Inductor**（编译器后端：在 attention 处切分，
# 再由 Inductor 生成并编译 kernel）；*compile (other)* 是编译后在 dummy batch 上的第一次运行。逐项对照手册那一栏，
# 并注意 *graphs traced*：mode 3 下所有 batch size 共用一张图。
#
# "graphs" 这个引擎是 mode 0。它的编译阶段是空的：Dynamo 和编译器后端都是 {rec}`lab04.json:phases.graphs.phases_s.Dynamo:.0f` s，没有 trace 任何图，与 vLLM 的 mode 0
# 不做任何 torch.compile 一致（[vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)）。
# 它的启动时间基本都花在 CUDA Graph 捕获上：没有 trace 出的图就没有分段，所以只捕获 decode 整图（FULL_DECODE_ONLY），
# 预填充走 eager。vLLM 单独设 mode 0 会把图关掉（[minivllm 与 vLLM 的不同](../README.md#where-minivllm-differs-from-vllm)）。
# 表格下面那几行的数字直接读自记录。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_phases(rec))
    print(lab.phases_table(rec))
    print(lab.level0_text(rec))

# %% [markdown] tags=["lang-en"]
# ### b) Cold vs warm · 冷启动与热启动
#
# The cache lives in `$MINIVLLM_CACHE_DIR/torch_compile_cache/<key>/` (default `~/.cache/minivllm`). The key is
# a hash of the compilation config, the model config, dtype, device, attention backend, max_model_len,
# block size, the torch version and a hash of the engine's source
# ([compilation/cache.py](../minivllm/compilation/cache.py) `cache_key`). An entry holds Inductor's and Triton's
# caches, plus the split FX graph Dynamo traced and each compiled piece
# ([compilation/graph_cache.py](../minivllm/compilation/graph_cache.py)), so a warm start calls them directly:
# Dynamo does not run at all. A manifest of checksums, written after a successful compile, marks the entry warm.

# %% [markdown] tags=["lang-zh"]
# ### b) 冷启动与热启动
#
# 缓存在 `$MINIVLLM_CACHE_DIR/torch_compile_cache/<key>/`（默认 `~/.cache/minivllm`）。key 是编译配置、模型配置、
# dtype、设备、attention 后端、max_model_len、block size、torch 版本和引擎源码哈希一起算出的哈希
# （[compilation/cache.py](../minivllm/compilation/cache.py) 的 `cache_key`）。一个条目里有 Inductor 和 Triton 的缓存，
# 还有 Dynamo trace 出来并切分好的 FX 图和每个编译好的分段
# （[compilation/graph_cache.py](../minivllm/compilation/graph_cache.py)），所以热启动直接调用它们，Dynamo 完全不跑。
# 编译成功后写入一份校验和清单（manifest），有它这个条目才算"热"的。

# %% tags=["nbval-check-output"]
if rec:
    lab.show(lab.plot_cold_warm(rec))
    print(lab.cache_table(rec))

# %% [markdown] tags=["lang-en"]
# **What vLLM calls it.** There is no `VLLM_TORCH_COMPILE_CACHE_DIR` in vLLM. Checked against vLLM's source:
# [vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py) defines no such variable; it defines
# `VLLM_CACHE_ROOT` (default `~/.cache/vllm`, or `$XDG_CACHE_HOME/vllm`) and `VLLM_DISABLE_COMPILE_CACHE` (default 0,
# so the cache is on; 1 turns it off).
# [vllm/compilation/backends.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/backends.py) puts the
# cache at `os.path.join(envs.VLLM_CACHE_ROOT, "torch_compile_cache", hash_key)`, the hash covering env, config,
# code and compiler factors, with one `rank_<rank>_<dp_rank>/<prefix>` directory per worker below it. vLLM's design
# note on torch.compile
# ([docs/design/torch_compile.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/torch_compile.md)) says
# that copying `~/.cache/vllm/torch_compile_cache` to another machine saves the compile. The handbook's variable
# name is simply wrong; its advice (keep the cache) is right, and needs no variable at all.

# %% [markdown] tags=["lang-zh"]
# **vLLM 里它叫什么。** vLLM 没有 `VLLM_TORCH_COMPILE_CACHE_DIR`。对照 vLLM 源码：
# [vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py) 里没有这个变量，定义的是
# `VLLM_CACHE_ROOT`（默认 `~/.cache/vllm`，或 `$XDG_CACHE_HOME/vllm`）和 `VLLM_DISABLE_COMPILE_CACHE`（默认 0，即缓存开启；
# 设为 1 关闭）。[vllm/compilation/backends.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/backends.py)
# 把缓存放在 `os.path.join(envs.VLLM_CACHE_ROOT, "torch_compile_cache", hash_key)`，哈希覆盖环境、配置、代码和编译器几类因素，
# 其下每个 worker 一个 `rank_<rank>_<dp_rank>/<prefix>` 目录。vLLM 的 torch.compile 设计文档
# （[docs/design/torch_compile.md](https://github.com/vllm-project/vllm/blob/v0.33.0/docs/design/torch_compile.md)）写明
# 把 `~/.cache/vllm/torch_compile_cache` 拷到别的机器就能省掉编译。
# 手册的变量名是错的；它的建议（保留缓存）是对的，而且根本不需要设任何变量。

# %% [markdown] tags=["lang-en"]
# ### c) A corrupted entry, and config changes · 缓存损坏与配置变化
#
# The recorder flips bytes in the largest file of the warm entry, then starts again. The manifest no longer
# matches: the engine says so, clears the entry and compiles cold. Then `seed=1` (not in the key: a hit) and a
# halved `max_model_len` (in the key: a new entry, cold).

# %% [markdown] tags=["lang-zh"]
# ### c) 缓存损坏与配置变化
#
# 记录器把热条目里最大的文件翻转若干字节，再启动一次。清单对不上了：引擎报告损坏、清掉条目、重新冷编译。
# 然后换 `seed=1`（不在 key 里：命中）和把 `max_model_len` 减半（在 key 里：新条目，冷启动）。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.faults_table(rec))

# %% [markdown] tags=["lang-en"]
# ### d) The recipes · 配方实测
#
# `enforce_eager` starts fastest and decodes slowest (the TPOT row of the phase table). `{"mode": 0}` (vLLM's name:
# vLLM deprecated `level` for `mode`, [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py);
# this engine still accepts `level`, with a deprecation warning) compiles nothing and, in this engine, still
# captures the full decode graphs on a GPU. In vLLM, `-O0` turns graphs off as well, but an explicit `{"mode": 0}`
# only drops what needs mode 3's split: `VllmConfig._normalize_piecewise_cudagraph_mode` turns the default
# FULL_AND_PIECEWISE into FULL_DECODE_ONLY (`CUDAGraphMode.without_piecewise()`; only PIECEWISE becomes NONE), since
# full graphs need no compile ([vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)). This engine does the same. The engine's default is mode 3,
# as vLLM's ([vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)); the lines
# under the phase table (part a) give mode 0's startup and TPOT beside eager and mode 3. Mode 3 asked for by name
# decodes slower there than mode 0: naming a compile mode hands the small ops to Inductor's generated code, as
# vLLM does (custom ops are off under Inductor unless listed in `custom_ops`,
# [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)),
# while this engine's default, which names no mode, keeps its hand-written kernels inside mode 3's pieces
# (Lab 03 measures both builds). And the warm-up recipe:
# requests of five new (batch, prompt length) shapes after startup, with the engine's symbolic-batch compile and
# with stock `torch.compile` (mode 1 with backend "eager": Dynamo only).

# %% [markdown] tags=["lang-zh"]
# ### d) 配方实测
#
# `enforce_eager` 启动最快、解码最慢（看阶段表里的 TPOT 一行）。`{"mode": 0}`（vLLM 的叫法：vLLM 已弃用 `level`、改用 `mode`，
# [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)；本引擎仍接受
# `level`，但会给出弃用警告）什么都不编译，在本引擎里 GPU 上照样捕获 decode 整图。在 vLLM 里 `-O0` 会连图一起关掉；但显式写
# `{"mode": 0}` 时只去掉需要 mode 3 切分的部分：`VllmConfig._normalize_piecewise_cudagraph_mode` 把默认的 FULL_AND_PIECEWISE
# 改成 FULL_DECODE_ONLY（`CUDAGraphMode.without_piecewise()`；只有 PIECEWISE 变成 NONE），因为整图不需要编译
# （[vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)）。本引擎做法相同。本引擎的默认是 mode 3，与 vLLM 相同
# （[vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)）；mode 0 和 eager、mode 3
# 并列的启动时间与 TPOT 见 a) 部分阶段表下面那几行。显式指定 mode 3 时解码反而比 mode 0 慢：一旦指定编译模式，小算子就交给
# Inductor 生成的代码，这与 vLLM 相同（用 Inductor 时 custom op 默认关闭，除非在 `custom_ops` 里列出，
# [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)）；而本引擎不指定
# mode 的默认配置会在 mode 3 的各段里保留手写 kernel（Lab 03 测了这两种构建）。warmup 配方：启动后发五种新的
# （batch, prompt 长度）请求，分别看引擎的符号化 batch 编译和原生 `torch.compile`（mode 1，backend 为 "eager"，
# 只跑 Dynamo）会不会重编译。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.warmup_table(rec))
    print(rec["recipes"])

# %% tags=["nbval-ignore-output"] id="04-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here
# (a series per device) with the device each verdict rests on.
lab.compare()

# %% [markdown]
# ## 3. Run it here · 在本机运行

# %% tags=["nbval-ignore-output"] id="04-toggle"
# Live toggle · 实时开关: click an option; the engine re-runs with it and the figure is redrawn (CPU or GPU).
lab.toggle()

# %% [markdown] tags=["lang-en"]
# The same measurements on your device, in a private cache directory (so nothing you have cached is touched
# and the first compile is really cold). On a CPU there are no CUDA graphs, so "graphs" is eager at mode 0
# there, and the mode-3 compile generates C++ instead of Triton. Outputs are timings: they change run to run.

# %% [markdown] tags=["lang-zh"]
# 在你的设备上做同样的测量，用一个私有的缓存目录（不碰你已有的缓存，第一次编译也确实是冷的）。CPU 上没有 CUDA Graph，
# 所以那里的 "graphs" 就是 mode 0 的 eager，mode 3 编译生成的是 C++ 而不是 Triton。输出是计时，每次都会变。

# %% tags=["nbval-ignore-output"]
os.environ["MINIVLLM_CACHE_DIR"] = tempfile.mkdtemp(prefix="minivllm-lab04-")
model = lab.model()
print(lab.describe_model(model))
LEVEL = 3
modes = {"eager": {"enforce_eager": True}, "graphs": {"compilation_config": {"mode": 0}},
         "level 3 + graphs": {"compilation_config": {"mode": LEVEL}}}
tpot = {"new_tokens": 32, "reps": 3} if lab.device.kind == "cuda" else {"new_tokens": 8, "reps": 1}
here = {"level": LEVEL}
here["phases"], entry = lab.startup_phases(model, modes, tpot)
lab.show(lab.plot_phases(here))
print(lab.phases_table(here))

# %% [markdown] tags=["lang-en"]
# The warm start. On a GPU it runs in a new Python process, like a restarted server; on a CPU it runs in this
# one, to keep the notebook short (a new process also pays torch's import and reloads Inductor's C++ kernels).

# %% [markdown] tags=["lang-zh"]
# 热启动。GPU 上在一个新的 Python 进程里启动，就像重启服务；CPU 上为了让 notebook 跑得快，就在当前进程里
# （新进程还要付 import torch 的时间，并重新加载 Inductor 的 C++ kernel）。

# %% tags=["nbval-ignore-output"]
here["cache"] = lab.cold_warm(model, here["phases"]["level 3 + graphs"], entry, LEVEL,
                                new_process=lab.device.kind == "cuda")
lab.show(lab.plot_cold_warm(here))
print(lab.cache_table(here))

# %% tags=["nbval-ignore-output"]
here["faults"] = lab.cache_faults(model, entry, LEVEL)
print(lab.faults_table(here))

# %% tags=["nbval-ignore-output"]
here["level0"] = lab.level0(here["phases"]["graphs"])
here["warmup"] = lab.warmup(model, LEVEL)
print(lab.level0_text(here))
print(lab.warmup_table(here))

# %% [markdown]
# ## 4. Interview question 4 and the level-0 claim · 面试题 4 与 level 0

# %% [markdown] tags=["lang-en"]
# Pick an answer and press *Check*: the feedback gives our model answer and the numbers measured above
# (recorded GPU results when present, else yours). In Python:
# `from minivllm_labs import grade; print(grade(lab.Q4, "A", rec or here)[1])`.

# %% [markdown] tags=["lang-zh"]
# 选一个答案再点 *Check*：反馈里有我们的参考答案和上面测到的数字（有 GPU 记录就用记录，否则用你本机的）。
# 在 Python 里：`from minivllm_labs import grade; print(grade(lab.Q4, "A", rec or here)[1])`。

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q4, rec or here)

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_LEVEL0, rec or here)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab04.q4.** Compile happens once at startup for a symbolic batch, so warm-up requests trigger nothing; keep the
# compile cache ($VLLM_CACHE_ROOT/torch_compile_cache in vLLM: [vllm/compilation/backends.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/backends.py); MINIVLLM_CACHE_DIR here) so a
# restart is warm;
# enforce_eager only where startup matters more than TPOT.
#
# **lab04.q_level0.** Yes for decode: in vLLM the key is mode, mode 0 runs no torch.compile, and the default
# FULL_AND_PIECEWISE becomes FULL_DECODE_ONLY (its piecewise half needs mode 3, its full half no compile): decode keeps
# its graphs, prefill runs eagerly ([vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)). This engine does the same, with an empty compile
# phase.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab04.q4.** 编译在启动时按符号化 batch 做一次，warmup 请求触发不了什么；保留编译缓存（vLLM 是
# $VLLM_CACHE_ROOT/torch_compile_cache：[vllm/compilation/backends.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/compilation/backends.py)；这里是 MINIVLLM_CACHE_DIR）让重启变成热启动；只有启动比 TPOT
# 更要紧时才 enforce_eager。
#
# **lab04.q_level0.** 对 decode 而言是：vLLM 里 key 叫 mode，mode 0 不跑 torch.compile，默认的 FULL_AND_PIECEWISE
# 变成 FULL_DECODE_ONLY（分段那一半需要 mode 3，整图那一半不需要编译）：decode 保留图，预填充走 eager
# （[vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)）。本引擎做法相同，编译阶段为空。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 5. Try it yourself · 动手试试
#
# **1.** Which of `block_size=32`, `max_num_seqs=4`, `compilation_config={"mode": 3, "custom_ops": ["all"]}`
# miss the cache entry made above? Predict, then start each with `lab.start(model, ...)` and read
# `llm.startup_report().compile["cache_warm"]`.
# *Hint:* read `cache_key` in [compilation/cache.py](../minivllm/compilation/cache.py).
#
# <details><summary>Solution · 参考答案</summary>
#
# `block_size` and the compilation config (`custom_ops`) are in the key: both start cold in a new entry.
# `max_num_seqs` is not: the graph is traced for a symbolic number of tokens, so the same entry serves any
# batch limit, and the start is warm.
# </details>
#
# **2.** Corrupt `graph.json` instead of the largest file (edit one character). What happens, and why is it
# not a crash? *Hint:* the manifest covers every file of the entry.
#
# <details><summary>Solution · 参考答案</summary>
#
# The checksum of `graph.json` no longer matches the manifest, so `CompileCache.open` logs "corrupted",
# clears the entry and the start compiles cold. A file that passed the manifest but failed to load would
# also not crash: `compile_model` traces again with Dynamo and rewrites the entry.
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 5. 动手试试
#
# **1.** `block_size=32`、`max_num_seqs=4`、`compilation_config={"mode": 3, "custom_ops": ["all"]}` 里哪些会让上面
# 建好的缓存条目不命中？先预测，再用 `lab.start(model, ...)` 逐个启动，看 `llm.startup_report().compile["cache_warm"]`。
# *提示：* 读 [compilation/cache.py](../minivllm/compilation/cache.py) 里的 `cache_key`。
#
# <details><summary>Solution · 参考答案</summary>
#
# `block_size` 和编译配置（`custom_ops`）都在 key 里：两者都在新条目里冷启动。`max_num_seqs` 不在：图是按符号化的
# token 数 trace 的，同一个条目适用于任何 batch 上限，所以是热启动。
# </details>
#
# **2.** 改坏 `graph.json`（改一个字符）而不是最大的文件，会怎样？为什么不会崩？*提示：* 清单覆盖条目里的每个文件。
#
# <details><summary>Solution · 参考答案</summary>
#
# `graph.json` 的校验和与清单不符，`CompileCache.open` 报告损坏、清空条目，这次启动冷编译。即使某个文件通过了清单
# 校验却加载失败，也不会崩：`compile_model` 会重新用 Dynamo trace 并重写条目。
# </details>

# %% tags=["nbval-ignore-output"]
# Exercise 1: add the other two settings to the tuple and run (each start says whether it hit the cache).
# A setting's own compilation_config replaces the default one below instead of being passed twice.
for extra in ({"max_num_seqs": 4},):
    llm = lab.start(model, **{"compilation_config": {"mode": LEVEL}, **extra})
    print(extra, "cache_warm:", llm.startup_report().compile.get("cache_warm"))
    llm.shutdown()

# %% [markdown]
# ## 6. Summary of verdicts · 结论

# %% [markdown] tags=["lang-en"]
# Each claim of §3 and interview question 4, its verdict, the number that decides it and the results file it
# comes from (`lab04.json`, this lab's H200 record).

# %% [markdown] tags=["lang-zh"]
# §3 和面试题 4 的每条说法、结论、决定结论的那个数字以及它所在的结果文件（`lab04.json`，本实验在 H200 上的记录）。

# %% [markdown] tags=["lang-en"]
# **Verdict.** The handbook's startup budget is partly right: its phases are the real ones, but their sizes are not.
# In this engine the profile run is a single forward of well under a second, not 10 s; torch.compile traces once for a
# symbolic batch size, not once per size (as vLLM compiles one graph for a general shape:
# [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)), and a warm
# cache skips most of it; graph capture does take seconds. The cache variable it names, VLLM_TORCH_COMPILE_CACHE_DIR,
# does not exist in vLLM (the cache lives under VLLM_CACHE_ROOT:
# [vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py)). Mode (level) 0 turns compile off (the
# record's mode-0 start runs no Dynamo and traces no graph), and in vLLM it turns graphs off too unless cudagraph_mode
# FULL_DECODE_ONLY is asked for
# ([vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)); this engine keeps those
# decode graphs by itself ([where minivllm differs from vLLM](../README.md#where-minivllm-differs-from-vllm)). Warm-up
# requests trigger no compile; --enforce-eager starts fastest and runs slowest.

# %% [markdown] tags=["lang-zh"]
# **结论。** 手册的启动耗时部分正确：阶段是对的，各阶段的量级不对。在本引擎里 profile run
# 只是一次不到一秒的前向，不是 10 s；torch.compile 对符号化的 batch size 只 trace
# 一次，而不是每个尺寸一次（vLLM 同样按通用 shape 编译一张图：
# [vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)），编译缓存命中时大部分都省掉；
# CUDA Graph 捕获确实要几秒。它提到的缓存变量 VLLM_TORCH_COMPILE_CACHE_DIR 在 vLLM 里不存在（编译缓存在
# VLLM_CACHE_ROOT 下：[vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py)）。mode（level）0 关掉
# compile（记录里 mode 0 的启动不跑 Dynamo，也不 trace 任何图）；在 vLLM 里除非另设 cudagraph_mode FULL_DECODE_ONLY，它连图也一起关掉
# （[vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)），本引擎则自己保留这些
# decode 图（[minivllm 与 vLLM 的不同](../README.md#where-minivllm-differs-from-vllm)）。预热请求不会触发编译；
# --enforce-eager 启动最快、运行最慢。

# %% tags=["nbval-check-output"]
print(lab.verdicts_table(lab.CLAIMS, rec, lab.RESULTS))

# %% [markdown] tags=["lang-en"]
# **In the engine:** startup in order in [worker/worker.py](../minivllm/worker/worker.py) `Worker.start`; the timed
# phases in [worker/startup.py](../minivllm/worker/startup.py)
# `StartupReport.phase`; Dynamo vs Inductor timers in [compilation/report.py](../minivllm/compilation/report.py)
# `split_dynamo_inductor`; the cache key, manifest and rebuild in
# [compilation/cache.py](../minivllm/compilation/cache.py) `cache_key`, `CompileCache.open`; the saved graph that
# lets a warm start skip Dynamo in [compilation/graph_cache.py](../minivllm/compilation/graph_cache.py).

# %% [markdown] tags=["lang-zh"]
# **引擎代码：** 启动顺序见 [worker/worker.py](../minivllm/worker/worker.py) 的 `Worker.start`；计时的阶段见
# [worker/startup.py](../minivllm/worker/startup.py) 的 `StartupReport.phase`；Dynamo 与 Inductor 的拆分计时见
# [compilation/report.py](../minivllm/compilation/report.py) 的 `split_dynamo_inductor`；缓存 key、清单和重建见
# [compilation/cache.py](../minivllm/compilation/cache.py) 的 `cache_key`、`CompileCache.open`；让热启动跳过 Dynamo 的图缓存见
# [compilation/graph_cache.py](../minivllm/compilation/graph_cache.py)。
