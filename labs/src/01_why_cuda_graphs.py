# Source of labs/01_why_cuda_graphs.ipynb. Edit this file, then regenerate: python -m minivllm.labs.build 01

# %% [markdown]
# # Lab 01 · Why CUDA graphs
# **为什么需要 CUDA Graph**
#
# The handbook (chapter 03) argues: *a kernel launch costs 5-10 µs; an 80-layer model launches 1000+
# kernels per forward; so in a 20 ms decode step, 25-50% is launch overhead, and a CUDA graph removes it.*
#
# Each step of that argument can be measured, and one of them is wrong. This lab measures:
#
# - **a)** what one launch costs: N tiny ops issued eagerly vs one replay of the same ops captured in a graph;
# - **b)** how many ops and kernels one decode step of this engine issues, per layer and per step;
# - **c)** whether a decode step is CPU-bound or GPU-bound, and how much a graph saves in each case;
# - **d)** the engine's time per output token (TPOT), eager vs CUDA graphs.
#
# It ends with two of the handbook's self-test questions, graded, next to these measurements.
#
# The cells come in four kinds: **setup**; **recorded results** (measured once on an H200, loaded from
# `assets/results/h200/lab01.json` with their provenance); **run it here** (the same code on your device: a
# CUDA GPU, else a tiny CPU configuration); **GPU only** (they say so and do nothing on a CPU).

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from IPython.display import display

from minivllm.labs import (RecordedResultsMissing, describe_model, describe_provenance, detect_device,
                           gpu_only, lab01, lab_model, load_recorded, quiz_widget)

device = detect_device()
print(device)

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果
#
# `load_recorded` refuses a results file without its provenance (GPU, torch version, commit, date and the
# command that produced it), so every number below can be traced and re-measured with that command.

# %% tags=["nbval-check-output"]
try:
    rec = load_recorded("lab01")
    print(describe_provenance(rec))
except RecordedResultsMissing as e:
    rec = None
    print(e)

# %% [markdown]
# ### a) What one launch costs · 一次 launch 的开销
#
# 1,000 calls of `x.add_(1)` on a one-element tensor: the op does no real work, so the eager time per op is
# the launch path (Python, PyTorch's dispatcher, the CUDA driver). Captured in a CUDA graph, the CPU submits
# all 1,000 kernels with a single call; what remains per op is the GPU's own cost of running a kernel.

# %% tags=["nbval-check-output"]
lab01.plot_launch(rec) if rec else None

# %% [markdown]
# ### b) How many launches per decode step · 每步多少个 kernel
#
# `torch.profiler` around one `engine.step()` of an eager engine. *Ops dispatched* are the calls Python
# makes (`aten::linear` counts once, even though it calls `aten::addmm` inside); *GPU kernels* are what the
# GPU runs. Multiply by 80 layers to check the handbook's "1000+ kernels per forward".

# %% tags=["nbval-check-output"]
if rec:
    print(lab01.census_table(rec))

# %% [markdown]
# ### c) CPU-bound or GPU-bound? · CPU 瓶颈还是 GPU 瓶颈？
#
# Kernel launches are **asynchronous**: Python enqueues kernels while the GPU runs earlier ones. So an
# eager step takes about `max(CPU enqueue time, GPU time)`, and a graph (which makes the CPU part almost
# free) can save at most the **exposed** CPU time, `max(0, enqueue - GPU)`, not the whole launch overhead.
#
# For each batch size the recorder measures one decode forward of the model: the CPU time to enqueue it,
# the GPU time of its kernels run back to back (the GPU is parked in a spin kernel while the CPU enqueues),
# the eager wall time and the replay time of the same forward captured as a graph. Check: does *saved*
# follow *exposed CPU*? At which batch size does the GPU time overtake the enqueue time?

# %% tags=["nbval-check-output"]
lab01.plot_bound(rec) if rec else None

# %% tags=["nbval-check-output"]
if rec:
    print(lab01.bound_table(rec))

# %% [markdown]
# ### d) The engine's TPOT, eager vs graphs · 引擎 TPOT：eager 与 CUDA Graph
#
# Time per output token of the whole engine (scheduler, input preparation, forward, sampling) with
# `enforce_eager=True` and with FULL decode graphs. The buttons show one mode at a time.
#
# On a GPU both engines also run with *async scheduling* (on by default with CUDA): the CPU schedules and
# prepares step n+1 while the GPU still runs step n. A graph removes the launch cost; async scheduling hides
# the CPU work that is left around the forward, so with both the TPOT approaches the GPU time of a step.
# Compare with it off: `minivllm bench latency --modes FULL,FULL+sync` (the table prints GPU ms per step).

# %% tags=["nbval-check-output"]
lab01.plot_tpot(rec) if rec else None

# %% [markdown]
# ## 3. Run it here · 在本机运行
#
# The same measurements on your device. On a CPU there are no CUDA graphs: you see the eager side only
# (and a CPU op costs far less to launch than a CUDA kernel, because no driver is involved). The model is
# the embedded `minivllm-tiny` when present, else a random-weight tiny checkpoint. Outputs here are timings,
# so they differ from run to run.

# %% tags=["nbval-ignore-output"]
here = {"launch_overhead": lab01.launch_overhead()}
lab01.plot_launch(here)

# %% tags=["nbval-ignore-output"]
model = lab_model()
print(describe_model(model))
eager = lab01.make_llm(model, graphs=False)
here["census"] = lab01.kernel_census(eager)
print(lab01.census_table(here))

# %% tags=["nbval-ignore-output"]
llms = {"eager": eager}
if device.kind == "cuda":
    llms["graphs"] = lab01.make_llm(model, graphs=True)
here["tpot"] = lab01.engine_tpot(llms)
lab01.plot_tpot(here)

# %% [markdown]
# ## 4. GPU only · 仅限 GPU
#
# The CPU/GPU split of c) needs a GPU's asynchronous stream, and a model large enough for the GPU to have
# work: a random-weight Qwen3-0.6B (28 layers). Then a live toggle runs the engine in either mode.

# %% tags=["nbval-skip"] id="gpu-bound-sweep"
if gpu_only("The CPU-bound vs GPU-bound sweep"):
    big = lab01.make_llm(lab_model("qwen3-0.6b"), graphs=False, max_num_seqs=256)
    here["bound"] = lab01.bound_sweep(big)
    del big
    lab01.free_memory()
    display(lab01.plot_bound(here))
    print(lab01.bound_table(here))

# %% tags=["nbval-skip"] id="gpu-tpot-toggle"
if gpu_only("The live eager / graphs toggle"):
    display(lab01.tpot_toggle(llms))

# %% [markdown]
# ## 5. Self-test · 自检
#
# Two of the handbook's self-test questions. Pick an answer and press *Check*: the feedback gives the
# handbook's model answer and the numbers this lab measured (recorded GPU results when present, else yours).
# Without widgets, grade a letter directly:
# `from minivllm.labs import grade; print(grade(lab01.Q1, "C", rec or here)[1])`.
#
# **Q1.** A decode step takes 20 ms, of which 5 ms is kernel-launch overhead. What can a CUDA graph give?

# %% tags=["nbval-ignore-output"]
quiz_widget(lab01.Q1, rec or here)

# %% [markdown]
# **Q4.** When the batch size changes, why does the engine pad to a captured size instead of re-capturing?

# %% tags=["nbval-ignore-output"]
quiz_widget(lab01.Q4, rec or here)

# %% [markdown]
# ### Model answers, next to the measurements · 参考答案与实测
#
# Read after answering. The recorded GPU numbers first, then the ones measured here.

# %% tags=["nbval-check-output"]
for q in (lab01.Q1, lab01.Q4):
    print(f"{q.qid.upper()}: {q.model_answer}\n{q.evidence(rec)}\n")

# %% tags=["nbval-ignore-output"]
for q in (lab01.Q1, lab01.Q4):
    print(f"{q.qid.upper()} (here): {q.evidence(here)}\n")
