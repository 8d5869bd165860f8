# Source of labs/05_fallback_ladder.ipynb. Edit this file, then regenerate: python -m minivllm_labs.build 05

# %% [markdown]
# # Lab 05 · When to turn it off, and the fallback ladder · 什么时候关掉，以及降级路径

# %% [markdown] tags=["lang-en"]
# The handbook's §4.6 gives a ladder for when startup or a run goes wrong: if the error comes from
# `capture_model`, turn CUDA graphs off; if it comes from torch.compile, turn compile off; if the run succeeds
# but the result is wrong, turn both off; still failing, reproduce in fp32 at a small batch and find the op.
# It reads the layer from the message: `cudaGraphExec*` means graphs, `inductor` / `dynamo` / FX means
# compile, silence means numerics. §4.5 lists six situations in which to run eagerly from the start.
#
# Here every rung gets a real fault, planted in one decoder layer of the model (`lab.inject`), diagnosed
# with `minivllm.diagnose(exc)` and walked by the engine itself with `LLM(..., fallback="auto")`:
#
# - **a capture fault**: a `.item()` (a host sync) in the forward, legal eagerly, illegal inside a CUDA graph
#   capture (needs a GPU: on a CPU it is replayed from the H200 record);
# - **a compile fault**: a Python `if` on a tensor's value, which Dynamo cannot trace with `fullgraph=True`;
# - **a silent numerics fault**: a layer whose traced program differs from its eager code: wrong tokens, no
#   error. Found with `verify=True`, then located layer by layer in fp32 at batch 2.
#
# Then §4.6's message rules are checked against the real messages, self-test question 3 is graded, and
# each row of §4.5 is tied to a measurement.

# %% [markdown] tags=["lang-zh"]
# 手册 §4.6 给了一条出错时的降级路径：报错来自 `capture_model` 就关 CUDA Graph；来自 torch.compile 就关 compile；
# 能跑但结果错就两个都关；还不行就用 fp32、小 batch 复现，定位到具体 op。判断是哪一层靠错误信息：有 `cudaGraphExec*`
# 是图的问题，有 `inductor` / `dynamo` / FX 是编译的问题，不报错是数值问题。§4.5 列了六种一开始就该 eager 跑的场景。
#
# 这里给降级路径的每一级都造一个真实的故障，植入模型的某一个 decoder 层（`lab.inject`），用
# `minivllm.diagnose(exc)` 诊断，再让引擎自己用 `LLM(..., fallback="auto")` 逐级降级：
#
# - **捕获故障**：forward 里一个 `.item()`（host 同步），eager 下合法，CUDA Graph 捕获时非法（需要 GPU；CPU 上从 H200 记录回放）；
# - **编译故障**：对张量的值做 Python `if`，Dynamo 在 `fullgraph=True` 下无法 trace；
# - **无声数值故障**：某层 trace 出来的程序和它的 eager 代码不一样：token 错了但不报错。用 `verify=True` 发现，
#   再用 fp32、batch 2 逐层定位。
#
# 然后用真实的错误信息检验 §4.6 的判断技巧，给自检第 3 题打分，并把 §4.5 的每一行都落到一个测量上。

# %% [markdown]
# ## 1. Setup · 环境准备

# %% tags=["nbval-check-output"]
from minivllm_labs import open_lab

lab = open_lab("05")  # the device, and where the recorded H200 numbers come from
rec = lab.rec

# %% tags=["nbval-check-output"]
import os
import tempfile

from IPython.display import HTML, display

from minivllm_labs import lab04  # the other lab this one reuses

# %% [markdown]
# ## 2. Recorded on an H200 · H200 实测结果

# %% [markdown] tags=["lang-en"]
# `python -m minivllm_labs.record lab05` plants each fault in a random-weight Qwen3-0.6B on the GPU. First
# the capture fault, which only a GPU can produce: the driver's own error, what `diagnose` made of it, and
# the ladder the engine walked (highlighted: the path through §4.6's flowchart).

# %% [markdown] tags=["lang-zh"]
# `python -m minivllm_labs.record lab05` 在 GPU 上把每个故障植入随机权重的 Qwen3-0.6B。先看只有 GPU 才能产生的捕获故障：
# 驱动报的原始错误、`diagnose` 的判断、引擎走过的降级路径（高亮的是它在 §4.6 流程图里走的路）。

# %% tags=["nbval-check-output"]
if rec:
    print(lab.fault_summary(rec["faults"]["graph"], "capture"))
    if rec["faults"]["graph"]:
        display(HTML(lab.ladder_html(rec["faults"]["graph"], "capture fault (H200)")))

# %% [markdown] tags=["lang-en"]
# The other two faults, as recorded on the H200. Note which rung fixed each one. The numerics fault (a layer traced
# wrong at mode 2) survived "CUDA graphs off" and was fixed by "torch.compile off": mode 0 runs no Dynamo at all, as
# in vLLM ([vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)),
# where a graph mode loses what needs mode 3's split: PIECEWISE becomes NONE and FULL_AND_PIECEWISE becomes
# FULL_DECODE_ONLY (`CUDAGraphMode.without_piecewise()`, [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)). This engine does
# the same, so its full decode graphs stay at mode 0. The compile fault branches on a
# tensor's value, which reads it back on the host, and no CUDA graph can capture that either: `diagnose()` reads
# "Data-dependent branching" in the error and sends the ladder straight to "both off", skipping the two rungs that
# could not fix it.

# %% [markdown] tags=["lang-zh"]
# 另外两个故障在 H200 上的记录。注意各由哪一级修好。数值故障（mode 2 下某层 trace 错了）在"关 CUDA Graph"后仍在，
# "关 torch.compile"才修好：mode 0 完全不跑 Dynamo，与 vLLM 相同
# （[vllm/config/compilation.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/compilation.py)）；vLLM 里需要 mode 3
# 切分的部分此时会去掉：PIECEWISE 变成 NONE，FULL_AND_PIECEWISE 变成 FULL_DECODE_ONLY
# （`CUDAGraphMode.without_piecewise()`，[vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)）。
# 本引擎做法相同，mode 0 下 decode 整图仍在。编译故障按 tensor 的值分支，要把值读回 host，
# CUDA Graph 同样捕获不了：`diagnose()` 在错误里读到 "Data-dependent branching"，让降级直接走到"两个都关"，跳过两个修不好它的台阶。

# %% tags=["nbval-check-output"]
if rec:
    for name in ("compile", "numerics"):
        print(lab.fault_summary(rec["faults"][name], name), "\n")
    print(lab.heuristics_table(rec))

# %% tags=["nbval-ignore-output"] id="05-devices"
# Your GPU beside the H200 · 你的 GPU 与 H200 并排: after `make labs-record` on any CUDA GPU, its records appear here
# (a series per device) with the device each verdict rests on.
lab.compare()

# %% [markdown]
# ## 3. Run it here · 在本机运行

# %% tags=["nbval-ignore-output"] id="05-toggle"
# Live toggle · 实时开关: click an option; the engine re-runs with it and the figure is redrawn (CPU or GPU).
lab.toggle()

# %% [markdown] tags=["lang-en"]
# The faults planted for real on your device (outputs differ from run to run only in their timings; on a CPU
# the engine has no CUDA graphs, so for the silent fault "CUDA graphs off" changes nothing there and fails like the
# first rung).

# %% [markdown] tags=["lang-zh"]
# 在你的设备上真实植入故障（每次运行只有计时会变；CPU 上引擎没有 CUDA Graph，所以对无声故障，"关 CUDA Graph"那一级
# 什么也没改变，和第一级一样失败）。

# %% tags=["nbval-ignore-output"]
os.environ["MINIVLLM_CACHE_DIR"] = tempfile.mkdtemp(prefix="minivllm-lab05-")
model = lab.model()
print(lab.describe_model(model))
here = {"faults": {}}
if lab.device.kind == "cuda":
    here["faults"]["graph"] = lab.fault_run(model, "host_sync")
    display(HTML(lab.ladder_html(here["faults"]["graph"], "capture fault, here")))
else:
    print("The capture fault needs a CUDA GPU: it is replayed from the H200 record in part 2.")

# %% [markdown] tags=["lang-en"]
# ### The compile fault · 编译故障
#
# `if out.abs().amax() > 1e9:` in layer 1, the engine at mode 3. Read the error: Dynamo names the
# data-dependent branch and the line. `diagnose` sees `torch._dynamo` and says *compile*. In vLLM the same fault
# stops startup the same way: every mode that runs Dynamo (1-3) compiles with `fullgraph=True`
# ([vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)).

# %% [markdown] tags=["lang-zh"]
# ### 编译故障
#
# 第 1 层里有 `if out.abs().amax() > 1e9:`，引擎用 mode 3。读一下错误：Dynamo 指出了依赖数据的分支和所在行。
# `diagnose` 看到 `torch._dynamo`，判断为 *compile*。在 vLLM 里同样的故障也会这样让启动失败：凡是跑 Dynamo 的模式（1-3）都用
# `fullgraph=True` 编译（[vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)）。

# %% tags=["nbval-ignore-output"]
here["faults"]["compile"] = lab.fault_run(model, "untraceable")
print(lab.fault_summary(here["faults"]["compile"], "compile"))
display(HTML(lab.ladder_html(here["faults"]["compile"], "compile fault, here")))

# %% [markdown] tags=["lang-en"]
# ### The silent fault · 无声数值故障
#
# Layer 1 computes `-out` when traced and `out` when eager (a stand-in for a compiler bug, a fake kernel that
# disagrees with the real one, or a custom op traced wrongly). Mode 2 starts without a word; the greedy
# tokens differ from an eager engine's. `verify=True` runs a greedy probe through both paths at startup and
# raises `NumericsError`; `fallback="auto"` then walks the ladder until the probe agrees.

# %% [markdown] tags=["lang-zh"]
# 第 1 层在 trace 时算 `-out`，eager 时算 `out`（代表编译器 bug、和真实 kernel 不一致的 fake 实现，或被错误 trace 的自定义 op）。
# mode 2 启动时一声不吭，贪心解码的 token 却和 eager 引擎不同。`verify=True` 在启动时让一个贪心探针走两条路径，
# 不一致就抛 `NumericsError`；`fallback="auto"` 再逐级降级，直到探针一致。

# %% tags=["nbval-ignore-output"]
here["faults"]["numerics"] = lab.fault_run(model, "mistraced")
print(lab.fault_summary(here["faults"]["numerics"], "numerics"))
display(HTML(lab.ladder_html(here["faults"]["numerics"], "silent fault, here")))

# %% [markdown] tags=["lang-en"]
# ### fp32, a small batch, layer by layer · fp32、小 batch、逐层定位
#
# The last rung of §4.6. Each decoder layer runs twice on the same fp32 inputs (batch 2): eagerly and traced
# by Dynamo (backend "eager": no Inductor, so only the tracing differs). The first layer whose output differs
# is the culprit; its sub-modules agree, so the wrong op sits in the layer's own forward.

# %% [markdown] tags=["lang-zh"]
# §4.6 的最后一级。每个 decoder 层在同样的 fp32 输入（batch 2）上跑两遍：eager 一遍、Dynamo trace 一遍（backend 用
# "eager"，不经过 Inductor，两者只差在 trace）。第一个输出不一致的层就是元凶；它的子模块都一致，说明出错的 op 在这一层自己的 forward 里。

# %% tags=["nbval-ignore-output"]
here["locate"] = lab.locate(model)
print(lab.locate_table(here))

# %% [markdown] tags=["lang-en"]
# ### §4.6's rules against the real messages · 用真实错误信息检验 §4.6 的判断技巧

# %% [markdown] tags=["lang-zh"]
# ### 用真实错误信息检验 §4.6 的判断技巧

# %% tags=["nbval-ignore-output"]
here["heuristics"] = lab.heuristics(here["faults"])
print(lab.heuristics_table(here))

# %% [markdown] tags=["lang-en"]
# ### §4.5: when to run eagerly · §4.5：什么时候该 eager
#
# Three more measurements: how often a layer's Python forward runs (where a `print` or a breakpoint would
# fire) eagerly and under FULL graphs; run-time recompiles after five new shapes with and without a symbolic
# batch dimension; and, on a GPU, the KV cache sized from `gpu_memory_utilization=0.9` with and without graphs.

# %% [markdown] tags=["lang-zh"]
# 再测三样：一层的 Python forward 执行了几次（`print` 或断点会在这里触发），eager 与 FULL 图对比；五种新 shape 之后的
# 运行时重编译次数，有无符号化 batch 维对比；以及在 GPU 上，`gpu_memory_utilization=0.9` 时开关图的 KV cache 大小。

# %% tags=["nbval-ignore-output"]
here["debug"] = lab.debug_counts(model, 8)
here["recompiles"] = lab.recompiles(model)
here["oom"] = lab.kv_memory(model) if lab.device.kind == "cuda" else None
print(lab.scenario_table(here))

# %% [markdown] tags=["lang-en"]
# The same table from the H200 record (and the recorded Lab 03 and Lab 04 files it cites):

# %% [markdown] tags=["lang-zh"]
# 同一张表，用 H200 的记录（以及它引用的 Lab 03、Lab 04 记录文件）：

# %% tags=["nbval-check-output"]
print("Recorded on an H200 (lab05.json when present, and the lab04.json / attention_*.json it cites):")
print(lab.scenario_table(rec))

# %% [markdown]
# ## 4. Self-test 3 · 自检第 3 题

# %% [markdown] tags=["lang-en"]
# **Q3.** Startup fails with `cudaGraphInstantiate failed`. Which flag first? Pick and press *Check*; the
# feedback cites the capture fault's record. In Python:
# `from minivllm_labs import grade; print(grade(lab.Q3, "A", rec or here)[1])`.

# %% [markdown] tags=["lang-zh"]
# **第 3 题。** 启动时报错 `cudaGraphInstantiate failed`，先动哪个 flag？选好后点 *Check*，反馈引用捕获故障的记录。
# 在 Python 里：`from minivllm_labs import grade; print(grade(lab.Q3, "A", rec or here)[1])`。

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q3, rec or here)

# %% tags=["nbval-ignore-output"]
lab.quiz(lab.Q_SILENT, rec or here)

# %% [markdown] tags=["lang-en"]
# <details><summary>Model answers to the self-test · 自检参考答案</summary>
#
# **lab05.q3.** cudagraph_mode NONE first (graphs off, compile kept; --enforce-eager turns both off in vLLM:
# [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)); it starts, so the graph is the culprit; then look for a host sync in the forward or capture
# fewer sizes.
#
# **lab05.q_silent.** Verify against eager, turn the optimizations off to confirm, then bisect in fp32 at a small
# batch.
#
# </details>

# %% [markdown] tags=["lang-zh"]
# <details><summary>自检参考答案 · Model answers</summary>
#
# **lab05.q3.** 先设 cudagraph_mode NONE（关图、保留编译；vLLM 的 --enforce-eager 两个都关：
# [vllm/config/vllm.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/vllm.py)）；能启动就说明是图的问题；再找 forward 里的 host 同步，或少捕获几个 size。
#
# **lab05.q_silent.** 先和 eager 对比（verify），关掉优化确认，再用 fp32、小 batch 二分定位。
#
# </details>

# %% [markdown] tags=["lang-en"]
# ## 5. Try it yourself · 动手试试
#
# **1.** Plant the compile fault under `{"mode": 1, "backend": "eager", "allow_graph_breaks": True,
# "cudagraph_mode": "NONE"}` (stock `torch.compile` without `fullgraph`: vLLM has no such option and compiles
# every mode that runs Dynamo with `fullgraph=True`, [vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py), so there the fault is a startup error). Graphs stay off so that the exercise
# asks one thing, what Dynamo does: the fault's `if` reads a tensor's value on the host, which a CUDA graph
# capture forbids, so on a GPU a capture would fail first (it did on the H200, at size 256). Does startup fail? What does `llm.compile_report()` say? *Hint:* without `fullgraph`, Dynamo
# may split the graph where it cannot trace.
#
# <details><summary>Solution · 参考答案</summary>
#
# It starts: Dynamo breaks the graph at the `if`, runs the branch in Python and traces the rest as more
# graphs. `compile_report()` counts the breaks, and they grow once requests run (the stored CPU run below: 5
# graphs and 1 break at startup; after one request 3 breaks and 10 run-time recompiles). That is the handbook's
# "falls back to an eager section"; vLLM ([vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)) and this engine compile modes 1-3 with
# `fullgraph=True`, so this fails loudly at startup instead of silently slowing every step (Lab 03 measured {rec}`attention_unregistered.json:rows.0.tpot_s*1000:.1f` ms against {rec}`attention_registered.json:rows.0.tpot_s*1000:.1f` ms a token with a break at every
# attention call).
# </details>
#
# **2.** On a CPU the silent fault's second rung ("CUDA graphs off") fails exactly like the first. Why, and
# what does that tell you about reading a ladder? *Hint:* what did that rung change on this device?
#
# <details><summary>Solution · 参考答案</summary>
#
# A CPU has no CUDA graphs, so the rung changed nothing and the same verify failure came back. A rung only
# names the culprit when it changed something: the first rung that *both* changed the configuration *and*
# started is the one that counts (here "torch.compile off").
# </details>

# %% [markdown] tags=["lang-zh"]
# ## 5. 动手试试
#
# **1.** 把编译故障放到 `{"mode": 1, "backend": "eager", "allow_graph_breaks": True, "cudagraph_mode": "NONE"}`
# （原生 `torch.compile`，不开 `fullgraph`；vLLM 没有这个选项，跑 Dynamo 的模式都用 `fullgraph=True`，
# [vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)，故障在启动时报错）下。
# 关掉 CUDA Graph，让这道题只问一件事：Dynamo 怎么处理。故障里的 `if` 要在主机上读张量的值，CUDA Graph 捕获时不允许，
# 所以在 GPU 上会先是捕获失败（H200 上在 size 256 就失败了）。启动会失败吗？
# `llm.compile_report()` 说了什么？*提示：* 没有 `fullgraph` 时，Dynamo 遇到 trace 不了的地方可以把图断开。
#
# <details><summary>Solution · 参考答案</summary>
#
# 能启动：Dynamo 在 `if` 处断图，分支用 Python 跑，其余部分 trace 成多张图。`compile_report()` 统计 graph break，
# 请求跑起来后还会增加（下面保存的 CPU 结果：启动时 5 张图、1 个 break；跑一个请求后 3 个 break、运行时重编译 10 次）。
# 这就是手册说的"fallback 到 eager 区段"；vLLM（[vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)）和本引擎的 mode 1-3 都用
# `fullgraph=True`，所以它在启动时大声失败，而不是悄悄拖慢每一步（Lab 03 测到每次 attention 调用都断图时每个 token {rec}`attention_unregistered.json:rows.0.tpot_s*1000:.1f` ms，注册后 {rec}`attention_registered.json:rows.0.tpot_s*1000:.1f` ms）。
# </details>
#
# **2.** 在 CPU 上，无声故障的第二级（"关 CUDA Graph"）和第一级失败得一模一样。为什么？这说明读降级路径时要注意什么？
# *提示：* 这一级在这台设备上改变了什么？
#
# <details><summary>Solution · 参考答案</summary>
#
# CPU 上没有 CUDA Graph，这一级什么也没改，于是同样的 verify 失败又出现了。只有真的改变了配置的那一级才能指认元凶：
# 算数的是第一个*既*改了配置*又*成功启动的那一级（这里是"关 torch.compile"）。
# </details>

# %% tags=["nbval-ignore-output"]
# Exercise 1: run it (a Dynamo-only compile, a few seconds; no CUDA graphs, whose capture the fault's host read
# would break on a GPU)
from minivllm import SamplingParams

with lab.inject("untraceable"):
    llm = lab.start(model, compilation_config={"mode": 1, "backend": "eager", "allow_graph_breaks": True,
                                                "cudagraph_mode": "NONE"})
    keys = ("graphs_traced_at_startup", "graph_breaks", "recompiles_at_runtime")
    print("at startup:       ", {k: v for k, v in llm.compile_report().items() if k in keys})
    llm.generate([{"prompt_token_ids": [1, 2, 3]}], SamplingParams(max_tokens=4), use_tqdm=False)
    print("after one request:", {k: v for k, v in llm.compile_report().items() if k in keys})
    llm.shutdown()

# %% [markdown]
# ## 6. Summary of verdicts · 结论

# %% [markdown] tags=["lang-en"]
# Each rule of §4.6 and row of §4.5, its verdict, the number that decides it and its results file (numbers
# of `lab05.json` appear once the recorder has run on the H200).

# %% [markdown] tags=["lang-zh"]
# §4.6 的每条判断技巧和 §4.5 的每一行、结论、决定结论的数字和结果文件（`lab05.json` 的数字在 H200 上跑过记录器后出现）。

# %% [markdown] tags=["lang-en"]
# **Verdict.** The handbook's diagnosis rules hold for compile faults and silent numerics errors (a Dynamo error names
# compile; a silent wrong answer is reproduced against --enforce-eager), but its graph rule misses the commonest
# capture failure: a host sync in a capture reports "operation not permitted when stream is capturing", not a
# cudaGraphExec error. In this engine turning graphs off frees the graph reserve, a few hundred MB
# that goes to the KV cache, not the article's 10-15% of memory (vLLM, by default since v0.20.0, subtracts the graph
# memory it estimates while profiling instead:
# [vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py)
# `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`). With a symbolic batch dimension new shapes recompile nothing, and an
# unregistered op that Dynamo cannot trace does not fall back to eager sections in vLLM: its fullgraph compile fails
# at startup ([vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)).

# %% [markdown] tags=["lang-zh"]
# **结论。** 手册的判断技巧对编译故障和无声的数值错误成立（Dynamo 报错指向 compile；无声的错误用
# --enforce-eager 对比复现），但它的图规则漏掉了最常见的捕获失败：捕获中的主机同步报的是
# "operation not permitted when stream is
# capturing"，而不是 cudaGraphExec 错误。在本引擎里关掉 CUDA Graph 释放的是图预留的几百
# MB，它们归 KV Cache，而不是文章说的 10-15% 显存（vLLM 从 v0.20.0 起默认扣除的是 profile 时估算的图显存：
# [vllm/envs.py](https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/envs.py) 的
# `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`）。batch
# 维是符号化的时候，新形状不会触发重编译；Dynamo trace 不了的未注册算子在 vLLM 里也不会回退到 eager 区段：fullgraph
# 编译在启动时就报错（[vllm/compilation/decorators.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/compilation/decorators.py); mode 1: `GPUModelRunner.load_model`, [vllm/v1/worker/gpu_model_runner.py](https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py)）。

# %% tags=["nbval-check-output"]
print(lab04.verdicts_table(lab.CLAIMS, rec, lab.RESULTS))

# %% [markdown] tags=["lang-en"]
# **In the engine:** the ladder in [engine/fallback.py](../minivllm/engine/fallback.py) `start_engine` (a fresh
# engine per rung; `start_worker` runs the greedy probe against an eager engine); the classifier in
# [compilation/diagnose.py](../minivllm/compilation/diagnose.py) `diagnose`; capture errors wrapped with the mode
# and size in [worker/graph_capture.py](../minivllm/worker/graph_capture.py) `capture_graphs`; the mode that
# runs, after vLLM's downgrades, in [config.py](../minivllm/config.py) `EngineConfig.cudagraph_mode`.

# %% [markdown] tags=["lang-zh"]
# **引擎代码：** 降级路径在 [engine/fallback.py](../minivllm/engine/fallback.py) 的 `start_engine`（每一级都新建一个引擎；
# `start_worker` 运行和 eager 引擎对比的贪心探针）；分类器在 [compilation/diagnose.py](../minivllm/compilation/diagnose.py) 的 `diagnose`；捕获错误带上模式和
# size 后抛出，在 [worker/graph_capture.py](../minivllm/worker/graph_capture.py) 的 `capture_graphs`；按 vLLM 规则降级后实际运行的
# 模式在 [config.py](../minivllm/config.py) 的 `EngineConfig.cudagraph_mode`。
