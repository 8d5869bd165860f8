#!/usr/bin/env bash
# All GPU work of a session in one call: GPU tests, then every benchmark, JSON and logs under $OUT.
#
#   MINIVLLM_GIT_COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_check.sh [STAGE ...]
#   (through a tool that copies a working tree onto a machine with an older checkout, write the hash itself:
#   there `git rev-parse` answers the checkout's commit, not the tree's; files of 2026-11-30 morning say so)
#   stages: all, tune, verify, rope, final5, evidence, fusion, gemv, final, norm-pdl, final2, compile-baselines, final-b1, final3, autotune-spread, pinned, latency-short, tests, latency, compile, throughput, kernels, backends, qk-fusion, unregistered, lab01, rerun,
#   kernels-only
#
# "all" runs two lanes, one per GPU when the machine has two (else one after the other), each step under a
# deadline so the whole call ends in time (MINIVLLM_GPU_DEADLINE_S, default 520 s); a step that would
# start too late is skipped. Lane 0: GPU tests, latency (issue 5), kernels (issue 4). Lane 1: triton vs
# torch end to end (issue 4), the fused q/k-norm + RoPE A/B (issue 5), compile levels and cold/warm startup
# (issue 6), throughput with the fp32 correctness cross-check (issue 8), lab 01. Everything lands in $OUT/results.tar.gz
# (the device tool returns at most 8 files) plus $OUT/summary.log.
# Runs on the device machine (torch 2.11 + triton 3.6 + transformers 5.17 preinstalled, no internet).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/minivllm_out}
RES=/tmp/minivllm_results
mkdir -p "$OUT" "$RES"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
PY=python3
CK=/tmp/ckpt/qwen3-0.6b
START=$(date +%s)
DEADLINE=$((START + ${MINIVLLM_GPU_DEADLINE_S:-520}))
log() { echo "=== $(date -u +%H:%M:%S) [lane ${LANE:-0}] $*"; }

# step NAME CAP_S CMD...: run CMD with a timeout of min(CAP_S, time left), output to $RES/NAME.log
step() {
  local name=$1 cap=$2; shift 2
  local left=$((DEADLINE - $(date +%s) - 10))
  if [ "$left" -lt 30 ]; then log "SKIP $name (deadline)"; return; fi
  [ "$cap" -gt "$left" ] && cap=$left
  log "$name (cap ${cap}s)"
  timeout "$cap" "$@" > "$RES/$name.log" 2>&1
  log "$name exit $?"
  grep -v -E "^INFO|it/s\]|it/s, |^\s*$" "$RES/$name.log" | tail -${TAILN:-25}
}

# ab NAME CAP BATCHES OPS [VAR=VALUE ...]: TPOT with FULL graphs and compilation_config custom_ops OPS (one run
# of the same-lane A/Bs the fusion stages make), under the environment given, to $RES/NAME.json
ab() {
  local name=$1 cap=$2 batches=$3 ops=$4; shift 4
  step "$name" "$cap" env "$@" $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes "$batches" --modes FULL --compilation-config "{\"custom_ops\": $ops}" --json "$RES/$name.json"
}

gpu_tests() {
  MINIVLLM_GPU_MODEL=$CK step gpu_tests 190 $PY -m pytest -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py \
    "tests/test_async_scheduling.py::test_async_chunked_prefill_and_preemption_match_hf"
}
latency() {  # issue 5: every graph mode vs eager and transformers, batch 1..256
  TAILN=40 step latency 330 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE --compare hf,hf-compile --hf-batch-sizes 1 \
    --json "$RES/latency.json"
}
compile_levels() {  # issue 6: TPOT per level with and without graphs (+ async off), batch 1, 8, 64
  TAILN=40 step compile 330 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,8,64 --modes eager,FULL,NONE@L1,NONE@L2,FULL@L2,NONE@L3,FULL_AND_PIECEWISE@L3 \
    --json "$RES/compile.json"
}
unregistered() {  # issue 6: attention that Dynamo cannot see (graph breaks) vs the registered custom op
  step unreg_off 120 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 --batch-sizes 1,8 \
    --output-len 64 --modes NONE@L1 --json "$RES/attention_registered.json"
  step unreg_on 120 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 --batch-sizes 1,8 \
    --output-len 64 --modes NONE@L1 --attention-backend unregistered --json "$RES/attention_unregistered.json"
}
startup() {
  step startup 110 $PY -m minivllm.cli bench startup --model "$CK" --max-model-len 512 \
    --compilation-config '{"level": 3}' --json "$RES/startup.json"
}
qk_fusion() {  # issue 5: the fused q/k RMSNorm + RoPE kernel (default) against the unfused kernels, same call
  step fuse_off 70 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 --batch-sizes 1,64 \
    --modes FULL --compilation-config '{"custom_ops": ["all", "-qk_norm_rope"]}' --json "$RES/qk_fusion_off.json"
  step fuse_on 70 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 --batch-sizes 1,64 \
    --modes FULL --json "$RES/qk_fusion_on.json"
}
profile_steps() {  # issue 5: where one decode step's GPU time goes (per kernel category), default vs fused
  TAILN=70 step profile 150 $PY -m minivllm.cli bench profile --model "$CK" --max-model-len 512 --batch-sizes 1,64 \
    --context 256 --modes eager,FULL,FULL@L2 --json "$RES/profile.json"
  TAILN=40 step profile_fused 90 $PY -m minivllm.cli bench profile --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --context 256 --modes FULL --compilation-config '{"custom_ops": ["all", "+rope_kv_store"]}' \
    --json "$RES/profile_rope_kv_store.json"
}
fusion_ab() {  # issue 5/6: fused q/k norm + RoPE (default) vs unfused vs + KV store, then levels, same GPU
  TAILN=40 step fusion_default 170 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,8,64 --modes FULL,FULL@L2,FULL_AND_PIECEWISE@L3 --json "$RES/fusion_default.json"
  step fusion_unfused 60 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 --batch-sizes 1,64 \
    --modes FULL --compilation-config '{"custom_ops": ["all", "-qk_norm_rope"]}' --json "$RES/fusion_unfused.json"
  step fusion_rope_kv_store 60 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --modes FULL --compilation-config '{"custom_ops": ["all", "+rope_kv_store"]}' \
    --json "$RES/fusion_rope_kv_store.json"
}
fused_tests() {
  TAILN=10 step fused_tests 200 $PY -m pytest -q -p no:cacheprovider -s tests/test_cuda_graphs_gpu.py \
    -k "fused or unregistered" tests/test_elementwise_kernels.py
}
gemv_lane0() {  # issue 5: the Triton GEMV: tests, kernel vs cuBLAS, profile; then unregistered attention (#6)
  TAILN=12 step gemv_tests 170 $PY -m pytest -q -p no:cacheprovider -s tests/test_elementwise_kernels.py \
    tests/test_cuda_graphs_gpu.py -k "gemv or unregistered or rope_kv_store or fused"
  TAILN=30 step gemv_kernels 60 $PY -m minivllm.cli bench kernels --gemv --json "$RES/gemv.json"
  TAILN=70 step profile_gemv 80 $PY -m minivllm.cli bench profile --model "$CK" --max-model-len 512 \
    --batch-sizes 1,8 --context 256 --modes FULL --compilation-config '{"custom_ops": ["all", "+gemv"]}' \
    --json "$RES/profile_gemv.json"
  unregistered
}
gemv_lane1() {  # issue 5: TPOT default vs +gemv vs +gemv+rope_kv_store (FULL), then the latency table with +gemv
  ab ab_default 60 1,2,4,8,64 '["all"]'
  ab ab_gemv 60 1,2,4,8,64 '["all", "+gemv"]'
  ab ab_gemv_rope_kv_store 60 1,2,4,8,64 '["all", "+gemv", "+rope_kv_store"]'
  TAILN=40 step latency_gemv 260 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE --compare hf,hf-compile --hf-batch-sizes 1 \
    --compilation-config '{"custom_ops": ["all", "+gemv"]}' --json "$RES/latency_gemv.json"
}
final_lane0() {  # every GPU test, then the decode split-KV sweep (issue 4, the new split policy)
  TAILN=15 step final_tests 250 $PY -m pytest -q -p no:cacheprovider -s tests/test_cuda_graphs_gpu.py \
    "tests/test_async_scheduling.py::test_async_chunked_prefill_and_preemption_match_hf"
  TAILN=80 step kernels_sweep 100 $PY -m minivllm.cli bench kernels --sweep-decode --json "$RES/kernels.json"
  TAILN=70 step profile_final 80 $PY -m minivllm.cli bench profile --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --context 256 --modes FULL_AND_PIECEWISE --json "$RES/profile_default.json"
}
final_lane1() {  # the latency table with today's defaults (issue 5), then throughput with its correctness check
  TAILN=40 step latency 330 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE --compare hf,hf-compile --hf-batch-sizes 1 \
    --json "$RES/latency.json"
  TAILN=40 step throughput 130 $PY -m minivllm.cli bench throughput --model "$CK" --max-model-len 2048 \
    --check-correctness --json "$RES/throughput.json"
}
throughput() {  # issue 8
  TAILN=40 step throughput 190 $PY -m minivllm.cli bench throughput --model "$CK" --max-model-len 2048 \
    --compare hf --hf-time-cap 25 --check-correctness --json "$RES/throughput.json"
}
kernels() {  # issue 4
  TAILN=60 step kernels 90 $PY -m minivllm.cli bench kernels --sweep-prefill --json "$RES/kernels.json"
}
backends() {  # the embedded model first (short), then the random 0.6B
  step backends_tiny 40 $PY -m minivllm.cli bench backends --dtype bfloat16 --json "$RES/backends_tiny.json"
  step backends 60 $PY -m minivllm.cli bench backends --model "$CK" --dtype bfloat16 --json "$RES/backends.json"
}
lab01() {
  step lab01 100 $PY -m minivllm.labs.record lab01 --model "$CK" --out "$RES/lab01.json"
}

norm_pdl_lane0() {  # issue 5: RMSNorm + residual add inside the GEMVs, programmatic dependent launch: tests,
  # then batch 1-64 TPOT of each against the default in the same lane, then where a fused step's time goes
  TAILN=15 step np_tests 200 $PY -m pytest -q -p no:cacheprovider -s tests/test_cuda_graphs_gpu.py \
    tests/test_elementwise_kernels.py -k "gemv_norm or pdl or gemv_equals or gemv_custom or unregistered"
  ab ab_default 70 1,2,8,64 '["all"]'
  ab ab_gemv_norm 70 1,2,8,64 '["all", "+gemv_norm"]'
  ab ab_pdl 70 1,2,8,64 '["all", "+pdl"]'
  ab ab_gemv_norm_pdl 70 1,2,8,64 '["all", "+gemv_norm", "+pdl"]'
  ab ab_gemv_norm_pdl_rope_kv_store 70 1,2,8,64 '["all", "+gemv_norm", "+pdl", "+rope_kv_store"]'
  TAILN=70 step profile_fused 80 $PY -m minivllm.cli bench profile --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --context 256 --modes FULL \
    --compilation-config '{"custom_ops": ["all", "+gemv_norm", "+pdl"]}' --json "$RES/profile_gemv_norm_pdl.json"
}
autotune_lane1() {  # issue 6: level 3 + graphs vs graphs alone, then with Inductor max_autotune and a static
  # compile for 64 tokens (GEMMs tuned for that shape), then cold/warm startup (GEMV autotune now cached)
  TAILN=30 step compile_ref 120 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,8,64 --modes FULL,FULL_AND_PIECEWISE@L3 --json "$RES/compile_ref.json"
  TAILN=30 step compile_autotune 250 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,8,64 --modes FULL@L0,FULL_AND_PIECEWISE@L3 \
    --compilation-config '{"inductor_compile_config": {"max_autotune": true}, "compile_sizes": [64]}' \
    --json "$RES/compile_max_autotune.json"
  startup
}

final2_lane0() {  # every GPU test with the new defaults (gemv_norm, pdl), then where a default step goes
  TAILN=15 step final_tests 290 $PY -m pytest -q -p no:cacheprovider -s tests/test_cuda_graphs_gpu.py \
    "tests/test_async_scheduling.py::test_async_chunked_prefill_and_preemption_match_hf"
  TAILN=70 step profile_final 80 $PY -m minivllm.cli bench profile --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --context 256 --modes FULL_AND_PIECEWISE --json "$RES/profile_default.json"
  # is RoPE + KV store in one kernel still a wash on top of the new defaults?
  ab ab3_default 50 1,2,8,64 '["all"]'
  ab ab3_rope_kv_store 50 1,2,8,64 '["all", "+rope_kv_store"]'
}
final2_lane1() {  # the latency table (issue 5's goals), lab 01 and throughput (issue 8) with the new defaults
  TAILN=40 step latency 230 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,8,64,256 --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE --compare hf,hf-compile \
    --hf-batch-sizes 1 --json "$RES/latency.json"
  lab01
  TAILN=40 step throughput 130 $PY -m minivllm.cli bench throughput --model "$CK" --max-model-len 2048 \
    --check-correctness --json "$RES/throughput.json"
}

compile_baselines() {  # issue 6: what level 3 adds to graphs depends on the baseline's kernels: PyTorch's own
  # elementwise ops ("none", what Inductor then fuses) or minivllm's hand-fused Triton kernels ("all")
  local ops=$1
  TAILN=30 step "compile_ops_$ops" 200 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,8,64 --modes FULL,FULL_AND_PIECEWISE@L3 --compilation-config "{\"custom_ops\": [\"$ops\"]}" \
    --json "$RES/compile_custom_ops_$ops.json"
}

final_b1() {  # issue 5's goals with the final defaults, in one short run: batch 1 (and 64) vs transformers
  TAILN=30 step latency_b1 170 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --modes FULL_AND_PIECEWISE --compare hf,hf-compile --hf-batch-sizes 1 \
    --json "$RES/latency_b1.json"
}

final3_lane0() {  # every GPU test with decode_prefetch on by default (the decode kernel's own tests too)
  TAILN=15 step final_tests 290 $PY -m pytest -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py \
    "tests/test_async_scheduling.py::test_async_chunked_prefill_and_preemption_match_hf"
  TAILN=15 step kernel_tests 120 $PY -m pytest -q -p no:cacheprovider tests/test_kernels.py \
    tests/test_elementwise_kernels.py -k "decode or pdl"
}
final3_lane1() {  # the latency table with the final defaults (issue 5's goals), decode_prefetch's A/B once
  # more, lab 01
  TAILN=40 step latency 230 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,8,64,256 --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE --compare hf,hf-compile \
    --hf-batch-sizes 1 --json "$RES/latency.json"
  ab ab7_default 60 1,2,8,64 '["all"]'
  ab ab7_no_decode_prefetch 60 1,2,8,64 '["all", "-decode_prefetch"]'
  lab01
}

autotune_spread() {  # issue 5: is batch 1's spread across machines (0.92-1.18 ms) the GEMV autotuner's choice?
  # Three fresh autotunes (an empty Triton cache each), batch 1 and 2 TPOT, the winning configs printed
  local i
  for i in 1 2 3; do
    TAILN=3 step "spread_${LANE}_$i" 100 env TRITON_CACHE_DIR="/tmp/triton_cache_spread_${LANE}_$i" \
      TRITON_PRINT_AUTOTUNING=1 \
      $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 --batch-sizes 1,2 --modes FULL \
      --json "$RES/spread_${LANE}_$i.json"
  done
}

pinned_vs_fresh() {  # issue 5 (next): the fastest recorded GEMV picks replayed vs a fresh autotune, per GPU:
  # separates this machine's speed from the autotuner's choice
  local i
  for i in $(seq "${RUNS:-2}"); do
    TAILN=3 step "pinned_${LANE}_$i" 60 env MINIVLLM_GEMV_CONFIGS=assets/results/h200/gemv_configs_fastest_b1.json \
      $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 --batch-sizes 1,2 --modes FULL \
      --json "$RES/pinned_${LANE}_$i.json"
    TAILN=3 step "fresh_${LANE}_$i" 100 env MINIVLLM_GEMV_CONFIGS=autotune TRITON_CACHE_DIR="/tmp/triton_cache_fresh_${LANE}_$i" \
      $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 --batch-sizes 1,2 --modes FULL \
      --json "$RES/fresh_${LANE}_$i.json"
  done
}

gemv_tune() {  # issue 5 (fifth session): GEMV block sizes ranked by TPOT inside the FULL graph; lane 0 saves
  # them as this GPU model's shipped file (copied into the results), lane 1 tunes the other GPU for comparison
  local save=""
  [ "$LANE" = 0 ] && save="--save"
  TAILN=30 step "gemv_tune_${LANE}" 260 env MINIVLLM_GEMV_CONFIGS=autotune TRITON_CACHE_DIR="/tmp/triton_tune_$LANE" \
    $PY -m minivllm.cli bench gemv-tune --model "$CK" --max-model-len 512 $save --json "$RES/gemv_tune_${LANE}.json"
  cp minivllm/kernels/configs/gemv/*.json "$RES/" 2>/dev/null
}
shipped_vs_fresh() {  # issue 5 (fifth session): the shipped tuned GEMV configs vs fresh autotunes, same GPU
  local i
  for i in 1 2; do
    TAILN=3 step "shipped_${LANE}_$i" 60 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
      --batch-sizes 1,2 --modes FULL --json "$RES/shipped_${LANE}_$i.json"
    TAILN=3 step "fresh_${LANE}_$i" 100 env MINIVLLM_GEMV_CONFIGS=autotune \
      TRITON_CACHE_DIR="/tmp/triton_cache_fresh_${LANE}_$i" $PY -m minivllm.cli bench latency --model "$CK" \
      --max-model-len 512 --batch-sizes 1,2 --modes FULL --json "$RES/fresh_${LANE}_$i.json"
  done
}
gpu_test_pins() {
  TAILN=10 step gpu_test_pins 120 $PY -m pytest -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py -k pinned_gemv
}
gpu_tests_tune() {
  MINIVLLM_GPU_MODEL=$CK step gpu_tests 330 $PY -m pytest -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py
}

rope_ab() {  # issue 5 (fifth session): custom op rope_attention (RoPE + KV store inside the decode kernel) vs
  # the default, FULL graphs, same GPU, interleaved twice
  local i
  for i in 1 2; do
    ab "ra_default_$i" 90 1,2,8,64 '["all"]'
    ab "ra_on_$i" 90 1,2,8,64 '["all", "+rope_attention"]'
  done
}
rope_checks() {  # its GPU tests (tokens vs the unfused path in FULL and level-3 PIECEWISE graphs, the kernel vs
  # RoPE + store + decode), then where a batch-1 and batch-64 step's time goes with it
  TAILN=10 step rope_tests 200 $PY -m pytest -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py \
    tests/test_kernels.py tests/test_elementwise_kernels.py -k "rope_attention or rope_store_then_decode or pdl"
  TAILN=40 step profile_rope_attention 100 $PY -m minivllm.cli bench profile --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --context 256 --modes FULL --compilation-config '{"custom_ops": ["all", "+rope_attention"]}' \
    --json "$RES/profile_rope_attention.json"
  TAILN=40 step profile_default 100 $PY -m minivllm.cli bench profile --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --context 256 --modes FULL --json "$RES/profile_default.json"
}

gpu_tests_fixed() {  # only the tests changed after the first full run
  step gpu_tests 150 $PY -m pytest -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py \
    -k "compiled or failure or async_chunked" tests/test_async_scheduling.py
}

lane0() { LANE=0; export MINIVLLM_CACHE_DIR=/tmp/minivllm_cache0; gpu_tests; latency; kernels; }
lane1() {
  LANE=1; export MINIVLLM_CACHE_DIR=/tmp/minivllm_cache1
  backends; qk_fusion; compile_levels; startup; unregistered; throughput; lab01
}

# two_lanes "CMDS0" "CMDS1": CMDS0 on GPU 0 and CMDS1 on the last GPU, side by side (one after the other on a
# one-GPU host, so timings never share a GPU); each lane has its own compile cache.
two_lanes() {
  (export CUDA_VISIBLE_DEVICES=0 LANE=0 MINIVLLM_CACHE_DIR=/tmp/minivllm_cache0; eval "$1") > "$RES/lane0.out" 2>&1 &
  [ "$NGPU" -ge 2 ] || wait
  (export CUDA_VISIBLE_DEVICES=$((NGPU - 1)) LANE=1 MINIVLLM_CACHE_DIR=/tmp/minivllm_cache1; eval "$2") \
    > "$RES/lane1.out" 2>&1 &
  wait
  cat "$RES/lane0.out" "$RES/lane1.out"
}

log "env"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
[ -d "$CK" ] || $PY -m minivllm.tools.make_random_checkpoint --shape qwen3-0.6b --dtype bfloat16 "$CK" >/dev/null
NGPU=$(nvidia-smi -L | wc -l)
for stage in "${@:-all}"; do  # several stages may be named: gpu_check.sh throughput lab01
case "$stage" in
  all)
    if [ "$NGPU" -ge 2 ]; then
      (export CUDA_VISIBLE_DEVICES=0; lane0) > "$RES/lane0.out" 2>&1 &
      (export CUDA_VISIBLE_DEVICES=1; lane1) > "$RES/lane1.out" 2>&1 &
      wait
      cat "$RES/lane0.out" "$RES/lane1.out"
    else
      lane0; lane1
    fi ;;
  evidence)  # what the open issues still lacked on 2026-11-30: e2e backends (#4), fp32 cross-check (#8),
    # unregistered + startup (#6), fused q/k norm + RoPE (#5), GPU tests
    two_lanes "backends; throughput; gpu_tests" "qk_fusion; startup; unregistered" ;;
  fusion)  # the profile bench, the fused RoPE kernels and levels (#5, #6), unregistered attention (#6)
    two_lanes "fused_tests; profile_steps" "fusion_ab; unregistered" ;;
  gemv)  # the Triton GEMV (#5) on both lanes, unregistered attention (#6)
    two_lanes gemv_lane0 gemv_lane1 ;;
  final)  # the defaults as they now are: GPU tests, decode split sweep, latency table, throughput
    two_lanes final_lane0 final_lane1 ;;
  latency-short)  # the latency table at fewer batch sizes (a short last call): issue 5's goals and pools
    TAILN=40 step latency 230 $PY -m minivllm.cli bench latency --model "$CK" --max-model-len 512 \
      --batch-sizes 1,8,64,256 --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE --compare hf,hf-compile \
      --hf-batch-sizes 1 --json "$RES/latency.json" ;;
  norm-pdl)  # 2026-11-30 (third session): gemv_norm + pdl (#5), max_autotune and warm start (#6)
    two_lanes norm_pdl_lane0 autotune_lane1 ;;
  final2)  # 2026-11-30 (third session), last call: the new defaults end to end
    two_lanes final2_lane0 final2_lane1 ;;
  compile-baselines)  # level 3 + graphs against graphs with PyTorch's ops and with the hand-fused kernels
    two_lanes "compile_baselines none" "compile_baselines all" ;;
  final-b1) final_b1 ;;
  autotune-spread)  # 2026-11-30 (fourth session): three fresh GEMV autotunes per GPU, batch 1 and 2 TPOT
    two_lanes autotune_spread autotune_spread ;;
  tune)  # 2026-11-30 (fifth session): bench gemv-tune on both GPUs (lane 0 saves), GPU tests, fixed picks
    two_lanes "gemv_tune; gpu_tests_tune" "gemv_tune; RUNS=1 pinned_vs_fresh" ;;
  verify)  # 2026-11-30 (fifth session), second call: all nine batch sizes with the shipped configs; the
    # shipped configs against fresh autotunes on both GPUs of another machine
    two_lanes "latency; gpu_test_pins" "shipped_vs_fresh; lab01" ;;
  final5)  # 2026-11-30 (fifth session), last call: every GPU test at the final commit, both lanes (at 34562de
    # caps of 220 / 200 s cut both short, after 15 and ~290 passes; the rest passed in a second call)
    two_lanes gpu_tests_tune "TAILN=10 step kernel_tests 450 $PY -m pytest -q -p no:cacheprovider tests/test_kernels.py tests/test_elementwise_kernels.py tests/test_async_scheduling.py" ;;
  rope)  # 2026-11-30 (fifth session), third call: rope_attention's A/B, tests and profile
    two_lanes rope_ab rope_checks ;;
  pinned)  # the fastest recorded GEMV picks (MINIVLLM_GEMV_CONFIGS) vs fresh autotunes, both GPUs
    two_lanes pinned_vs_fresh pinned_vs_fresh ;;
  final3)  # 2026-11-30 (fourth session), last call: the final defaults end to end
    two_lanes final3_lane0 final3_lane1 ;;
  rerun)  # second call of a session: re-check what changed, record what the first call skipped
    two_lanes "gpu_tests_fixed; startup" "kernels; lab01" ;;
  backends) backends ;;
  qk-fusion) qk_fusion ;;
  unregistered) unregistered ;;
  kernels-only) kernels; TAILN=10 step async_test 60 $PY -m pytest -q -p no:cacheprovider \
      tests/test_async_scheduling.py tests/test_tokenizer_loading.py ;;
  tests) gpu_tests ;;
  latency) latency ;;
  compile) compile_levels; startup ;;
  throughput) throughput ;;
  kernels) kernels; backends ;;
  lab01) lab01 ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
done
tar -czf "$OUT/results.tar.gz" -C "$RES" .
grep -h -E "^===|passed|failed|Goal|goals|PASS|FAIL" "$RES"/*.out "$RES"/*.log 2>/dev/null > "$OUT/summary.log"
log "done in $(( $(date +%s) - START )) s"
