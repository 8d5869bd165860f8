#!/usr/bin/env bash
# All GPU work of a session in one script: GPU tests, then benchmarks, JSON under $OUT.
#   bash scripts/gpu_check.sh debug     # compile levels with full logs, async scheduling on the GPU
#   bash scripts/gpu_check.sh verify    # quick check: compile levels on GPU, backends, throughput, b1 TPOT
#   bash scripts/gpu_check.sh kernels   # kernel tests + kernel bench (about 4 min)
#   bash scripts/gpu_check.sh A         # CUDA-graph tests + latency (issue 5)
#   bash scripts/gpu_check.sh B         # throughput (issue 8), compile levels (issue 6), lab 01 recording
#   bash scripts/gpu_check.sh final     # throughput, compile levels, lab 01, graph tests (one call, ~7 min)
# Runs on the device machine (torch 2.11 + triton 3.6 + transformers 5.17 preinstalled, no internet).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/minivllm_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MINIVLLM_CACHE_DIR=/tmp/minivllm_cache
PY=python3
CK=/tmp/ckpt/qwen3-0.6b
stage=${1:-tests}
log() { echo "=== $(date -u +%H:%M:%S) $*"; }

log "env"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
[ -d "$CK" ] || $PY -m minivllm.tools.make_random_checkpoint --shape qwen3-0.6b --dtype bfloat16 "$CK" >/dev/null

if [ "$stage" = debug ]; then  # compile levels on the GPU with full logs; async scheduling on the GPU
  log "compiled modes on GPU (full log in compiled_tests.log)"
  timeout 150 $PY -m pytest -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py -k "compiled or failure" \
      > "$OUT/compiled_tests.log" 2>&1; tail -5 "$OUT/compiled_tests.log"
  log "level 2 debug (full log in l2_debug.log)"
  TORCHDYNAMO_VERBOSE=1 timeout 150 $PY scripts/debug_compile_gpu.py > "$OUT/l2_debug.log" 2>&1
  grep -E "level 2 forward|FULL@L2|NONE@L2|Error" "$OUT/l2_debug.log" | head -20
  log "async scheduling + graph modes on GPU (embedded model)"
  timeout 150 $PY -m pytest -q -p no:cacheprovider tests/test_async_scheduling.py \
      "tests/test_cuda_graphs_gpu.py::test_graph_modes_match_eager_at_every_batch_size" > "$OUT/async_tests.log" 2>&1
  tail -4 "$OUT/async_tests.log"
  log "bench throughput: async vs sync"
  timeout 170 $PY -m minivllm.cli bench throughput --model "$CK" --max-model-len 2048 --compare sync \
      --json "$OUT/throughput.json" 2>&1 | grep -v "^INFO" | grep -v "it/s" | tail -32
  log "bench latency: FULL vs FULL+sync, hf-compile"
  timeout 120 $PY -m minivllm.cli bench latency --model "$CK" --batch-sizes 1,64 --modes FULL,FULL+sync \
      --compare hf-compile --hf-batch-sizes 1 --json "$OUT/latency_b1.json" 2>&1 | grep -v "^INFO" \
      | grep -v "it/s" | tail -16
fi

if [ "$stage" = verify ]; then  # quick check of the current code: compile levels first, then baselines
  log "GPU tests (compile levels with graphs, then graph modes)"
  MINIVLLM_GPU_MODEL=$CK timeout 200 $PY -m pytest -x -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py \
      -k "compiled or seed or failure" 2>&1 | grep -v "^INFO" | tail -12 | tee "$OUT/gpu_tests.log"
  log "triton vs torch end to end (bf16, 16 prompts x 32 tokens)"
  timeout 90 $PY -m minivllm.cli bench backends --model "$CK" --dtype bfloat16 --json "$OUT/backends.json" 2>&1 \
      | grep -v "^INFO" | tail -22
  log "bench throughput (no baselines)"
  timeout 110 $PY -m minivllm.cli bench throughput --model "$CK" --max-model-len 2048 \
      --json "$OUT/throughput.json" 2>&1 | grep -v "it/s" | tail -30
  log "bench latency b1: FULL vs FULL@L2 vs hf-compile"
  timeout 150 $PY -m minivllm.cli bench latency --model "$CK" --batch-sizes 1,64 --modes FULL,FULL@L2 \
      --compare hf-compile --hf-batch-sizes 1 --json "$OUT/latency_b1.json" 2>&1 | grep -v "^INFO" \
      | grep -v "it/s" | tail -30
fi

if [ "$stage" = kernels ]; then
  log "kernel tests"
  timeout 300 $PY -m pytest -x -q -p no:cacheprovider tests/test_kernels.py 2>&1 | tail -5 | tee "$OUT/kernel_tests.log"
  log "bench kernels"
  timeout 150 $PY -m minivllm.cli bench kernels --json "$OUT/kernels.json" 2>&1 | tail -30
  log "triton vs torch end to end (bf16, 16 prompts x 32 tokens)"
  timeout 120 $PY -m minivllm.cli bench backends --model "$CK" --dtype bfloat16 --json "$OUT/backends.json" 2>&1 \
      | grep -v "^INFO" | tail -22
fi

if [ "$stage" = A ]; then  # graph correctness, then issue 5's latency table
  log "GPU tests (graphs)"
  MINIVLLM_GPU_MODEL=$CK timeout 240 $PY -m pytest -x -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py \
      2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
  log "bench latency"
  timeout 330 $PY -m minivllm.cli bench latency --model "$CK" --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE \
      --compare hf,hf-compile --hf-batch-sizes 1,8 --json "$OUT/latency.json" 2>&1 | grep -v "^INFO" | tail -45
fi

if [ "$stage" = B ]; then  # issue 8 throughput, issue 6 compile levels, lab 01
  log "bench throughput"
  timeout 200 $PY -m minivllm.cli bench throughput --model "$CK" --max-model-len 2048 --compare hf \
      --hf-time-cap 45 --check-correctness --json "$OUT/throughput.json" 2>&1 | grep -v "^INFO" | tail -30
  log "bench compile levels"
  timeout 170 $PY -m minivllm.cli bench latency --model "$CK" --batch-sizes 1,8,64 --output-len 128 \
      --modes NONE@L0,NONE@L2,NONE@L3,FULL_AND_PIECEWISE@L0,FULL_AND_PIECEWISE@L3 \
      --json "$OUT/compile.json" 2>&1 | grep -v "^INFO" | tail -25
  log "lab01 recording"
  timeout 150 $PY -m minivllm.labs.record lab01 --model "$CK" --out "$OUT/lab01.json" 2>&1 | tail -8
fi

if [ "$stage" = final ]; then  # one call, most important first; each stage writes its JSON when done
  log "bench throughput"
  timeout 140 $PY -m minivllm.cli bench throughput --model "$CK" --max-model-len 2048 --compare hf \
      --hf-time-cap 35 --check-correctness --json "$OUT/throughput.json" 2>&1 | grep -v "^INFO" | grep -v "it/s" | tail -40
  log "bench compile levels"
  timeout 170 $PY -m minivllm.cli bench latency --model "$CK" --batch-sizes 1,8,64 --output-len 128 \
      --modes FULL,FULL@L2,NONE@L2,NONE@L3,FULL_AND_PIECEWISE@L3 \
      --json "$OUT/compile.json" 2>&1 | grep -v "^INFO" | grep -v "it/s" | tail -30
  log "lab01 recording"
  timeout 90 $PY -m minivllm.labs.record lab01 --model "$CK" --out "$OUT/lab01.json" 2>&1 | grep -v "it/s" | tail -8
  log "GPU tests (graphs)"
  MINIVLLM_GPU_MODEL=$CK timeout 80 $PY -m pytest -x -q -p no:cacheprovider tests/test_cuda_graphs_gpu.py \
      2>&1 | grep -v "^INFO" | tail -12 | tee "$OUT/gpu_tests.log"
fi

log "done"
