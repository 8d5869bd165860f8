"""Live toggles on every device: one engine knob per lab, re-run on a click, the figure redrawn.

Why: the labs' point is to flip an optimization and see what it does, and a self-study learner may have no
GPU. Every lab gets one control whose options work on a CPU with the embedded model (batch size, compile
mode, the fallback ladder, max_num_seqs, prefix caching, chunked prefill and its token budget, block size)
and, on a CUDA GPU, more options with the GPU's knobs (graph modes, capture sizes, custom ops, compile mode 3
with Inductor). Each click builds a small engine with that setting, generates a few tokens for a few prompts,
and redraws a bar chart of every option measured so far, so the learner compares settings side by side.

What keeps a click within seconds on a CPU: the engine is built for 128 tokens (max_model_len and the token
budget, so the startup profile run is one 128-token forward, not 8192), every engine a learner has built stays
in the session (a second click on an option only generates), and the click runs torch on one thread (the
tiny model's ops are too small to split, and on a busy machine a second thread waits for a core: 0.6 s
against 3.4 s to start an engine on a loaded 2-core machine). The compile options trace with Dynamo only
(backend "eager": no C++ compile; the traces and pieces are what they show). On a GPU one engine at a time
is kept, as each takes its share of the GPU's memory.

The callback is a package function (`ToggleRun.select`, and `click` for the page), tested without a browser;
`toggle_widget(lab)` shows the control as HTML + JavaScript (`toggle_html`) that sends each click to the
notebook's kernel (kernel_js.py): no ipywidgets model, so a saved and reopened notebook keeps a working
control, and one opened without running it too (a click needs only the kernel JupyterLab starts).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: A shared prefix, so prefix caching has something to reuse, and a distinct tail per prompt.
PROMPT = "The engine captures the decode step once and replays it for every token after that, request"


@dataclass(frozen=True)
class Option:
    """One setting of a lab's knob: its label, the engine's keyword arguments, how many prompts run."""

    label: str
    engine: dict[str, Any] = field(default_factory=dict)
    batch: int = 2
    gpu_only: bool = False


@dataclass(frozen=True)
class Toggle:
    """A lab's live control: the knob's name, its options, and which measurements the figure shows."""

    lab: str
    knob: str
    options: tuple[Option, ...]
    metrics: tuple[str, ...]  # keys of measure()'s result, one bar series each
    new_tokens: int = 6
    second_pass: bool = False  # measure the same prompts a second time (what prefix caching reuses)
    differs: str | None = "computed_tokens"  # a count (not a time) that the first two CPU options change: the test's check
    chunks: bool = False  # measure_chunks instead of measure: a long prompt arriving while others decode
    cpu_note: tuple[str, str] = ("", "")  # what a CPU shows and why (EN, ZH), printed under the buttons there
    spec: bool = False  # measure_spec instead of measure: Lab 11's questions asked again, drafts counted

    def available(self, cuda: bool | None = None) -> tuple[Option, ...]:
        """The options this device can run: every CPU option, and the GPU ones on CUDA."""
        if cuda is None:
            import torch

            cuda = torch.cuda.is_available()
        return tuple(o for o in self.options if cuda or not o.gpu_only)


METRIC_LABELS = {
    "tpot_ms": "TPOT ms (median over requests)",
    "ttft_ms": "TTFT ms (median)",
    "steps": "engine steps",
    "computed_tokens": "tokens computed (prefill + decode)",
    "startup_s": "startup s (sum of phases)",
    "floor_ms": "floor ms (weight bytes / measured copy bandwidth)",
    "kv_blocks": "KV blocks",
    "graphs_traced": "graphs Dynamo traced",
    "pieces": "pieces (split at attention)",
    "rungs": "fallback rungs tried",
    "mode_run": "compile mode it runs at",
    "tokens_per_step": "tokens per verify step (1 + accepted / drafts)",
    "acceptance_pct": "draft tokens accepted (%)",
    "draft_tokens": "draft tokens proposed",
    "max_step_tokens": "largest step, tokens",
    "prefill_steps": "steps holding the long prompt",
    "same_as_alone": "% of sequences with the tokens of their run alone",
}

#: The same labels in Chinese, for the book's 中文 view.
METRIC_LABELS_ZH = {
    "tpot_ms": "TPOT ms（各请求中位数）", "ttft_ms": "TTFT ms（中位数）", "steps": "引擎步数",
    "computed_tokens": "计算的 token 数（预填充 + 解码）", "startup_s": "启动 s（各阶段之和）",
    "floor_ms": "下限 ms（权重字节 / 实测拷贝带宽）", "kv_blocks": "KV 块数", "graphs_traced": "Dynamo 追踪的图数",
    "pieces": "分段数（在 attention 处切分）", "rungs": "尝试的回退档数", "mode_run": "实际运行的编译模式",
    "max_step_tokens": "最大一步的 token 数", "prefill_steps": "包含长 prompt 的步数",
    "same_as_alone": "与单独运行 token 相同的序列（%）",
}
#: Each lab's knob in Chinese (TOGGLES below holds the English).
KNOB_ZH = {
    "lab01": "batch 大小（GPU：关图 / FULL 图）", "lab02": "max_num_seqs（GPU：捕获尺寸）",
    "lab03": "编译模式，只跑 Dynamo（GPU：自定义算子、mode 3 + 图）", "lab04": "block 大小（GPU：关图 / 默认图）",
    "lab05": "attention 是否注册，mode 2，自动回退（GPU：triton、mode 1）", "lab06": "调度器设置",
    "lab07": "batch 大小（TPOT 对本设备的下限）", "lab08": "分块预填充的 token 预算（题 f1、f2）",
    "lab09": "batch 大小（每步对本设备的字节下限）", "lab10": "batch_invariant（GPU：bf16 / fp32）",
}

#: Option labels that read as a phrase, in Chinese (the button keeps its English data-label).
OPTION_ZH = {"mode 3 (split at attention)": "mode 3（在 attention 处切分）", "mode 2 (one graph)": "mode 2（一个图）",
             "mode 0 (no Dynamo)": "mode 0（不用 Dynamo）", "default (mode 3, graphs)": "默认（mode 3，开图）"}

#: On a CPU: 128 tokens per sequence and per step (the startup profile run is one forward of the step budget),
#: and a 4 MiB KV cache (1,024 tokens of the embedded model; its block count still follows the block size).
_CPU_ENGINE = {"max_model_len": 128, "max_num_batched_tokens": 128, "kv_cache_memory_bytes": 4 << 20}
#: Dynamo traces, no Inductor: what a compile mode traces and splits, in seconds on a CPU (no C++ compile).
_DYNAMO = {"backend": "eager"}
#: Lab 08's engines keep no prefix cache: a second click on a budget would find the long prompt cached and
#: compute only its last token, which is prefix caching's effect, not the budget's.
_NO_CACHE = {"enable_prefix_caching": False}


def _ngram(k: int) -> dict:
    """Lab 11's speculative_config: k n-gram drafts, matching 2 to 4 tokens (lab11.LOOKUP)."""
    return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2, "prompt_lookup_max": 4}

TOGGLES: dict[str, Toggle] = {
    "lab01": Toggle("lab01", "batch size (GPU: graphs off / FULL graphs)", (
        Option("batch 1", batch=1), Option("batch 2", batch=2), Option("batch 4", batch=4),
        Option("eager, batch 1", {"enforce_eager": True}, 1, gpu_only=True),
        Option("decode graphs, batch 1", {"cudagraph_mode": "FULL_DECODE_ONLY"}, 1, gpu_only=True),
        Option("decode graphs, batch 4", {"cudagraph_mode": "FULL_DECODE_ONLY"}, 4, gpu_only=True)), ("tpot_ms",),
        differs="generated_tokens"),
    "lab02": Toggle("lab02", "max_num_seqs (GPU: capture sizes)", (
        Option("max_num_seqs 1", {"max_num_seqs": 1}, 4), Option("max_num_seqs 2", {"max_num_seqs": 2}, 4),
        Option("max_num_seqs 4", {"max_num_seqs": 4}, 4),
        Option("capture 1,2,4,8; batch 5",
               {"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [1, 2, 4, 8]}, 5,
               gpu_only=True),
        Option("capture 8 only; batch 5", {"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [8]}, 5,
               gpu_only=True)), ("steps", "tpot_ms"), differs="steps"),
    "lab03": Toggle("lab03", "compile mode, Dynamo only (GPU: custom ops, mode 3 + graphs)", (
        Option("mode 0 (no Dynamo)", {"compilation_config": {"mode": 0}, "cudagraph_mode": "NONE"}),
        Option("mode 3 (split at attention)", {"compilation_config": {"mode": 3, **_DYNAMO}, "cudagraph_mode": "NONE"}),
        Option("mode 2 (one graph)", {"compilation_config": {"mode": 2, **_DYNAMO}, "cudagraph_mode": "NONE"}),
        Option("custom ops all", {"compilation_config": {"mode": 0, "custom_ops": ["all"]}}, gpu_only=True),
        Option("custom ops none", {"compilation_config": {"mode": 0, "custom_ops": ["none"]}}, gpu_only=True),
        Option("mode 3 + FULL_AND_PIECEWISE", {"compilation_config": {"mode": 3},
                                               "cudagraph_mode": "FULL_AND_PIECEWISE"}, gpu_only=True),
        Option("mode 0 + decode graphs", {"compilation_config": {"mode": 0}, "cudagraph_mode": "FULL_DECODE_ONLY"},
               gpu_only=True)),
        ("tpot_ms", "graphs_traced", "pieces"), differs="pieces"),
    "lab04": Toggle("lab04", "block size (GPU: graphs off / default graphs)", (
        Option("block 8", {"block_size": 8}), Option("block 16", {"block_size": 16}),
        Option("block 32", {"block_size": 32}),
        Option("enforce_eager", {"enforce_eager": True}, gpu_only=True),
        Option("default (mode 3, graphs)", {}, gpu_only=True)), ("startup_s", "kv_blocks"), differs="kv_blocks"),
    "lab05": Toggle("lab05", "attention registered or not, mode 2, fallback auto (GPU: triton, mode 1)", (
        Option("registered, mode 2", {"compilation_config": {"mode": 2, **_DYNAMO}, "cudagraph_mode": "NONE",
                                      "fallback": "auto"}),
        Option("unregistered, mode 2", {"attention_backend": "unregistered", "cudagraph_mode": "NONE",
                                        "compilation_config": {"mode": 2, **_DYNAMO}, "fallback": "auto"}),
        Option("attention triton", {"attention_backend": "triton"}, gpu_only=True),
        Option("unregistered, mode 1", {"attention_backend": "unregistered",
                                        "compilation_config": {"mode": 1, "allow_graph_breaks": True},
                                        "cudagraph_mode": "NONE"}, gpu_only=True)),
        ("tpot_ms", "rungs", "mode_run"), differs="rungs"),
    "lab06": Toggle("lab06", "scheduler setting", (
        Option("prefix caching on", {"enable_prefix_caching": True}, 4),
        Option("prefix caching off", {"enable_prefix_caching": False}, 4),
        Option("chunked prefill off", {"enable_chunked_prefill": False}, 4),
        Option("max_num_seqs 2", {"max_num_seqs": 2}, 4),
        Option("block size 32", {"block_size": 32}, 4),
        Option("FULL_AND_PIECEWISE graphs", {"cudagraph_mode": "FULL_AND_PIECEWISE"}, 4, gpu_only=True)),
        ("steps", "computed_tokens"), second_pass=True),
    "lab07": Toggle("lab07", "batch size (TPOT against this device's floor)", (
        Option("batch 1", batch=1), Option("batch 2", batch=2), Option("batch 4", batch=4),
        Option("decode graphs, batch 1", {"cudagraph_mode": "FULL_DECODE_ONLY"}, 1, gpu_only=True)),
        ("tpot_ms", "floor_ms"),
        differs="generated_tokens"),
    "lab08": Toggle("lab08", "chunked prefill's token budget (questions f1, f2)", (
        Option("budget 32", {"max_num_batched_tokens": 32, **_NO_CACHE}, 3),
        Option("budget 64", {"max_num_batched_tokens": 64, **_NO_CACHE}, 3),
        Option("not chunked", {"enable_chunked_prefill": False, **_NO_CACHE}, 3),
        Option("budget 64, FULL graphs", {"max_num_batched_tokens": 64, "cudagraph_mode": "FULL", **_NO_CACHE}, 3,
               gpu_only=True)), ("max_step_tokens", "prefill_steps"), differs="max_step_tokens", chunks=True),
    "lab09": Toggle("lab09", "batch size (the step against this device's byte floor)", (
        Option("batch 1", batch=1), Option("batch 4", batch=4), Option("batch 16", batch=16),
        Option("decode graphs, batch 1", {"cudagraph_mode": "FULL_DECODE_ONLY"}, 1, gpu_only=True),
        Option("decode graphs, batch 64", {"cudagraph_mode": "FULL_DECODE_ONLY"}, 64, gpu_only=True)),
        ("tpot_ms", "floor_ms"), differs="generated_tokens"),
    "lab10": Toggle("lab10", "batch_invariant (GPU: bf16 / fp32)", (
        Option("default, batch 4", {}, 4), Option("batch_invariant, batch 4", {"batch_invariant": True}, 4),
        Option("bf16, batch 16", {"dtype": "bfloat16"}, 16, gpu_only=True),
        Option("bf16 batch_invariant, batch 16", {"dtype": "bfloat16", "batch_invariant": True}, 16, gpu_only=True),
        Option("fp32, batch 16", {"dtype": "float32"}, 16, gpu_only=True)), ("same_as_alone", "tpot_ms"),
        new_tokens=16, differs=None, cpu_note=(
            ("On a CPU both options read 100%, and that is the measurement, not a missing one: the embedded model "
            "runs in fp32, where a batch can move a logit's last bits (exercise 2's lab.matmul_by_m(torch.float32) "
            "shows a CPU matmul doing it) but not enough to change which token wins; the flips this lab is about "
            "come from bf16 near-ties on a GPU (the bf16 options there)."),
            ("CPU 上两个选项都是 100%，这就是测量结果，不是没测：内置模型用 fp32 运行，batch 可以改动 logit 的最后几位"
            "（练习 2 的 lab.matmul_by_m(torch.float32) 展示了 CPU 矩阵乘的这种变化），但不足以改变哪个 token 胜出；"
            "本实验讲的翻转来自 GPU 上 bf16 的近似平局（GPU 上的 bf16 选项）。"))),
    "lab11": Toggle("lab11", "num_speculative_tokens k (n-gram drafts; a question asked again after its answer)", (
        Option("k = 0 (off)", {}, 2), Option("ngram k = 2", {"speculative_config": _ngram(2)}, 2),
        Option("ngram k = 4", {"speculative_config": _ngram(4)}, 2),
        Option("ngram k = 4, batch 64", {"speculative_config": _ngram(4)}, 64, gpu_only=True)),
        ("tokens_per_step", "acceptance_pct", "draft_tokens"), new_tokens=8, differs="draft_tokens", spec=True),
}
#: Lab 08's long prompt: it arrives while the others decode, and the budget decides how it is cut.
LONG_PROMPT = 96


def measure_spec(llm, option: Option, new_tokens: int) -> dict:
    """Lab 11: `option.batch` of the embedded model's questions, each asked again after its answer (lookup can
    copy it), greedy: the drafts the engine proposed and accepted, as vLLM counts them (llm.spec_decoding_stats)."""
    from minivllm import SamplingParams
    from minivllm_labs.lab11 import repeated_prompts, stats_dict

    stats_dict(llm)  # the counters from zero
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0)
    outs = llm.generate(repeated_prompts(option.batch), params, use_tqdm=False)
    s = stats_dict(llm)
    rate = s["acceptance_rate"]
    return {"option": option.label, "batch": option.batch, "tpot_ms": _tpot_ms(outs),
            "generated_tokens": sum(o.metrics.num_generated_tokens for o in outs),
            "tokens_per_step": s["mean_acceptance_length"], "acceptance_pct": 0.0 if rate is None else round(100 * rate, 1),
            "draft_tokens": s["num_draft_tokens"], **_engine_facts(llm)}


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def engine_for(model: str, option: Option):
    """A small engine with the option's settings (128 tokens on a CPU, so it starts in about a second)."""
    import torch

    from minivllm import LLM

    kwargs = dict(option.engine)
    if not torch.cuda.is_available():
        kwargs = {**_CPU_ENGINE, **kwargs}
    return LLM(model, **kwargs)


def _engine_facts(llm) -> dict:
    """What an engine is, not how fast: startup, KV blocks, the compile mode it runs at after the fallback
    ladder, the rungs the ladder tried, and what Dynamo traced (none at mode 0, where nothing was traced; the
    process-wide counters of the compile report would then be other engines')."""
    mode = int(llm.config.compile_mode)
    rep = llm.compile_report() if mode else {}
    return {"startup_s": round(llm.report.phases.get("total", 0.0), 3), "kv_blocks": llm.report.num_gpu_blocks,
            "mode_run": mode, "rungs": max(len(llm.fallback_report), 1),
            "graphs_traced": rep.get("graphs_traced_at_startup") or 0, "pieces": rep.get("pieces") or 0}


def _tpot_ms(outs) -> float | None:
    return _median([(o.metrics.finished_time - o.metrics.first_token_time) * 1e3
                    / max(o.metrics.num_generated_tokens - 1, 1) for o in outs])


def measure(llm, option: Option, new_tokens: int = 6, second_pass: bool = False) -> dict:
    """Generate `new_tokens` for `option.batch` prompts on `llm` (twice with `second_pass`, measuring the
    second) and return what the figures show: TPOT and TTFT medians, engine steps, tokens computed."""
    from minivllm import SamplingParams

    prompts = [f"{PROMPT} {i}" for i in range(option.batch)]
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True, temperature=0.0)
    if second_pass:
        llm.generate(prompts, params, use_tqdm=False)
    before = dict(llm.engine.stats)
    outs = llm.generate(prompts, params, use_tqdm=False)
    stats = llm.engine.stats
    ttfts = [o.metrics.first_token_time - o.metrics.arrival_time for o in outs]
    return {"option": option.label, "batch": option.batch, "tpot_ms": _tpot_ms(outs),
            "ttft_ms": _median([t * 1e3 for t in ttfts]), "steps": stats["steps"] - before.get("steps", 0),
            "generated_tokens": sum(o.metrics.num_generated_tokens for o in outs),
            "computed_tokens": stats["scheduled_tokens"] - before.get("scheduled_tokens", 0), **_engine_facts(llm)}


def measure_chunks(llm, option: Option, new_tokens: int = 6) -> dict:
    """Lab 08's questions on chunked prefill, measured: `option.batch` requests decode, and on the third step
    a LONG_PROMPT-token prompt arrives. Per step: the tokens scheduled and the long prompt's piece of them
    (its chunk). The chunks are what the budget leaves after the step's decodes, so they vary."""
    from minivllm_labs.lab06_engine import (  # Lab 06's prompts, which its chunked-prefill run uses
        _greedy,
        _ids,
    )

    eng = llm.engine
    vocab = eng.model_config.vocab_size
    shorts = [eng.add_request(eng.next_request_id(), _ids(6, 40 + i, vocab), _greedy(3 * new_tokens))
              for i in range(option.batch)]
    long, step_tokens, chunks = None, [], []
    while eng.has_unfinished_requests():
        if len(step_tokens) == 2:
            long = eng.add_request(eng.next_request_id(), _ids(LONG_PROMPT, 99, vocab), _greedy(2))
        before, done = eng.stats["scheduled_tokens"], long.num_computed_tokens if long else 0
        eng.step()
        step_tokens.append(eng.stats["scheduled_tokens"] - before)
        if long is not None and long.num_computed_tokens > done and done < LONG_PROMPT:
            chunks.append(min(long.num_computed_tokens, LONG_PROMPT) - done)
    outs = [eng.make_output(s) for s in shorts]
    return {"option": option.label, "batch": option.batch, "tpot_ms": _tpot_ms(outs),
            "max_step_tokens": max(step_tokens), "prefill_steps": len(chunks), "chunks": chunks,
            "budget": llm.config.scheduler.max_num_batched_tokens, "steps": len(step_tokens), **_engine_facts(llm)}


def chunk_line(result: dict) -> str:
    """Lab 08's feedback under the figure: how the budget cut the long prompt (EN, then ZH)."""
    c, b, n = result["chunks"], result["budget"], result["batch"]
    return (f"{result['option']}: the {LONG_PROMPT}-token prompt ran in {len(c)} step(s), chunks of "
            f"{', '.join(map(str, c))} tokens beside {n} decodes (budget {b} tokens per step).\n"
            f"{result['option']}：{LONG_PROMPT} token 的 prompt 用了 {len(c)} 步，chunk 依次为 "
            f"{'、'.join(map(str, c))} 个 token，与 {n} 条解码同步执行（每步预算 {b} 个 token）。")


@contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread for a click on a CPU (the tiny model's ops are too small to split; on a
    busy machine a second thread only waits for a core), the learner's setting restored afterwards."""
    import torch

    if torch.cuda.is_available():
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass
class ToggleRun:
    """One learner's session with a lab's control: every option measured so far, in the options' order."""

    toggle: Toggle
    model: str
    results: dict[str, dict] = field(default_factory=dict)
    floor: dict = field(default_factory=dict)
    #: engines by their settings: options that differ only in batch size share one. On a CPU every engine
    #: built stays (a few MB each: a second click on an option only generates); on a GPU only the last one.
    engines: dict[str, Any] = field(default_factory=dict)

    def engine(self, option: Option):
        import torch

        key = repr(sorted(option.engine.items()))
        if key not in self.engines:
            if torch.cuda.is_available():
                self.close()
            self.engines[key] = engine_for(self.model, option)
        return self.engines[key]

    def close(self) -> None:
        while self.engines:
            self.engines.popitem()[1].shutdown()

    def option(self, label: str) -> Option:
        for o in self.toggle.available():
            if o.label == label:
                return o
        raise ValueError(f"{self.toggle.lab}: no option {label!r} on this device "
                         f"(options: {', '.join(o.label for o in self.toggle.available())})")

    def select(self, label: str) -> dict:
        """The widget's callback: run the engine with this option, keep the result, return it."""
        option = self.option(label)
        with one_thread():
            llm = self.engine(option)
            if self.toggle.chunks:
                result = measure_chunks(llm, option, self.toggle.new_tokens)
            elif self.toggle.spec:
                result = measure_spec(llm, option, self.toggle.new_tokens)
            else:
                result = measure(llm, option, self.toggle.new_tokens, self.toggle.second_pass)
            if "floor_ms" in self.toggle.metrics:
                result["floor_ms"] = self.floor_ms()
            if "same_as_alone" in self.toggle.metrics:
                result["same_as_alone"] = same_as_alone(llm, option, self.toggle.new_tokens)
        self.results[label] = result
        return result

    def floor_ms(self) -> float:
        """Weight bytes / this device's copy bandwidth, measured once per session (Lab 07's floor)."""
        if not self.floor:
            from minivllm_labs.lab07 import copy_bandwidth

            bw = copy_bandwidth(reps=3)["bytes_per_s"]
            self.floor = {"bytes_per_s": bw, "weight_bytes": _weight_bytes(self.model)}
        return round(self.floor["weight_bytes"] / self.floor["bytes_per_s"] * 1e3, 4)

    def figures(self) -> list:
        """Bar charts of every option measured so far: one per unit (the ms metrics share a chart; a count, a
        percentage or a mode gets its own), so no axis mixes units."""
        from minivllm_labs.plots import figure

        t = self.toggle
        done = [o.label for o in t.available() if o.label in self.results]
        groups: dict[str, list[str]] = {}
        for m in t.metrics:
            groups.setdefault("ms" if m.endswith("_ms") else m, []).append(m)
        figs = []
        for metrics in groups.values():
            series = {METRIC_LABELS.get(m, m): [self.results[x].get(m) for x in done] for m in metrics}
            what, what_zh = ((f" · {METRIC_LABELS.get(metrics[0], metrics[0])}",
                              f" · {METRIC_LABELS_ZH.get(metrics[0], metrics[0])}") if len(groups) > 1 else ("", ""))
            figs.append(figure(done, series, kind="bar", title=f"{t.lab}: {t.knob}{what}",
                               y_title=" / ".join(METRIC_LABELS.get(m, m) for m in metrics),
                               zh={"title": f"{t.lab}：{KNOB_ZH.get(t.lab, t.knob)}{what_zh}",
                                   "y": " / ".join(METRIC_LABELS_ZH.get(m, m) for m in metrics),
                                   "names": {METRIC_LABELS.get(m, m): METRIC_LABELS_ZH.get(m, m) for m in metrics}}))
        return figs


def same_as_alone(llm, option: Option, new_tokens: int) -> float:
    """% of the option's prompts whose greedy tokens in the batch equal those of the prompt run alone (Lab 10:
    in bf16 a batch can flip a near-tie; the batch-invariant mode must keep 100)."""
    from minivllm import SamplingParams

    prompts = [f"{PROMPT} {i}" for i in range(option.batch)]
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True, temperature=0.0)
    batched = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
    alone = [llm.generate([p], params, use_tqdm=False)[0].outputs[0].token_ids for p in prompts]
    return round(100 * sum(a == b for a, b in zip(batched, alone)) / len(prompts), 1)


def _weight_bytes(model: str) -> int:
    """Bytes of the checkpoint's safetensors files: the weights a batch-1 decode step reads."""
    from pathlib import Path

    return sum(p.stat().st_size for p in Path(model).glob("*.safetensors"))


def describe(lab: str) -> str:
    """One stable line: the lab's control, its options here and on a GPU."""
    t = TOGGLES[lab]
    cpu = ", ".join(o.label for o in t.options if not o.gpu_only)
    gpu = ", ".join(o.label for o in t.options if o.gpu_only)
    return (f"Live toggle · 实时开关 ({t.knob}): {cpu}" + (f"; on a CUDA GPU also {gpu}" if gpu else "")
            + ". Each click re-runs the engine and redraws the figure (a live kernel is needed).")


def toggle_all(lab: str, model: str | None = None) -> ToggleRun:
    """Every option this device runs, clicked once in order, and the figure: the toggle's result where no
    widget can be drawn (a static page, the book). Lab 08 adds each option's chunks, EN and ZH."""
    from minivllm_labs.common import lab_model
    from minivllm_labs.plots import show

    run = ToggleRun(TOGGLES[lab], model or lab_model())
    try:
        for o in run.toggle.available():
            run.select(o.label)
    finally:
        run.close()
    for fig in run.figures():
        show(fig)
    if run.toggle.chunks:
        print("\n".join(chunk_line(r) for r in run.results.values()))
    return run


#: Sessions of the page's toggles in this kernel, by lab: engines stay built across clicks.
_RUNS: dict[str, ToggleRun] = {}
#: The line the page reads a click's result from (the engine may print other lines before it).
RESULT_MARK = "MINIVLLM_TOGGLE "


def results_json(run: ToggleRun, error: str | None = None) -> dict:
    """What the page draws: per metric (one chart each, so one unit per axis) the options measured so far."""
    done = [o.label for o in run.toggle.available() if o.label in run.results]
    out = {"done": done, "error": error,
           "metrics": [{"name": METRIC_LABELS.get(m, m), "values": [run.results[x].get(m) for x in done]}
                       for m in run.toggle.metrics]}
    if run.toggle.chunks:
        out["notes"] = [chunk_line(run.results[x]) for x in done]
    return out


def click(lab: str, label: str) -> dict:
    """A click on the page's toggle (run in the notebook's kernel through kernel_js): run option `label`, then
    print every result so far after RESULT_MARK, as JSON. A setting this device cannot run is reported, not
    raised, so the control stays usable."""
    import json

    from minivllm_labs.common import lab_model, quiet_engine_logs

    quiet_engine_logs()  # the click may come before the notebook's setup cell ran (a reopened notebook)
    run = _RUNS.get(lab)
    if run is None:
        run = _RUNS[lab] = ToggleRun(TOGGLES[lab], lab_model())
    error = None
    try:
        run.select(label)
    except Exception as e:  # noqa: BLE001 (the page shows why; the other options still run)
        error = f"{label}: {type(e).__name__}: {e}"
    out = results_json(run, error)
    print(RESULT_MARK + json.dumps(out, ensure_ascii=False))
    return out


_TOGGLE_JS = r"""
(function () {
  var s = document.currentScript, root = (s && s.closest(".mv-toggle")) || document.getElementById(%(id)s);
  if (!root) return;
  root.setAttribute("data-live", "1");  // the script runs: the page trusts this output
  var lab = root.getAttribute("data-lab"), nb = root.getAttribute("data-notebook");
  var status = root.querySelector(".mv-toggle-status"), chart = root.querySelector(".mv-toggle-chart");
  var buttons = root.querySelectorAll("button.mv-toggle-option");
  function say(en, zh) {
    status.innerHTML = "";
    [["lang-en", en], ["lang-zh", zh]].forEach(function (p, i) {
      var s = document.createElement("span"); s.className = p[0]; s.textContent = p[1];
      if (i) { var sep = document.createElement("span"); sep.className = "mv-sep"; sep.textContent = " · ";
               status.appendChild(sep); }
      status.appendChild(s);
    });
  }
  function fmt(v) { return v === null || v === undefined ? "n/a" : String(Number(Number(v).toPrecision(4))); }
  function draw(r) {
    chart.innerHTML = "";
    r.metrics.forEach(function (m) {
      var box = document.createElement("div"); box.className = "mv-toggle-metric";
      var h = document.createElement("div"); h.className = "mv-toggle-metric-name"; h.textContent = m.name;
      box.appendChild(h);
      var max = Math.max.apply(null, m.values.map(function (v) { return Math.abs(v || 0); }).concat([1e-12]));
      m.values.forEach(function (v, i) {
        var row = document.createElement("div"); row.className = "mv-toggle-row";
        row.innerHTML = '<span class="mv-toggle-label"></span><span class="mv-toggle-track">' +
          '<span class="mv-toggle-bar"></span></span><span class="mv-toggle-value"></span>';
        row.children[0].textContent = r.done[i];
        row.children[1].firstChild.style.width = (100 * Math.abs(v || 0) / max).toFixed(1) + "%%";
        row.children[2].textContent = fmt(v);
        box.appendChild(row);
      });
      chart.appendChild(box);
    });
    (r.notes || []).forEach(function (t) {
      var p = document.createElement("pre"); p.className = "mv-toggle-note"; p.textContent = t; chart.appendChild(p);
    });
  }
  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      var label = b.getAttribute("data-label");
      buttons.forEach(function (x) { x.disabled = true; x.classList.toggle("mv-on", x === b); });
      root.setAttribute("data-state", "running");
      say("running " + label + " in this notebook's kernel ...", "正在本 notebook 的 kernel 里运行 " + label + " ...");
      var code = "from minivllm_labs.toggles import click as _mv_click\n_mv_click(" + JSON.stringify(lab) +
        ", " + JSON.stringify(label) + ")";
      window.mvKernel.run(nb, code).then(function (out) {
        var line = out.split("\n").filter(function (l) { return l.indexOf(%(mark)s) === 0; }).pop();
        var r = JSON.parse(line.slice(%(mark)s.length));
        draw(r);
        root.setAttribute("data-state", r.error ? "error" : "done");
        if (r.error) say(r.error, r.error);
        else say("measured on this machine, now: " + r.done.join(", "), "本机刚刚测得：" + r.done.join("、"));
      }).catch(function (e) {
        root.setAttribute("data-state", "failed");
        say("not run: " + e.message + ". The control runs in JupyterLab with the notebook's kernel.",
            "未运行：" + e.message + "。此开关需要在 JupyterLab 中、notebook 的 kernel 上运行。");
      }).then(function () { buttons.forEach(function (x) { x.disabled = false; }); });
    });
  });
})();
"""

_TOGGLE_CSS = """<style>
.mv-toggle { border:1px solid #d0d7de; border-radius:6px; padding:10px 14px; margin:8px 0; max-width:60em }
.mv-toggle-buttons { display:flex; flex-wrap:wrap; gap:6px; margin:6px 0 }
.mv-toggle-option { white-space:normal; text-align:left; padding:4px 10px; border:1px solid #8c959f;
  border-radius:4px; background:#f6f8fa; cursor:pointer; max-width:100% }
.mv-toggle-option.mv-on { background:#0969da; color:#fff; border-color:#0969da }
.mv-toggle-status { font-size:90%; color:#57606a; margin:4px 0 }
.mv-toggle-metric { margin:8px 0 }
.mv-toggle-metric-name { font-weight:bold; font-size:92% }
.mv-toggle-row { display:flex; align-items:center; gap:8px; font-size:90% }
.mv-toggle-label { flex:0 0 16em; overflow-wrap:anywhere }
.mv-toggle-track { flex:1 1 auto; background:#eaeef2; height:12px; border-radius:2px; min-width:4em }
.mv-toggle-bar { display:block; height:12px; background:#0969da; border-radius:2px }
.mv-toggle-value { flex:0 0 6em; text-align:right; font-variant-numeric:tabular-nums }
.mv-toggle-note { white-space:pre-wrap; font-size:88% }
</style>"""


def toggle_html(lab: str) -> str:
    """The lab's control as HTML + JS: a button per option this device runs; a click runs it in the notebook's
    kernel (kernel_js.py) and draws every option measured so far, one small bar chart per metric (one unit
    each). Stored in the notebook, it works again after a reopen: no widget model to lose."""
    import html
    import json

    from minivllm_labs.kernel_js import KERNEL_JS, notebook_of
    from minivllm_labs.quiz_html import _bi

    t = TOGGLES[lab]
    rid = f"mv-toggle-{lab}"
    buttons = "".join(f'<button type="button" class="mv-toggle-option" data-label="{html.escape(o.label)}">'
                      f"{_bi(o.label, OPTION_ZH[o.label]) if o.label in OPTION_ZH else html.escape(o.label)}</button>"
                      for o in t.available())
    gpu = [o.label for o in t.options if o.gpu_only and o not in t.available()]
    gpu_here = any(o.gpu_only for o in t.available())
    gpu_note = (f"; on a CUDA GPU also: {', '.join(gpu)}" if gpu else "", f"；在 CUDA GPU 上还有：{'、'.join(gpu)}" if gpu else "")
    return "\n".join([
        _TOGGLE_CSS,
        f'<div class="mv-toggle" id="{rid}" data-lab="{lab}" data-notebook="{html.escape(notebook_of(lab))}">',
        f'<p style="margin:0"><b>{_bi("Live toggle", "实时开关")}</b>: {_bi(t.knob, KNOB_ZH.get(lab, ""))}</p>',
        f'<div class="mv-toggle-buttons">{buttons}</div>',
        '<div class="mv-toggle-status">' + _bi(
            "Click an option: it runs the engine in this notebook's kernel (seconds on a CPU) and adds a bar per "
            "chart, measured on this machine, now" + gpu_note[0] + ".",
            "点一个选项：在本 notebook 的 kernel 里运行引擎（CPU 上几秒），每张图加一根柱，数字是本机刚测得的"
            + gpu_note[1] + "。") + "</div>",
        *([f'<p class="mv-toggle-note" style="font-size:90%">{_bi(*t.cpu_note)}</p>']
          if t.cpu_note[0] and not gpu_here else []),
        '<div class="mv-toggle-chart"></div>',
        f"<script>{KERNEL_JS}{_TOGGLE_JS % {'id': json.dumps(rid), 'mark': json.dumps(RESULT_MARK)}}</script>",
        "</div>"])


def toggle_widget(lab: str) -> None:
    """Show the lab's control: HTML + JS that runs each click in the notebook's kernel (toggle_html); its
    text/plain is the stable line describing it."""
    from IPython.display import display

    display({"text/plain": describe(lab), "text/html": toggle_html(lab)}, raw=True)
