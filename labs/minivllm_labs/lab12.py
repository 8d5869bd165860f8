"""Lab 12, "Inside the compiler: passes and FP8": what the engine's post-grad passes do to one compiled piece,
and what quantization="fp8" buys and costs on a decode step.

Two parts with one record. The graph part runs anywhere in seconds: one piece of the embedded model with FP8
weights (what mode 3 compiles between two attention calls: o_proj, residual add + RMSNorm, gate_up,
SiLU-and-mul, down, the next layer's residual add + RMSNorm and qkv projection, its q/k norm and RoPE) is
traced to the ATen graph Inductor's post-grad passes see (make_fx with Inductor's decompositions and a
symbolic token count, the weights as fixed-shape constants as in a compiled piece), then each pass of
compilation/passes runs on it in the order PostGradPassManager runs them: its match count and the graph
after it are the record. The GPU part is scripts/fp8_check.py's measurement (the `fp8` stage of
scripts/gpu_check.sh), reused, not copied: decode TPOT of bf16 and FP8 at batch 1 and 64 against the byte
floor, FP8 at mode 3 with and without the passes, kernels per step, and the logprob gap against fp32.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import tempfile
from pathlib import Path

import torch

from minivllm_labs.common import REPO_ROOT, round_floats

RESULTS = "assets/results/h200/lab12.json"
PASSES = ("eliminate_noops", "fuse_norm_quant", "fuse_act_quant")  # PassConfig's order: the order they run
REPS = 2  # rounds of every GPU variant (interleaved): the spread of a TPOT is its [min, max] over them
BATCHES = (1, 64)
LENS = {"input_len": 128, "output_len": 128, "max_model_len": 512}


# ---- the graph part: one piece before and after each pass ------------------------------------------------
def piece_engine(model: str | None = None):
    """The embedded model (or `model`) with FP8 weights, eager on the CPU: the accuracy's engine."""
    from minivllm import LLM

    return LLM(model, device="cpu", quantization="fp8", enforce_eager=True, max_model_len=64)


@functools.cache
def piece_model(model: str | None = None) -> torch.nn.Module:
    """The embedded model (or `model`) loaded with FP8 weights on the CPU, no engine around it: its layers are
    the piece's code, with the native ops an asked-for compile mode traces (the class default, custom_op.NATIVE)."""
    from minivllm import DEFAULT_MODEL
    from minivllm.loader import check_model_dir, load_model, load_model_config

    path = check_model_dir(model or DEFAULT_MODEL)
    return load_model(path, load_model_config(path), torch.device("cpu"), torch.float32, 64, "fp8")


def graph_part(rec: dict | None = None) -> dict:
    """The piece and its passes, and the fusion's pattern: the record's if it has them, else traced here
    (the trace is the same on every machine: no timing in it)."""
    if rec and rec.get("piece"):
        return rec
    return {"piece": run_passes(), "patterns": patterns()}


def _piece_fn(model):
    """The ops mode 3 compiles between layer 0's attention and layer 1's: the model's own layer code, called
    in the order DecoderLayer.forward calls it, from the attention output to layer 1's rotated q and k."""
    l0, l1 = model.model.layers[0], model.model.layers[1]
    attn = l1.self_attn

    def piece(attn_out, residual, positions):
        x = l0.self_attn.o_proj(attn_out)
        gate_up, residual = l0.mlp.gate_up_proj.forward_after_norm(x, residual, l0.post_attention_layernorm)
        x = l0.mlp(gate_up)
        qkv, residual = attn.qkv_proj.forward_after_norm(x, residual, l1.input_layernorm)
        q, k, v = qkv.split([attn.q_size, attn.kv_size, attn.kv_size], dim=-1)
        q, k = attn.rope_qk(positions, q, k)
        return q, k, v, residual

    return piece


def trace_piece(model: torch.nn.Module) -> tuple[torch.fx.GraphModule, dict[int, str]]:
    """The piece as the ATen graph a post-grad pass sees, and a map from each weight's id to its name.

    make_fx with Inductor's decompositions and a symbolic token count (a compiled piece serves every batch
    size); the weights enter as constants of fixed shape, moved to the top of the graph where a compiled
    piece has its parameters (a rewrite inserts its op where the pattern's first node was)."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    cfg = model.config
    tokens = 5
    args = (torch.randn(tokens, cfg.num_attention_heads * cfg.head_dim), torch.randn(tokens, cfg.hidden_size),
            torch.arange(tokens))
    gm = make_fx(_piece_fn(model), select_decomp_table(), tracing_mode="symbolic",
                 _allow_non_fake_inputs=True)(*args)
    first = next(n for n in gm.graph.nodes if n.op != "placeholder")
    for node in [n for n in gm.graph.nodes if n.op == "get_attr"]:
        first.prepend(node)
    gm.graph.lint()
    names = {id(t): name.replace("model.layers.", "L") for name, t in
             [*model.named_parameters(), *model.named_buffers()]}
    return gm, names


def _short(target) -> str:
    """aten.add.Tensor -> aten.add; minivllm.scaled_fp8_quant.default -> minivllm.scaled_fp8_quant."""
    s = str(target)
    if s.startswith(("aten.", "minivllm.")):
        return s.rsplit(".", 1)[0] if s.count(".") >= 2 else s
    return getattr(target, "__name__", s)


def graph_lines(gm: torch.fx.GraphModule, names: dict[int, str]) -> list[str]:
    """The graph as one line per op, `outputs = op(inputs)`: weights by their names, the results of a
    multi-output op unpacked on its line, placeholders as the piece's inputs."""
    label: dict[torch.fx.Node, str] = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            label[n] = n.name.removesuffix("_1")
        elif n.op == "get_attr":
            label[n] = names.get(id(getattr(gm, n.target)), n.target)
        else:
            label[n] = n.name

    def arg(a) -> str:
        if isinstance(a, torch.fx.Node):
            return label[a]
        if isinstance(a, (list, tuple)):
            return "[" + ", ".join(arg(x) for x in a) + "]"
        if isinstance(a, torch.dtype):
            return str(a).removeprefix("torch.")
        return repr(a)

    lines = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target.__name__ == "getitem":
            continue
        outs = sorted((u for u in n.users if u.op == "call_function" and u.target.__name__ == "getitem"),
                      key=lambda u: u.args[1])
        lhs = ", ".join(label[u] for u in outs) if outs else label[n]
        lines.append(f"{lhs} = {_short(n.target)}({', '.join(arg(a) for a in n.args)})")
    lines.append("return " + arg(next(n for n in gm.graph.nodes if n.op == "output").args[0]))
    return lines


def op_counts(gm: torch.fx.GraphModule) -> dict[str, int]:
    """How many of each op the graph calls (getitem and size lookups left out)."""
    out: dict[str, int] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target.__name__ not in ("getitem", "sym_size"):
            name = _short(n.target)
            if name != "aten.sym_size":
                out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items()))


def run_passes(passes: dict[str, bool] | None = None, model: torch.nn.Module | None = None) -> dict:
    """The piece before any pass, then after each pass asked for (default: all three), run one at a time in
    PostGradPassManager's order on the same graph: {"stages": [{"name", "matches", "lines", "ops"}]}."""
    from minivllm.compilation.passes.pass_config import PassConfig
    from minivllm.compilation.passes.pass_manager import PostGradPassManager

    asked = PassConfig.from_any(passes if passes is not None else dict.fromkeys(PASSES, True)).enabled()
    gm, names = trace_piece(model if model is not None else piece_model())
    stages = [{"name": "before", "matches": None, "lines": graph_lines(gm, names), "ops": op_counts(gm)}]
    for name in asked:
        manager = PostGradPassManager(PassConfig(**{name: True}))
        manager(gm.graph)
        gm.recompile()
        stages.append({"name": name, "matches": manager.matches[name], "lines": graph_lines(gm, names),
                       "ops": op_counts(gm)})
    return {"stages": stages, "passes": asked}


def patterns() -> dict[str, list[str]]:
    """What the norm fusion searches for and what it puts in its place, as the ATen graphs Inductor's
    pattern matcher compares (register_replacement traces both with fwd_only): the residual-add + RMSNorm +
    quantization pattern, eps 1e-6, fp32 example inputs (the embedded model's)."""
    from torch._inductor.pattern_matcher import fwd_only

    from minivllm.compilation.passes import fusion

    search, replace = fusion._add_norm_quant(1e-6)
    example = [torch.empty(5, 16), torch.empty(5, 16), torch.empty(16)]
    out = {}
    for key, fn in (("search", search), ("replace", replace)):
        gm = fwd_only(fn, example)
        for n, name in zip([n for n in gm.graph.nodes if n.op == "placeholder"], ("x", "residual", "weight")):
            n.name = name
        out[key] = graph_lines(gm, {})
    return out


# ---- accuracy on the CPU: the embedded model's checkable answers and the logprob gap ------------------------
def accuracy_here(llm=None, n: int = 8) -> dict:
    """The embedded model with FP8 weights against itself in fp32: the demo prompts' answers (right or not)
    and the logprob gap on `n` held-out questions (teacher-forced, quantization/accuracy.py)."""
    from minivllm import LLM, SamplingParams
    from minivllm.quantization.accuracy import logprob_gap, prompt_logprobs
    from minivllm.tools import tiny_task

    own = llm is None
    llm = llm or piece_engine()
    ref = LLM(None, device="cpu", enforce_eager=True, max_model_len=64)
    try:
        params = SamplingParams(temperature=0, max_tokens=tiny_task.MAX_NEW_TOKENS)
        out = {}
        for name, engine in (("fp32", ref), ("fp8", llm)):
            texts = [o.outputs[0].text for o in engine.generate(tiny_task.DEMO_PROMPTS, params, use_tqdm=False)]
            out[name] = {"demo_answers": tiny_task.score(tiny_task.DEMO_PROMPTS, texts), "texts": texts}
        tok = ref.get_tokenizer()
        seqs = [tok(p + a).input_ids for p, a in tiny_task.make_examples(n, seed=0, split="test")]
        out["gap_vs_fp32"] = logprob_gap(prompt_logprobs(ref, seqs), prompt_logprobs(llm, seqs))
        out["prompts"] = list(tiny_task.DEMO_PROMPTS)
        return out
    finally:
        ref.shutdown()
        if own:
            llm.shutdown()


# ---- the GPU part: scripts/fp8_check.py ---------------------------------------------------------------------
def fp8_check():
    """scripts/fp8_check.py, loaded by path (the `fp8` stage's measurement, reused here)."""
    spec = importlib.util.spec_from_file_location("fp8_check", REPO_ROOT / "scripts" / "fp8_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _fresh_compile_caches(root: str):
    """The engine's and Inductor's compile caches in `root` while the variants run: each variant's first
    round compiles, so its passes run and compile_report counts their matches (a warm cache runs no pass)."""
    keys = {"MINIVLLM_CACHE_DIR": f"{root}/minivllm", "TORCHINDUCTOR_CACHE_DIR": f"{root}/inductor"}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def measure_gpu(model: str, quick: bool = False) -> dict:
    """Every fp8_check variant at batch 1 and 64 (graphs captured at those sizes only: the startup is the
    recorder's budget), REPS rounds interleaved, kernels per step at batch 1, and the accuracy."""
    reps, lens = (1, {"input_len": 16, "output_len": 8, "max_model_len": 64}) if quick else (REPS, LENS)
    with tempfile.TemporaryDirectory() as tmp, _fresh_compile_caches(tmp):
        argv = ["--model", str(model), "--batch-sizes", ",".join(map(str, BATCHES)), "--reps", str(reps),
                "--capture-sizes", "--json", str(Path(tmp) / "fp8.json"),
                *[f"--{k.replace('_', '-')}={v}" for k, v in lens.items()]]
        if quick:
            argv += ["--variants", "bf16,fp8", "--no-accuracy"]
        return fp8_check().main(argv)


def run_all(model: str, quick: bool = False) -> dict:
    """The piece and its passes (CPU, the embedded model), and on CUDA the fp8 stage's measurement of `model`
    (a random bf16 Qwen3-0.6B by default); on a CPU the accuracy here instead."""
    out = {"piece": run_passes(), "patterns": patterns()}
    if torch.cuda.is_available():
        res = measure_gpu(model, quick)
        out["fp8"] = {k: res[k] for k in ("copy_gbps", "variants", "summary", "runs", "accuracy") if k in res}
        out["fp8"]["script_provenance"] = res["provenance"]
    else:
        out["accuracy_here"] = accuracy_here(n=4 if quick else 8)
    return round_floats(out)


from minivllm_labs.lab12_views import QUESTIONS
from minivllm_labs.lab_info import LabInfo

LAB_INFO = LabInfo(
    lab="lab12", notebook="labs/12_compiler_passes_fp8.ipynb", title="Inside the compiler: passes and FP8",
    title_zh="深入编译器：自定义 pass 与 FP8", sections=("§2 (torch.compile: op fusion)", "§6 (next: compilation internals)"),
    questions=tuple(QUESTIONS.values()), claims=(),
    code=("minivllm/compilation/passes/pass_manager.py", "minivllm/compilation/passes/fusion.py",
          "minivllm/compilation/passes/noop_elimination.py", "minivllm/quantization/fp8.py",
          "minivllm/kernels/fp8_ops.py", "scripts/fp8_check.py"))
