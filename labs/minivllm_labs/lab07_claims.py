"""The claims Lab 07 judges itself: the article's hardware figures (physics: weight bytes over bandwidth),
its cited sources that do not exist, and its batch / generation gains (from `minivllm bench latency` on the
H200). Every other claim of the seeds is measured, once, by the lab named in lab07.CHECKLIST.

`claim_zh` is the seed's own words (tests check it appears verbatim in the seed); `figure` is the number as
stored under `evidence_key` in `evidence_file` (None while that file is not recorded yet).
"""

from __future__ import annotations

from minivllm_labs.catalog import Claim

RESULTS = "assets/results/h200/lab07.json"
LATENCY = "assets/results/h200/latency.json"

CLAIMS = (
    Claim(cid="article.sources_gtc2023_vllm040", seed="article", lab="lab07",
          claim_zh="根据NVIDIA在2023年GTC大会上公布的数据，在典型的大模型推理场景中，kernel launch overhead可占据总延迟的15%至25%",
          claim_en="NVIDIA's GTC 2023 figures: kernel launch overhead is 15-25% of total latency (and, per a vLLM "
                   "v0.4.0 benchmark, graphs cut batch-1 latency 1.8x).",
          verdict="unverifiable",
          summary="No such GTC 2023 figure or vLLM v0.4.0 report exists. On the H200, batch-1 TPOT is 20.46 ms "
                  "eager vs 0.971 ms with FULL graphs (this number; eager at rows.0): 21x, because the eager step "
                  "is CPU-bound. The share is the CPU time the GPU waits for, not a fixed 15-25%.",
          summary_zh="找不到这份 GTC 2023 数据或 vLLM v0.4.0 报告。H200 上 batch 1 的 TPOT：eager 20.46 ms，FULL 图 "
                     "0.971 ms（本数字；eager 见 rows.0），21 倍，因为 eager 步受 CPU 限制。占比取决于 GPU 等 CPU 的时间，"
                     "不是固定的 15-25%。",
          evidence_file=LATENCY, evidence_key="rows.9.tpot_s", figure=0.0009714180352941683),
    Claim(cid="article.gains_at_batch_8", seed="article", lab="lab07",
          claim_zh="当batch size增至8时，kernel启动开销被分摊到多个请求上，收益降至约20%。",
          claim_en="At batch 8 the launch cost is spread over the requests, so the gain drops to about 20%.",
          verdict="partly",
          summary="Batch-8 TPOT: 24.08 ms eager (rows.3) vs 1.313 ms FULL (this number): a 94.5% reduction vs 95.3% "
                  "at batch 1. The direction is right (the gain shrinks as the GPU gets more work per step), the "
                  "20% is not, for this model: the eager step stays CPU-bound far beyond batch 8.",
          summary_zh="batch 8 的 TPOT：eager 24.08 ms（rows.3），FULL 图 1.313 ms（本数字）：降低 94.5%，batch 1 时为 "
                     "95.3%。方向对（GPU 每步工作越多收益越小），20% 不对：这个模型的 eager 步远超 batch 8 仍受 CPU 限制。",
          evidence_file=LATENCY, evidence_key="rows.12.tpot_s", figure=0.001313425239215674),
    Claim(cid="article.a100_13b_tpot", seed="article", lab="lab07",
          claim_zh="TPOT从12ms降至9ms（降幅25%）",
          claim_en="On an A100-80GB, LLaMA-2-13B at batch 1: TPOT drops from 12 ms to 9 ms with CUDA graphs.",
          verdict="wrong",
          summary="Physics, not measured (no A100 here): 13.0e9 bf16 weights = 26 GB read per token at the "
                  "A100-80GB's 2,039 GB/s is at least this many ms per token. 9 ms is below the floor; even 12 ms is.",
          summary_zh="由物理推算（这里没有 A100）：13.0e9 个 bf16 权重 = 每个 token 读 26 GB，A100-80GB 带宽 2,039 GB/s，"
                     "每 token 至少需要这么多毫秒。9 ms 低于下限，12 ms 也是。",
          evidence_file=RESULTS, evidence_key="physics.a100_13b.floor_ms", figure=None,
          rule=lambda v: "wrong" if v > 9 else "right"),
    Claim(cid="article.a100_13b_requests_per_s", seed="article", lab="lab07",
          claim_zh="吞吐量从每秒12.3次请求提升至15.8次（增幅28.5%）",
          claim_en="Throughput rises from 12.3 to 15.8 requests/s (batch 1, 512-token prompts, 128 output tokens).",
          verdict="wrong",
          summary="The article's own numbers: at batch 1 one request takes TTFT + 127 x TPOT = 21 + 127 x 9 ms, "
                  "so at most this many requests finish per second, not 15.8.",
          summary_zh="用文章自己的数字：batch 1 时一个请求需要 TTFT + 127 × TPOT = 21 + 127 × 9 ms，每秒最多完成这么多个"
                     "请求，而不是 15.8。",
          evidence_file=RESULTS, evidence_key="physics.a100_req_s_ceiling", figure=None,
          rule=lambda v: "wrong" if v < 15.8 else "right"),
    Claim(cid="article.gains_by_gpu_generation", seed="article", lab="lab07",
          claim_zh="在V100（Volta架构）上，CUDA Graph的延迟降幅约为20%至30%，在A100（Ampere架构）上为40%至50%，"
                   "在H100（Hopper架构）上为45%至55%。",
          claim_en="Graphs cut latency 20-30% on V100, 40-50% on A100, 45-55% on H100, because newer GPUs' hardware "
                   "schedulers run graphs better.",
          verdict="unverifiable",
          summary="No V100 / A100 / H100 here. On the H200 (Hopper) batch-1 TPOT falls from this number (eager, "
                  "20.46 ms) to 0.971 ms: 95%, far outside '45-55%'. The saving is CPU launch time the GPU waited "
                  "for, so it depends on the host CPU and the model's size, not on the GPU's scheduler.",
          summary_zh="这里没有 V100 / A100 / H100。H200（Hopper）上 batch 1 的 TPOT 从本数字（eager 20.46 ms）降到 "
                     "0.971 ms：95%，远超 '45-55%'。省下的是 GPU 等待的 CPU 发射时间，取决于主机 CPU 与模型大小，"
                     "而不是 GPU 的调度器。",
          evidence_file=LATENCY, evidence_key="rows.0.tpot_s", figure=0.020458736741176486),
    Claim(cid="article.pascal_no_graphs", seed="article", lab="lab07",
          claim_zh="Pascal架构（如P40）不支持CUDA Graph。",
          claim_en="Pascal GPUs (e.g. P40) do not support CUDA graphs.",
          verdict="wrong",
          summary="Judged from NVIDIA's documentation, not measured: CUDA graphs are a CUDA runtime feature "
                  "(CUDA 10+) with no compute-capability floor; the P40 is sm_61 (this number) and runs them. "
                  "vLLM itself needs sm_70+, a vLLM limit, not a CUDA one.",
          summary_zh="依据 NVIDIA 文档判断，未实测：CUDA Graph 是 CUDA 运行时功能（CUDA 10 起），没有算力版本下限；"
                     "P40 是 sm_61（本数字），可以使用。vLLM 自己要求 sm_70 以上，那是 vLLM 的限制而非 CUDA 的。",
          evidence_file=RESULTS, evidence_key="physics.p40_compute_capability", figure=None,
          rule=lambda v: "wrong" if v >= 3.0 else "right"),
)
