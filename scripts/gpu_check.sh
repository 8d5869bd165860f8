#!/usr/bin/env bash
# GPU checks by purpose, on a CUDA machine (torch 2.11 + triton 3.6 + transformers preinstalled, no internet).
#
#   MINIVLLM_GIT_COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_check.sh STAGE [STAGE ...]
#
# stages
#   tests           the GPU tests (CUDA graphs, kernels, custom ops per engine, async scheduling vs HF)
#   latency         TPOT per batch size: eager and every graph mode, transformers eager and compiled
#   throughput      nano-vllm's workload, transformers continuous batching beside it, the correctness check
#   kernels         decode/prefill attention vs copy bandwidth and SDPA, the GEMV vs cuBLAS
#   compile         TPOT per compile level with and without graphs, cold vs warm startup
#   labs            every lab's recorder (`python -m minivllm_labs.record all`, into $RES/<gpu-slug>/), then
#                   every notebook end to end (labs-gpu)
#   device-kit      the labs' GPU toggles, record all's device measurement, `minivllm demo`'s table and footnote
#   modes           one process per graph mode (eager, PIECEWISE, FULL_DECODE_ONLY, FULL_AND_PIECEWISE, FULL;
#                   MODES="..." picks): TPOT at batch 1 and 64, a 512-token prefill, greedy tokens vs eager
#                   in bf16 (scripts/modes_check.py); the comparison in $OUT/modes.json; MODES_TOGETHER=1 adds
#                   issue 42's order (eager, FULL_DECODE_ONLY, FULL, PIECEWISE, PIECEWISE+ops) built in ONE process
#                   -> $OUT/modes_together.json, the notebook's case beside one engine per process
#                   (MODES_TOGETHER_ROUNDS=N: N such processes, per-round ratios and medians); MODES_ROUNDS=N
#                   alternates the per-mode processes N times (medians, ranges, per-round ratios); MODES_PROFILE=1 adds
#                   scripts/maint/host_profile.py of a PIECEWISE batch-1 step (cProfile)
#   all             the six above (two lanes on a two-GPU machine)
#   piecewise       issue 26's PIECEWISE host time: `modes` for eager, PIECEWISE, FULL_AND_PIECEWISE and FULL with
#                   MODES_PROFILE=1 (TPOT at batch 1 and 64 in one run, the host profile of a PIECEWISE batch-1
#                   step, both copied to $OUT), then the every-batch-size graph test (FULL's graphs against the
#                   same kernels run eagerly; FULL vs eager printed); PIECEWISE_TESTS=0 skips the test
#   full            vLLM's FULL mode (graphs of any batch, the unified attention kernel): its GPU tests, and the
#                   512-token prefill (TTFT at batch 1) under eager, PIECEWISE and FULL in one run
#   invariance      batch-invariant mode: `bench invariance` (default vs batch_invariant in one run: greedy
#                   batched vs one by one, logprobs at batch 1 vs 64, TPOT and tok/s) -> invariance.json, and
#                   its GPU tests (tests/engine/test_batch_invariance_gpu.py, the invariant matmul's kernel tests)
#   lab02-padding-kernels   the kernels the full decode graphs of sizes 5 and 8 replay (why graph 8 replays
#                   faster than graph 5 in Lab 02): scripts/maint/padding_kernels.py -> padding_kernels.json
#   logprobs        the cost of logprobs=5: bench latency at batch 1 and 64 (FULL_AND_PIECEWISE), each batch without
#                   then with logprobs on the same engine, and the throughput workload without then with; then
#                   each op of the path alone (scripts/maint/logprobs_ops.py -> logprobs_ops.json); that logprobs
#                   off leaves the step unchanged is the ab stage against the tree before them
#   first-start     issue 42's first start on an unshipped shape: `bench startup` (cold = empty caches, then
#                   warm) of the shipped Qwen3-0.6B shape and of a Llama-3.2-1B shape the H200 file lacks (its
#                   GEMV shapes autotuned over the rule's candidates), then batch-1 TPOT of the Llama shape with
#                   the rule's picks against the full 26-config search (MINIVLLM_GEMV_CONFIGS=autotune), each
#                   in a fresh process with an empty Triton cache, alternated FS_REPS times (default 2)
#   ab              the tree before (MINIVLLM_AB_BASE=<commit>) against this one, interleaved in one run:
#                   TPOT at batch 1, 8, 64 with default settings, throughput on the standard workload
#                   (AB_REPS rounds, default 2; AB_LATENCY=0 or AB_THROUGHPUT=0 runs only the other half)
#   leak            six engines built and dropped with `del` in one process (default, eager, mode 3, FULL, PIECEWISE,
#                   default): free memory, live tensors and KV tokens before each (scripts/maint/engine_leak.py ->
#                   engine_leak.json, also copied to $OUT); issue 41's check: the sixth's KV tokens within 1% of
#                   the first's, free memory within 0.2 GiB; LEAK_MODULE_LOADING=EAGER runs it once more with every
#                   kernel image loaded when the context is created (-> engine_leak_eager.json);
#                   LEAK_WARM_LIBRARIES=1 once more after the engines' library calls alone (cuBLAS, sampler ops;
#                   -> engine_leak_libs.json); LEAK_DEFAULT=0 skips the plain walk
#   bisect-kernels  the decode attention kernel at each commit of MINIVLLM_BISECT_COMMITS (default: every
#                   commit that touched the decode kernel, its launcher or bench kernels since 40cba88)
#   gemv-floor      batch-1 GEMV configs for the Llama-3.2-1B and Qwen3-0.6B shapes, chosen by TPOT inside the FULL
#                   graph (scripts/maint/gemv_tune.py): every config compiled and checked against F.linear first,
#                   then per model a before (today's configs) / tuned / tuned-without-LOOP_STAGES A/B with the byte
#                   floor at the copy bandwidth; $OUT/gemv_floor/ gets NVIDIA_H200.json (the merged table, for
#                   minivllm/kernels/configs/gemv/), both tune JSONs and summary.log (GEMV_FLOOR_BATCHES=1,2 tunes
#                   the 2-row shapes too; GEMV_FLOOR_DRY=1 prints the commands only)
#   fp8             quantization="fp8", Lab 12's record (python -m minivllm_labs.record lab12 -> $OUT/lab12.json, the file
#                   for assets/results/h200/): scripts/fp8_check.py's variants, TPOT of bf16 and FP8 weights at batch 1
#                   and 64 against the byte floor at the copy bandwidth, FP8 at mode 3 with and without the fusion
#                   passes (pass_config), 2 rounds interleaved, kernels per batch-1 step, the logprob gap of bf16 and
#                   FP8 vs fp32, the pass trace of one piece; then the FP8 kernel and pass tests
#   spec            speculative decoding (n-gram, issue 47): its GPU tests (greedy with speculation vs eager without, in
#                   every graph mode, embedded model in bf16 and the Qwen3-0.6B shape in fp32), then `bench latency`
#                   on the Qwen3-0.6B shape at batch 1 and 64 with k = 0, 2, 4 in one run, on prompts where lookup
#                   works (a random run of 16 tokens repeated: --prompt-kind repeat), k = 0 with async scheduling
#                   on (the default) and off (speculation runs without it) -> $OUT/spec.json (SPEC_MODES picks the
#                   modes, default "FULL_AND_PIECEWISE,FULL_AND_PIECEWISE+sync")
#   host-time       issue 42's host time per forward (scripts/maint/host_time.py): one engine per path (eager, the
#                   compiled forward without graphs, FULL_DECODE_ONLY, PIECEWISE, FULL; HOST_TIME_PATHS picks), a
#                   512-token prefill and a 1-token decode each, host (until the call returns) and wall ms, the
#                   cProfile of the compiled path (HOST_TIME_PROFILE names others) -> $OUT/host_time.json;
#                   HOST_TIME_PAIRED=1: every path's engine alive, their prefill forwards alternated for
#                   HOST_TIME_ROUNDS rounds (default 30), the ratio to the first path per round;
#                   HOST_TIME_CC='{"mode": 3}' adds a compilation_config (an asked-for mode 3);
#                   MINIVLLM_AB_BASE=<commit> runs the same script on that tree first -> $OUT/host_time_old.json
#   prepare-trees DIR COMMIT...   (run where the git history is, not on the GPU) DIR/<commit>.tar.gz of each
#                   commit's minivllm/, for a device that gets a copy of the tree without .git
#
# Old trees for ab / bisect-kernels come from `git worktree add` when this checkout has the commits, else
# from MINIVLLM_TREES_DIR/<commit>.tar.gz (prepare-trees). Every JSON written gets a "gpu_check" entry: the
# commit of the tree that ran (MINIVLLM_GIT_COMMIT wins: a copied tree's .git, if any, may name another),
# the stage and the date. Results go to $OUT: results.tar.gz, summary.log, summary.json (the device tool
# returns a few files). Each step runs under a deadline (MINIVLLM_GPU_DEADLINE_S, default 560 s).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "${1:-}" = prepare-trees ]; then
  dir=$2; shift 2; mkdir -p "$dir"
  for c in "$@"; do git archive --format=tar.gz -o "$dir/$(git rev-parse --short "$c").tar.gz" "$c" minivllm; done
  ls -l "$dir"; exit 0
fi

OUT=${OUT:-/tmp/minivllm_out}
RES=${MINIVLLM_RESULTS_DIR:-/tmp/minivllm_results}  # two invocations side by side need two
mkdir -p "$OUT" "$RES"
export PYTHONPATH=$ROOT:$ROOT/labs${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The labs' packages (plotly, nbclient, ...) the device lacks travel as wheels in .whl (carried, gitignored): the
# labs' recorders import their views, which draw with plotly, and labs-gpu runs notebooks. No network there.
if [ -d "$ROOT/.whl" ] && ! python3 -c "import plotly" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$ROOT"/.whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
PY=python3
CK=/tmp/ckpt/qwen3-0.6b
START=$(date +%s)
DEADLINE=$((START + ${MINIVLLM_GPU_DEADLINE_S:-560}))
if [ -z "${MINIVLLM_GIT_COMMIT:-}" ]; then
  MINIVLLM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  [ -n "$(git status --porcelain 2>/dev/null)" ] && export MINIVLLM_GIT_DIRTY=1
  echo "MINIVLLM_GIT_COMMIT not given: recording $MINIVLLM_GIT_COMMIT (this checkout's HEAD)"
fi
export MINIVLLM_GIT_COMMIT
log() { echo "=== $(date -u +%H:%M:%S) [lane ${LANE:-0}] $*"; }

# step NAME CAP_S CMD...: CMD under a timeout of min(CAP_S, time left), its output in $RES/NAME.log
step() {
  local name=$1 cap=$2; shift 2
  local left=$((DEADLINE - $(date +%s) - 10))
  if [ "$left" -lt 30 ]; then log "SKIP $name (deadline)"; echo "$name skipped" >> "$RES/steps.txt"; return; fi
  [ "$cap" -gt "$left" ] && cap=$left
  log "$name (cap ${cap}s)"
  local t0=$(date +%s)
  timeout "$cap" bash -c '"$@"' "$name" "$@" > "$RES/$name.log" 2>&1  # bash -c: CMD may be an exported function
  local rc=$?
  log "$name exit $rc"
  echo "$name $rc $(( $(date +%s) - t0 ))" >> "$RES/steps.txt"
  grep -v -E "^INFO|it/s\]|it/s, |^\s*$" "$RES/$name.log" | tail -"${TAILN:-25}"
}

BENCH="$PY -m minivllm.cli bench"  # word-split on purpose: `step` runs its command through timeout

# ---- stages -------------------------------------------------------------------------------------------------
tests() {  # TESTS="graphs" or "kernels" runs one half; PYTEST_K="expr" passes -k to both, PYTEST_ARGS more
  local k=(${PYTEST_ARGS:-}); [ -n "${PYTEST_K:-}" ] && k+=(-k "$PYTEST_K")
  [[ " ${TESTS:-graphs kernels} " == *" graphs "* ]] && TAILN=15 MINIVLLM_GPU_MODEL=$CK step tests_graphs "${TESTS_GRAPHS_CAP_S:-450}" \
    $PY -m pytest -q -p no:cacheprovider "${k[@]}" tests/engine/test_cuda_graphs_gpu.py \
    "tests/engine/test_async_scheduling.py::test_async_chunked_prefill_and_preemption_match_hf"
  [[ " ${TESTS:-graphs kernels} " == *" kernels "* ]] && TAILN=15 step tests_kernels "${TESTS_KERNELS_CAP_S:-300}" \
    $PY -m pytest -q -p no:cacheprovider "${k[@]}" tests/kernels/test_kernels.py tests/kernels/test_elementwise_kernels.py \
    tests/kernels/test_custom_op_selection.py tests/kernels/test_unified_attention.py
  return 0
}
latency() {
  TAILN=40 step latency 330 $BENCH latency --model "$CK" --max-model-len 512 \
    --modes eager,FULL,PIECEWISE,FULL_AND_PIECEWISE --compare hf,hf-compile --hf-batch-sizes 1 \
    --json "$RES/latency.json"
}
throughput() {
  TAILN=40 step throughput 200 $BENCH throughput --model "$CK" --max-model-len 2048 --compare hf --hf-time-cap 25 \
    --check-correctness --json "$RES/throughput.json"
}
kernels() {
  TAILN=60 step kernels 150 $BENCH kernels --json "$RES/kernels.json"
  TAILN=30 step kernels_gemv 60 $BENCH kernels --gemv --json "$RES/kernels_gemv.json"
}
compile() {
  TAILN=40 step compile 330 $BENCH latency --model "$CK" --max-model-len 512 --batch-sizes 1,8,64 \
    --modes eager,FULL,NONE@L1,NONE@L2,FULL@L2,NONE@L3,FULL_AND_PIECEWISE@L3 --json "$RES/compile.json"
  step startup 120 $BENCH startup --model "$CK" --max-model-len 512 --compilation-config '{"level": 3}' \
    --json "$RES/startup.json"
}
full() {
  TAILN=15 step tests_full_kernel 200 $PY -m pytest -q -p no:cacheprovider tests/kernels/test_unified_attention.py
  TAILN=15 MINIVLLM_GPU_MODEL=$CK step tests_full 400 $PY -m pytest -q -p no:cacheprovider -s \
    tests/engine/test_cuda_graphs_gpu.py -k "full_mode or every_batch_size"
  TAILN=20 step prefill512 300 $BENCH latency --model "$CK" --max-model-len 1024 --input-len 512 --output-len 16 \
    --batch-sizes 1 --modes eager,PIECEWISE,FULL --json "$RES/prefill512_modes.json"
}
logprobs() {  # the same-run A/B of logprobs off vs logprobs=5 (LOGPROBS_K picks another K), then its ops
  TAILN=20 step logprobs_latency 330 $BENCH latency --model "$CK" --max-model-len 512 --batch-sizes 1,64 \
    --modes FULL_AND_PIECEWISE --logprobs "${LOGPROBS_K:-5}" --json "$RES/logprobs_latency.json"
  TAILN=20 step logprobs_throughput 330 $BENCH throughput --model "$CK" --max-model-len 2048 \
    --logprobs "${LOGPROBS_K:-5}" --json "$RES/logprobs_throughput.json"
  TAILN=20 step logprobs_ops 90 $PY scripts/maint/logprobs_ops.py --k "${LOGPROBS_K:-5}" --json "$RES/logprobs_ops.json"
}
invariance() {
  TAILN=20 step invariance 420 $BENCH invariance --model "$CK" --max-model-len 1024 --json "$RES/invariance.json"
  TAILN=15 MINIVLLM_GPU_MODEL=$CK step tests_invariance 540 $PY -m pytest -q -p no:cacheprovider \
    tests/engine/test_batch_invariance_gpu.py tests/kernels/test_batch_invariance.py
}
leak_walk() {  # NAME [ARGS...]: one six-engine walk -> $RES/NAME.json, copied to $OUT
  local name=$1; shift
  TAILN=14 step "$name" 420 $PY scripts/maint/engine_leak.py --model "$CK" "$@" --json "$RES/$name.json"
  cp "$RES/$name.json" "$OUT/" 2>/dev/null
}
leak() {
  [ "${LEAK_DEFAULT:-1}" = 1 ] && leak_walk engine_leak
  [ "${LEAK_WARM_LIBRARIES:-0}" = 1 ] && leak_walk engine_leak_libs --warm-libraries
  [ -n "${LEAK_MODULE_LOADING:-}" ] && CUDA_MODULE_LOADING=$LEAK_MODULE_LOADING leak_walk engine_leak_eager
  return 0
}
host_time() {
  local a=(--model "$CK" --dtype bfloat16 --max-model-len 1024 --profile "${HOST_TIME_PROFILE:-compiled}"
           --paths "${HOST_TIME_PATHS:-eager,compiled,full_decode_only,piecewise,full}")
  [ -n "${HOST_TIME_CC:-}" ] && a+=(--compilation-config "$HOST_TIME_CC")
  [ "${HOST_TIME_PAIRED:-0}" = 1 ] && a+=(--paired --repeats "${HOST_TIME_ROUNDS:-30}")
  local base=${MINIVLLM_AB_BASE:-} old
  if [ -n "$base" ] && old=$(tree "$base"); then  # the new script on the old engine: same measurement
    TAILN=14 step host_time_old 280 in_tree "$old" "$base" $PY "$ROOT/scripts/maint/host_time.py" "${a[@]}" \
      --json "$RES/host_time_old.json"
    ran_at host_time_old.json "$base"
  fi
  TAILN=60 step host_time 280 $PY scripts/maint/host_time.py "${a[@]}" --json "$RES/host_time.json"
  cp "$RES"/host_time*.json "$OUT/" 2>/dev/null
  return 0
}
padding_kernels() {
  TAILN=10 step padding_kernels 180 $PY scripts/maint/padding_kernels.py --model "$CK" --sizes 5,8 \
    --json "$RES/padding_kernels.json"
}
modes() {  # MODES="eager PIECEWISE" runs only those (eager first: the others' tokens are compared with it)
  # MODES_ROUNDS=N: the modes' processes alternate N times (eager, A, B, eager, A, B, ...), so a drift of the
  # machine's host speed hits every mode alike; modes.json then gives medians, [min, max] and per-round ratios
  local m i n=${MODES_ROUNDS:-1}
  rm -f "$RES"/modes_run_*.json
  for i in $(seq "$n"); do
    for m in ${MODES:-eager PIECEWISE FULL_DECODE_ONLY FULL_AND_PIECEWISE FULL}; do
      TAILN=6 step "modes_${m}_$i" "${MODES_CAP_S:-75}" $PY scripts/modes_check.py --model "$CK" --mode "$m" \
        --json "$RES/modes_run_${m}_$i.json"
    done
  done
  TAILN=80 step modes_compare 30 $PY scripts/modes_check.py --compare "$RES/modes_run_eager_1.json" \
    "$RES"/modes_run_*.json --json "$RES/modes.json"
  cp "$RES/modes.json" "$OUT/modes.json" 2>/dev/null
  # MODES_TOGETHER=1: issue 42's order built in ONE process, as a notebook does (modes_check.py --modes);
  # MODES_TOGETHER_ROUNDS=N runs that process N times and gives per-round ratios and their medians
  if [ "${MODES_TOGETHER:-0}" = 1 ]; then
    rm -f "$RES"/modes_together_*.json
    for i in $(seq "${MODES_TOGETHER_ROUNDS:-1}"); do
      TAILN=20 step "modes_together_$i" "${MODES_TOGETHER_CAP_S:-240}" $PY scripts/modes_check.py --model "$CK" \
        --modes eager,FULL_DECODE_ONLY,FULL,PIECEWISE,PIECEWISE+ops --json "$RES/modes_together_$i.json"
    done
    ls "$RES"/modes_together_*.json >/dev/null 2>&1 && TAILN=30 step modes_together 30 $PY scripts/modes_check.py \
      --together "$RES"/modes_together_*.json --json "$RES/modes_together.json" \
      && cp "$RES/modes_together.json" "$OUT/" 2>/dev/null
  fi
  # MODES_PROFILE=1: where one PIECEWISE decode step's host time goes (cProfile)
  [ "${MODES_PROFILE:-0}" = 1 ] && TAILN=40 step modes_profile 90 $PY scripts/maint/host_profile.py --model "$CK" \
    --max-model-len 512 --batch-size 1 --mode PIECEWISE --steps 8 --json "$RES/profile_piecewise.json"
  return 0
}
piecewise() {
  MODES="${MODES:-eager PIECEWISE FULL_AND_PIECEWISE FULL}" MODES_PROFILE=1 MODES_CAP_S=${MODES_CAP_S:-70} modes
  cp "$RES/profile_piecewise.json" "$OUT/" 2>/dev/null
  [ "${PIECEWISE_TESTS:-1}" = 1 ] && TAILN=30 MINIVLLM_GPU_MODEL=$CK step tests_every_batch 240 $PY -m pytest -q \
    -p no:cacheprovider -s tests/engine/test_cuda_graphs_gpu.py -k every_batch_size
  return 0
}
labs() {  # LABS="lab01 lab02" records only those; LABS_GPU=0 skips executing the notebooks
  # every lab's recorder in its own process, into $RES/<gpu-slug>/ (h200 on the reference machine: copy those
  # files to assets/results/h200/, then `python -m minivllm_labs.record index` updates its index.yaml); a
  # failed lab is named with its reason and the others still run
  local only=${LABS:+--only ${LABS// /,}}
  TAILN=30 step labs_record "${LABS_RECORD_CAP_S:-560}" $PY -m minivllm_labs.record all --model "$CK" \
    --timeout "${LAB_CAP_S:-300}" --out-dir "$RES/$($PY -c 'from minivllm_labs.devices import this_gpu_slug as s; print(s())')" $only
  # every notebook end to end, GPU-only cells included (the make target would build a venv: the device has
  # no internet, so the same command runs with the machine's python and the carried wheels)
  # (LABS_GPU_PATTERN="03 05" runs only the notebooks whose name holds one of them, in that order)
  [ "${LABS_GPU:-1}" = 1 ] && TAILN=30 step labs_gpu "${LABS_GPU_CAP_S:-540}" $PY -m minivllm_labs.build \
    --gpu "$RES/labs_gpu" ${LABS_GPU_PATTERN:-}
  return 0
}

fp8() {
  TAILN=40 step fp8 "${FP8_CAP_S:-480}" $PY -m minivllm_labs.record lab12 --model "$CK" --out "$RES/lab12.json"
  cp "$RES/lab12.json" "$OUT/" 2>/dev/null
  TAILN=10 step tests_fp8 120 $PY -m pytest -q -p no:cacheprovider tests/kernels/test_fp8_kernels.py \
    tests/engine/test_passes.py
  return 0
}
spec() {  # speculative decoding: the tests, then TPOT with k = 0, 2, 4 in one run
  local cfg='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5}'
  TAILN=20 MINIVLLM_GPU_MODEL=$CK step tests_spec "${SPEC_TESTS_CAP_S:-280}" $PY -m pytest -q -p no:cacheprovider -s \
    tests/engine/test_spec_decode_gpu.py
  TAILN=24 step spec_latency "${SPEC_BENCH_CAP_S:-240}" $BENCH latency --model "$CK" --max-model-len 512 \
    --batch-sizes 1,64 --modes "${SPEC_MODES:-FULL_AND_PIECEWISE,FULL_AND_PIECEWISE+sync}" --speculative-config "$cfg" \
    --spec-tokens 0,2,4 --prompt-kind repeat --input-len 128 --output-len 128 --json "$RES/spec.json"
  $PY - "$RES/spec.json" "$MINIVLLM_GIT_COMMIT" <<'PYEOF'  # the gpu_check entry now: $OUT gets it before the final stamp
import datetime, json, pathlib, sys
f = pathlib.Path(sys.argv[1])
if f.exists():
    data = json.loads(f.read_text())
    data["gpu_check"] = {"commit": sys.argv[2], "stages": "spec",
                         "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    f.write_text(json.dumps(data, indent=2))
PYEOF
  cp "$RES/spec.json" "$OUT/" 2>/dev/null
  return 0
}
device_kit() {  # the labs' GPU-only toggle options, the device folders, the demo on a GPU
  TAILN=20 step device_kit_tests 420 $PY -m pytest -q -p no:cacheprovider -k "not redraws" \
    tests/labs/test_toggles.py tests/labs/test_devices.py tests/engine/test_demo.py
  TAILN=20 step demo 200 $PY -m minivllm.demo
  $PY -c 'import json; from minivllm_labs.devices import measure_device; print(json.dumps(measure_device()))' \
    | tee "$RES/measure_device.json"
}

gemv_floor() {  # Llama first (the 70% goal); a tune past its budget keeps the start configs of the shapes left
  local lk=/tmp/ckpt/llama-3.2-1b b=${GEMV_FLOOR_BATCHES:-1} dry=${GEMV_FLOOR_DRY:+echo} m name ck cap budget
  [ -d "$lk" ] || $dry $PY -m minivllm.tools.make_random_checkpoint --shape llama-3.2-1b --dtype bfloat16 "$lk"
  for m in llama:"$lk":220:165 qwen:"$CK":180:130; do  # name:checkpoint:cap_s:budget_s (no shape starts past it)
    IFS=: read -r name ck cap budget <<< "$m"  # --warm-workers: compile + check every config vs F.linear first
    TAILN=22 $dry step "gemv_floor_$name" "$cap" $PY scripts/maint/gemv_tune.py --model "$ck" --batch-sizes "$b" \
      --gpu-memory-utilization 0.5 --warm-workers 12 --start shipped --legacy-autotune --ab-repeats 3 \
      --budget-s "$budget" --save --json "$RES/gemv_floor_$name.json"
  done
  $dry $PY scripts/maint/gemv_tune.py --summary "$RES"/gemv_floor_llama.json "$RES"/gemv_floor_qwen.json \
    2>&1 | tee "$RES/gemv_floor_summary.log"
  mkdir -p "$OUT/gemv_floor"
  cp minivllm/kernels/configs/gemv/NVIDIA_H200.json "$RES"/gemv_floor_*.json "$OUT/gemv_floor/" 2>/dev/null
  cp "$RES/gemv_floor_summary.log" "$OUT/gemv_floor/summary.log" 2>/dev/null
  return 0
}

first_start() {
  local lk=/tmp/ckpt/llama-3.2-1b i who
  [ -d "$lk" ] || $PY -m minivllm.tools.make_random_checkpoint --shape llama-3.2-1b --dtype bfloat16 "$lk" >/dev/null
  TAILN=25 step first_start_qwen3 200 $BENCH startup --model "$CK" --max-model-len 1024 --json "$RES/first_start_qwen3.json"
  TAILN=25 step first_start_llama 240 $BENCH startup --model "$lk" --max-model-len 1024 --json "$RES/first_start_llama.json"
  for i in $(seq "${FS_REPS:-2}"); do  # rule vs full search, alternated; each with its own empty Triton cache
    for who in rule autotune; do
      local env=(TRITON_CACHE_DIR=/tmp/fs_triton_${who}_$i MINIVLLM_CACHE_DIR=/tmp/fs_cache_${who}_$i)
      [ "$who" = autotune ] && env+=(MINIVLLM_GEMV_CONFIGS=autotune)
      TAILN=12 step "first_start_tpot_${who}_$i" 200 env "${env[@]}" $BENCH latency --model "$lk" \
        --max-model-len 1024 --batch-sizes 1 --input-len 128 --output-len 128 --modes FULL_AND_PIECEWISE \
        --json "$RES/first_start_tpot_${who}_$i.json"
    done
  done
  $PY scripts/maint/first_start_summary.py "$RES" | tee "$RES/first_start_summary.log"
  cp "$RES"/first_start_*.json "$RES/first_start_summary.log" "$OUT/" 2>/dev/null
  return 0
}

# tree COMMIT: a directory holding COMMIT's minivllm/ (a git worktree, or the prepared tarball unpacked)
tree() {
  local c=$1 dir=/tmp/minivllm_trees/$1
  [ -d "$dir/minivllm" ] && { echo "$dir"; return; }
  mkdir -p /tmp/minivllm_trees
  if git cat-file -e "$c^{commit}" 2>/dev/null; then
    git worktree add --detach -f "$dir" "$c" >/dev/null 2>&1 && { echo "$dir"; return; }
  fi
  if [ -f "${MINIVLLM_TREES_DIR:-/nonexistent}/$c.tar.gz" ]; then
    mkdir -p "$dir" && tar -xzf "$MINIVLLM_TREES_DIR/$c.tar.gz" -C "$dir" && { echo "$dir"; return; }
  fi
  echo "no tree for $c: this checkout lacks the commit (no .git?) and MINIVLLM_TREES_DIR has no $c.tar.gz" >&2
  return 1
}
# in_tree DIR COMMIT CMD...: CMD run from the tree in DIR, recording COMMIT (exported: `step` runs it)
in_tree() { local dir=$1 c=$2; shift 2; (cd "$dir" && PYTHONPATH=$dir MINIVLLM_GIT_COMMIT=$c exec "$@"); }
export -f in_tree
ran_at() { echo "$1 $2" >> "$RES/commits.txt"; }  # ran_at FILE.json COMMIT

ab() {  # the must-not-change A/B: old and new tree alternate, so drift of the machine hits both alike
  local base=${MINIVLLM_AB_BASE:?set MINIVLLM_AB_BASE to the commit before the change}
  local old i who dir c
  old=$(tree "$base") || return 1
  for i in $(seq "${AB_REPS:-2}"); do  # AB_LATENCY=0 / AB_THROUGHPUT=0 leave a half out (one call each)
    [ "${AB_LATENCY:-1}" = 1 ] && for who in old new; do
      dir=$ROOT; c=$MINIVLLM_GIT_COMMIT; [ "$who" = old ] && { dir=$old; c=$base; }
      TAILN=12 step "ab_latency_${who}_$i" 150 in_tree "$dir" "$c" $PY -m minivllm.cli bench latency --model "$CK" \
        --max-model-len 512 --batch-sizes 1,8,64 --modes FULL_AND_PIECEWISE --json "$RES/ab_latency_${who}_$i.json"
      ran_at "ab_latency_${who}_$i.json" "$c"
    done
    [ "${AB_THROUGHPUT:-1}" = 1 ] || continue
    for who in old new; do
      dir=$ROOT; c=$MINIVLLM_GIT_COMMIT; [ "$who" = old ] && { dir=$old; c=$base; }
      TAILN=8 step "ab_throughput_${who}_$i" 150 in_tree "$dir" "$c" $PY -m minivllm.cli bench throughput \
        --model "$CK" --max-model-len 2048 --json "$RES/ab_throughput_${who}_$i.json"
      ran_at "ab_throughput_${who}_$i.json" "$c"
    done
  done
  $PY scripts/maint/ab_summary.py "$RES" "$base" "$MINIVLLM_GIT_COMMIT" | tee "$RES/ab_summary.log"
}

# Commits that touched the decode kernel, its PDL launch, or bench kernels since the 90.9% record (40cba88),
# oldest first, then the commit the 71.8% run used and this tree (see `git log 40cba88..HEAD -- ...`).
BISECT_DEFAULT="40cba88 fec5d27 f22a734 1fdd512 2d4d9b8 0ab2903 2a63dee 853377a 4fff55c 4456147 288d026 b2aa4ed"
bisect_kernels() {
  local c dir
  for c in this ${MINIVLLM_BISECT_COMMITS:-$BISECT_DEFAULT}; do  # this tree first: the figure that holds
    if [ "$c" = this ]; then dir=$ROOT; c=$MINIVLLM_GIT_COMMIT; else dir=$(tree "$c") || continue; fi
    # the probe times that tree's decode kernel three ways: as bench kernels does (do_bench from the host),
    # replayed from a CUDA graph, and the launcher's host time; a method change cannot hide in it
    TAILN=12 step "bisect_$c" 90 $PY scripts/maint/decode_kernel_probe.py "$dir" --commit "$c" \
      --json "$RES/bisect_$c.json"
    ran_at "bisect_$c.json" "$c"
  done
  $PY scripts/maint/decode_kernel_probe.py --summary "$RES" | tee "$RES/bisect_summary.log"
}

# two_lanes "CMDS0" "CMDS1": side by side on GPUs 0 and 1 (one after the other on a one-GPU machine, so two
# timings never share a GPU); each lane has its own compile cache
two_lanes() {
  (export CUDA_VISIBLE_DEVICES=0 LANE=0 MINIVLLM_CACHE_DIR=/tmp/minivllm_cache0; eval "$1") > "$RES/lane0.out" 2>&1 &
  [ "$NGPU" -ge 2 ] || wait
  (export CUDA_VISIBLE_DEVICES=$((NGPU - 1)) LANE=1 MINIVLLM_CACHE_DIR=/tmp/minivllm_cache1; eval "$2") \
    > "$RES/lane1.out" 2>&1 &
  wait
  cat "$RES/lane0.out" "$RES/lane1.out"
}

log "env (tree $MINIVLLM_GIT_COMMIT)"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
if [ ! -d "$CK" ]; then  # written aside and renamed: a second invocation started beside this one never reads half
  $PY -m minivllm.tools.make_random_checkpoint --shape qwen3-0.6b --dtype bfloat16 "$CK.$$" >/dev/null \
    && { mv -T "$CK.$$" "$CK" 2>/dev/null || rm -rf "$CK.$$"; }
fi
NGPU=$(nvidia-smi -L | wc -l)
STAGES="${*:-all}"
for stage in $STAGES; do
  case "$stage" in
    all) two_lanes "tests; kernels; labs" "latency; throughput; compile" ;;
    tests) tests ;;
    latency) latency ;;
    throughput) throughput ;;
    kernels) kernels ;;
    compile) compile ;;
    full) full ;;
    modes) modes ;;
    first-start) first_start ;;
    piecewise) piecewise ;;
    invariance) invariance ;;
    labs) labs ;;
    logprobs) logprobs ;;
    lab02-padding-kernels) padding_kernels ;;
    gemv-floor) gemv_floor ;;
    device-kit) device_kit ;;
    fp8) fp8 ;;
    spec) spec ;;
    ab) ab ;;
    leak) leak ;;
    host-time) host_time ;;
    bisect-kernels) bisect_kernels ;;
    *) echo "unknown stage $stage (see the top of $0)"; exit 2 ;;
  esac
done

# every JSON records the tree that produced it
$PY - "$RES" "$MINIVLLM_GIT_COMMIT" "$STAGES" <<'EOF'
import datetime, json, pathlib, sys
res, commit, stages = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
stamp = {"commit": commit, "stages": stages, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
ran_at = dict(line.split() for line in (res / "commits.txt").read_text().splitlines()) if (res / "commits.txt").exists() else {}
for f in res.glob("*.json"):
    try:
        data = json.loads(f.read_text())
    except ValueError:
        continue
    if isinstance(data, dict):
        data["gpu_check"] = {**stamp, "commit": ran_at.get(f.name, commit)}  # ab / bisect: the old tree's
        f.write_text(json.dumps(data, indent=2))
steps = [line.split() for line in (res / "steps.txt").read_text().splitlines()] if (res / "steps.txt").exists() else []
(res / "summary.json").write_text(json.dumps({**stamp, "steps": [{"name": s[0], "exit": s[1], "seconds": s[2] if len(s) > 2 else None} for s in steps]}, indent=2))
EOF
cp "$RES/summary.json" "$OUT/summary.json"
tar -czf "$OUT/results.tar.gz" -C "$RES" .
grep -h -E "^===|passed|failed|error|x the|of the copy|ratio|new/old" "$RES"/*.out "$RES"/*.log 2>/dev/null > "$OUT/summary.log"
log "done in $(( $(date +%s) - START )) s"
