"""quantization="fp8" on a GPU, in one process: decode TPOT of bf16 and FP8 weights at each batch size against
the byte floor (the bytes a step must read at the copy bandwidth), FP8 with and without the fusion passes
(compilation/passes) with the kernels each decode step launches (torch.profiler, batch 1), and the logprob
gap of bf16 and FP8 against fp32. Lab 12's recorder (labs/minivllm_labs/lab12.py, `measure_gpu`) runs it, and
so does scripts/gpu_check.sh's `fp8` stage through that recorder.

Variants (each a fresh engine; REPS rounds, the variants interleaved so drift hits all alike):
  bf16           the default engine (FULL_AND_PIECEWISE; hand-written kernels, FULL graphs of the plain forward)
  fp8            the same with quantization="fp8" (FP8 GEMV at 1-8 rows, torch._scaled_mm above)
  bf16@L3        mode 3 asked for (Inductor generates the small ops; FULL graphs capture the compiled forward)
  fp8@L3         the same with FP8: RMSNorm (Inductor) then the quantization op, unfused
  fp8@L3+passes  the same with pass_config eliminate_noops + fuse_norm_quant + fuse_act_quant

    python scripts/fp8_check.py --model /tmp/ckpt/qwen3-0.6b --max-model-len 512 --json fp8.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minivllm.bench.common import free_engine, maint_script, provenance, random_prompts, write_json

PASSES = {"eliminate_noops": True, "fuse_norm_quant": True, "fuse_act_quant": True}
VARIANTS = {
    "bf16": {},
    "fp8": {"quantization": "fp8"},
    "bf16@L3": {"compilation_config": {"mode": 3}},
    "fp8@L3": {"quantization": "fp8", "compilation_config": {"mode": 3}},
    "fp8@L3+passes": {"quantization": "fp8", "compilation_config": {"mode": 3, "pass_config": PASSES}},
}


def tpot(args, name: str, kwargs: dict, profile, copy_gbps: float | None) -> dict:
    from minivllm import LLM
    from minivllm.bench.latency import measure

    if args.capture_sizes and copy_gbps is not None:  # a GPU: graphs of the measured sizes only
        kwargs = {**kwargs, "cudagraph_capture_sizes": list(args.batch_sizes)}
    llm = LLM(args.model, max_model_len=args.max_model_len, **kwargs)
    try:
        vocab = llm.engine_vocab
        out = {"compile_report": llm.compile_report().get("passes")}
        for b in args.batch_sizes:
            m = measure(llm, b, args.input_len, args.output_len, vocab)
            floor = profile.byte_floor(llm, b, args.input_len + args.output_len // 2, copy_gbps)
            out[str(b)] = {"tpot_ms": m["tpot_s"] * 1e3, "decode_gpu_ms_per_step": m["decode_gpu_ms_per_step"],
                           "floor": floor,
                           "share_of_copy_bw": floor["bytes_ms"] / (m["tpot_s"] * 1e3) if "bytes_ms" in floor else None}
            print(f"{name:>14} batch {b:>3}: TPOT {m['tpot_s'] * 1e3:7.3f} ms, floor "
                  f"{floor.get('bytes_ms', float('nan')):.3f} ms ({floor['weight_mb']:.0f} MB of weights)", flush=True)
        if args.profile and copy_gbps:  # a GPU: kernels per decode step, and their time, at batch 1
            prof = profile.profile_decode(llm, 1, args.input_len, 8, vocab, copy_gbps)
            out["profile_batch1"] = {k: prof.get(k) for k in ("kernels_per_step", "kernel_us_per_step",
                                                              "busy_us_per_step", "step_wall_ms", "categories")}
            print(f"{name:>14} batch   1: {prof.get('kernels_per_step', 0):.0f} kernels per decode step, "
                  f"{prof.get('kernel_us_per_step', 0):.0f} us of kernel time", flush=True)
        return out
    finally:
        free_engine(llm)


def accuracy(args) -> dict:
    """The logprob gap (teacher-forced) of bf16 and FP8 against fp32: the embedded model on its held-out
    questions, and the benchmark checkpoint on random sequences; and the embedded model's demo answers."""
    from minivllm import LLM, SamplingParams
    from minivllm.quantization.accuracy import compare
    from minivllm.tools import tiny_task

    variants = {"bf16": {"dtype": "bfloat16"}, "fp8": {"dtype": "bfloat16", "quantization": "fp8"}}
    llm = LLM(dtype="bfloat16", quantization="fp8", enforce_eager=True)
    outs = llm.generate(tiny_task.DEMO_PROMPTS, SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)
    answers = tiny_task.score(tiny_task.DEMO_PROMPTS, [o.outputs[0].text for o in outs])
    tok = llm.get_tokenizer()
    seqs = [tok(p + a).input_ids for p, a in tiny_task.make_examples(40, seed=0, split="test")]
    free_engine(llm)
    embedded = compare(None, seqs, variants, enforce_eager=True)  # eager: the same kernels, no compile to wait for
    from minivllm.loader import check_model_dir, load_model_config

    vocab = load_model_config(check_model_dir(args.model)).vocab_size
    bench = compare(args.model, random_prompts(8, min(64, args.max_model_len - 1), vocab, seed=1), variants,
                    max_model_len=args.max_model_len, enforce_eager=True)
    print(f"accuracy: embedded fp8 demo answers {answers:.2f}; gap vs fp32 embedded {embedded}, checkpoint {bench}")
    return {"embedded_demo_answers_fp8": answers, "embedded": embedded, "checkpoint": bench}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--max-model-len", type=int, default=512)
    p.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 64])
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--no-accuracy", action="store_true")
    p.add_argument("--capture-sizes", action="store_true",
                   help="capture CUDA graphs at --batch-sizes only (a shorter startup; the same graphs for those sizes)")
    p.add_argument("--no-profile", dest="profile", action="store_false",
                   help="skip the profiled decode steps (kernels per step at batch 1; a GPU only)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    profile = maint_script("gpu_profile")
    copy_gbps = profile.copy_bandwidth_gbps()
    names = args.variants.split(",")
    runs: dict[str, list] = {n: [] for n in names}
    for _ in range(args.reps):
        for n in names:
            runs[n].append(tpot(args, n, VARIANTS[n], profile, copy_gbps))
    summary = {n: {str(b): {"tpot_ms_median": statistics.median(r[str(b)]["tpot_ms"] for r in rs),
                            "tpot_ms_all": [r[str(b)]["tpot_ms"] for r in rs],
                            "floor_ms": rs[0][str(b)]["floor"].get("bytes_ms"),
                            "weight_mb": rs[0][str(b)]["floor"]["weight_mb"]}
                   for b in args.batch_sizes} | {"kernels_per_step_batch1": [r.get("profile_batch1", {}).get(
                       "kernels_per_step") for r in rs]} for n, rs in runs.items()}
    for n, s in summary.items():
        print(n, {b: (round(v["tpot_ms_median"], 3), round(v["floor_ms"] or 0, 3)) for b, v in s.items()
                  if b != "kernels_per_step_batch1"}, "kernels/step:", s["kernels_per_step_batch1"])
    result = {"provenance": provenance(args, args.model), "copy_gbps": copy_gbps, "variants": VARIANTS,
              "summary": summary, "runs": runs}
    if not args.no_accuracy:
        result["accuracy"] = accuracy(args)
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
