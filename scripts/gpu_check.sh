#!/usr/bin/env bash
# All GPU work of a session in one script: GPU tests, then benchmarks, JSON under $OUT.
#   bash scripts/gpu_check.sh tests     # kernels + CUDA-graph tests, kernel bench (about 5 min)
#   bash scripts/gpu_check.sh bench     # latency, throughput, compile, startup, lab01 recordings
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

if [ "$stage" = tests ]; then
  log "GPU tests"
  MINIVLLM_GPU_MODEL=$CK timeout 300 $PY -m pytest -x -q -p no:cacheprovider tests/test_kernels.py \
      tests/test_cuda_graphs_gpu.py 2>&1 | tail -40 | tee "$OUT/gpu_tests.log"
  log "bench kernels"
  timeout 150 $PY -m minivllm.cli bench kernels --json "$OUT/kernels.json" 2>&1 | tail -30
  log "bench latency (quick)"
  timeout 200 $PY -m minivllm.cli bench latency --model "$CK" --batch-sizes 1,8,64 \
      --modes eager,FULL_AND_PIECEWISE --compare hf-compile --hf-batch-sizes 1 --output-len 128 \
      --json "$OUT/latency_quick.json" 2>&1 | grep -v "^INFO" | tail -25
fi

if [ "$stage" = bench ]; then
  log "bench latency"
  timeout 420 $PY -m minivllm.cli bench latency --model "$CK" --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE \
      --compare hf,hf-compile --json "$OUT/latency.json" 2>&1 | grep -v "^INFO" | tail -40
fi

if [ "$stage" = bench2 ]; then
  log "bench throughput"
  timeout 300 $PY -m minivllm.cli bench throughput --model "$CK" --max-model-len 4096 --compare hf \
      --hf-time-cap 60 --check-correctness --json "$OUT/throughput.json" 2>&1 | grep -v "^INFO" | tail -30
  log "lab01 recording"
  timeout 150 $PY -m minivllm.labs.record lab01 --model "$CK" --out "$OUT/lab01.json" 2>&1 | tail -10
fi
log "done"
