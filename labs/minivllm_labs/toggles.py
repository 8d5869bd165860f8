"""Live toggles on every device: one engine knob per lab, re-run on a click, the figure redrawn.

Why: the labs' point is to flip an optimization and see what it does, and a self-study learner may have no
GPU. Every lab gets one control whose options work on a CPU with the embedded model (batch size, custom ops,
the attention backend, max_num_seqs, prefix caching, chunked prefill, block size) and, on a CUDA GPU, more
options with the GPU's knobs (graph modes, capture sizes, compile mode 3). Each click builds a small engine
with that setting, generates a few tokens for a few prompts (seconds on a CPU), and redraws a bar chart of
every option measured so far, so the learner compares settings side by side.

The callback is a package function (`ToggleRun.select`), tested without a widget; `toggle_widget(lab)` only
wires it to ipywidgets. In a static build (MINIVLLM_LAB_STATIC, the committed notebooks) the cell prints
what the control does instead of a widget no page could draw.
"""

from __future__ import annotations

import os
import statistics
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
    "same_as_alone": "% of sequences with the tokens of their run alone",
}

_CPU_ENGINE = {"max_model_len": 128}
TOGGLES: dict[str, Toggle] = {
    "lab01": Toggle("lab01", "batch size (GPU: graphs off / FULL graphs)", (
        Option("batch 1", batch=1), Option("batch 2", batch=2), Option("batch 4", batch=4),
        Option("eager, batch 1", {"enforce_eager": True}, 1, gpu_only=True),
        Option("FULL graphs, batch 1", {"cudagraph_mode": "FULL"}, 1, gpu_only=True),
        Option("FULL graphs, batch 4", {"cudagraph_mode": "FULL"}, 4, gpu_only=True)), ("tpot_ms",)),
    "lab02": Toggle("lab02", "max_num_seqs (GPU: capture sizes)", (
        Option("max_num_seqs 1", {"max_num_seqs": 1}, 4), Option("max_num_seqs 2", {"max_num_seqs": 2}, 4),
        Option("max_num_seqs 4", {"max_num_seqs": 4}, 4),
        Option("capture 1,2,4,8; batch 5", {"cudagraph_mode": "FULL", "cudagraph_capture_sizes": [1, 2, 4, 8]}, 5,
               gpu_only=True),
        Option("capture 8 only; batch 5", {"cudagraph_mode": "FULL", "cudagraph_capture_sizes": [8]}, 5,
               gpu_only=True)), ("steps", "tpot_ms")),
    "lab03": Toggle("lab03", "custom ops (GPU: compile mode 3 + graphs)", (
        Option("custom ops all", {"compilation_config": {"mode": 0, "custom_ops": ["all"]}}),
        Option("custom ops none", {"compilation_config": {"mode": 0, "custom_ops": ["none"]}}),
        Option("mode 3 + FULL_AND_PIECEWISE", {"compilation_config": {"mode": 3},
                                               "cudagraph_mode": "FULL_AND_PIECEWISE"}, gpu_only=True),
        Option("mode 0 + FULL", {"compilation_config": {"mode": 0}, "cudagraph_mode": "FULL"}, gpu_only=True)),
        ("tpot_ms",)),
    "lab04": Toggle("lab04", "block size (GPU: graphs off / default graphs)", (
        Option("block 8", {"block_size": 8}), Option("block 16", {"block_size": 16}),
        Option("block 32", {"block_size": 32}),
        Option("enforce_eager", {"enforce_eager": True}, gpu_only=True),
        Option("default (mode 3, graphs)", {}, gpu_only=True)), ("startup_s", "kv_blocks")),
    "lab05": Toggle("lab05", "attention backend (GPU: triton, unregistered at mode 1)", (
        Option("attention auto", {"attention_backend": "auto"}),
        Option("attention torch", {"attention_backend": "torch"}),
        Option("attention triton", {"attention_backend": "triton"}, gpu_only=True),
        Option("unregistered, mode 1", {"attention_backend": "unregistered",
                                        "compilation_config": {"mode": 1, "allow_graph_breaks": True},
                                        "cudagraph_mode": "NONE"}, gpu_only=True)), ("tpot_ms",)),
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
        Option("FULL graphs, batch 1", {"cudagraph_mode": "FULL"}, 1, gpu_only=True)), ("tpot_ms", "floor_ms")),
    "lab10": Toggle("lab10", "batch_invariant (GPU: bf16 / fp32)", (
        Option("default, batch 4", {}, 4), Option("batch_invariant, batch 4", {"batch_invariant": True}, 4),
        Option("bf16, batch 16", {"dtype": "bfloat16"}, 16, gpu_only=True),
        Option("bf16 batch_invariant, batch 16", {"dtype": "bfloat16", "batch_invariant": True}, 16, gpu_only=True),
        Option("fp32, batch 16", {"dtype": "float32"}, 16, gpu_only=True)), ("same_as_alone", "tpot_ms"),
        new_tokens=16),
}


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def engine_for(model: str, option: Option):
    """A small engine with the option's settings (a short max_model_len on a CPU, so it starts in seconds)."""
    import torch

    from minivllm import LLM

    kwargs = dict(option.engine)
    if not torch.cuda.is_available():
        kwargs = {**_CPU_ENGINE, **kwargs}
    return LLM(model, **kwargs)


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
    tpots = [(o.metrics.finished_time - o.metrics.first_token_time) / max(o.metrics.num_generated_tokens - 1, 1)
             for o in outs]
    ttfts = [o.metrics.first_token_time - o.metrics.arrival_time for o in outs]
    return {"option": option.label, "batch": option.batch,
            "tpot_ms": _median([t * 1e3 for t in tpots]), "ttft_ms": _median([t * 1e3 for t in ttfts]),
            "steps": stats["steps"] - before.get("steps", 0),
            "computed_tokens": stats["scheduled_tokens"] - before.get("scheduled_tokens", 0),
            "startup_s": round(sum(llm.report.phases.values()), 3), "kv_blocks": llm.report.num_gpu_blocks}


@dataclass
class ToggleRun:
    """One learner's session with a lab's control: every option measured so far, in the options' order."""

    toggle: Toggle
    model: str
    results: dict[str, dict] = field(default_factory=dict)
    floor: dict = field(default_factory=dict)
    _engine: tuple = (None, None)  # (settings, engine): options that differ only in batch size share one

    def engine(self, option: Option):
        key = repr(sorted(option.engine.items()))
        if self._engine[0] != key:
            self.close()
            self._engine = (key, engine_for(self.model, option))
        return self._engine[1]

    def close(self) -> None:
        if self._engine[1] is not None:
            self._engine[1].shutdown()
        self._engine = (None, None)

    def option(self, label: str) -> Option:
        for o in self.toggle.available():
            if o.label == label:
                return o
        raise ValueError(f"{self.toggle.lab}: no option {label!r} on this device "
                         f"(options: {', '.join(o.label for o in self.toggle.available())})")

    def select(self, label: str) -> dict:
        """The widget's callback: run the engine with this option, keep the result, return it."""
        option = self.option(label)
        result = measure(self.engine(option), option, self.toggle.new_tokens, self.toggle.second_pass)
        if "floor_ms" in self.toggle.metrics:
            result["floor_ms"] = self.floor_ms()
        if "same_as_alone" in self.toggle.metrics:
            result["same_as_alone"] = same_as_alone(self.engine(option), option, self.toggle.new_tokens)
        self.results[label] = result
        return result

    def floor_ms(self) -> float:
        """Weight bytes / this device's copy bandwidth, measured once per session (Lab 07's floor)."""
        if not self.floor:
            from minivllm_labs.lab07 import copy_bandwidth

            bw = copy_bandwidth(reps=3)["bytes_per_s"]
            self.floor = {"bytes_per_s": bw, "weight_bytes": _weight_bytes(self.model)}
        return round(self.floor["weight_bytes"] / self.floor["bytes_per_s"] * 1e3, 4)

    def figure(self):
        """A bar chart of every option measured so far, a series per metric."""
        from minivllm_labs.plots import figure

        done = [o.label for o in self.toggle.available() if o.label in self.results]
        series = {METRIC_LABELS.get(m, m): [self.results[x].get(m) for x in done] for m in self.toggle.metrics}
        return figure(done, series, kind="bar", title=f"{self.toggle.lab}: {self.toggle.knob}",
                      y_title=" / ".join(METRIC_LABELS.get(m, m) for m in self.toggle.metrics))


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


def toggle_widget(lab: str, model: str | None = None) -> None:
    """Show the lab's control in a live kernel: buttons for the options this device runs, the figure below.
    In a static build it prints what the control does (a stored widget cannot be drawn outside a kernel)."""
    from minivllm_labs.quiz_show import STATIC_ENV

    print(describe(lab))
    if os.environ.get(STATIC_ENV):
        return
    try:
        import ipywidgets as w
        from IPython.display import display
    except ImportError:
        print("ipywidgets is not installed: pip install ipywidgets")
        return
    from minivllm_labs.common import lab_model
    from minivllm_labs.plots import show

    run = ToggleRun(TOGGLES[lab], model or lab_model())
    buttons = w.ToggleButtons(options=[o.label for o in run.toggle.available()], value=None)
    out = w.Output()

    def on_change(change) -> None:
        if change["new"] is None:
            return
        with out:
            out.clear_output(wait=True)
            print(f"running {change['new']} ...")
            try:
                run.select(change["new"])
            except Exception as e:  # noqa: BLE001 (a setting this device cannot run: say so, keep the control)
                print(f"{change['new']}: {type(e).__name__}: {e}")
            out.clear_output(wait=True)
            if run.results:
                show(run.figure())

    buttons.observe(on_change, names="value")
    display(w.VBox([buttons, out]))
