"""One rule set for the labs' verdicts: a claim's verdict is computed from its evidence, the same way in every lab.

Why: a verdict typed by hand drifts from its evidence and from the same sentence's verdict in another lab (Lab 07
and Lab 10 once judged "CUDA Graph 仅改变调度方式，不改变计算逻辑" right and partly). The rules:

- a difference counts only beyond the spread over repeats (`beyond_spread`); without repeats it counts only when
  it exceeds the variation between neighbouring measurements of the same record (`beyond_variation`);
- a claimed figure that arithmetic on the record or on declared constants rules out is "wrong" (impossible),
  not "unverifiable" (`impossible_below`);
- a sentence that holds in some measured configurations and not in others is "partly" (`holds_in`).

Each claim with `rule: true` in data/labNN.yaml names one of the functions below in its lab's RULES;
tests/labs/test_verdicts.py checks that every such verdict is what its rule computes and that no seed sentence
gets two verdicts.
"""

from __future__ import annotations

from minivllm_labs.common import spread_verdict
from minivllm_labs.figures import constants, value


def beyond_spread(a_range: tuple[float, float], b_range: tuple[float, float]) -> bool:
    """Two medians differ for real only when their [min, max] ranges over repeats do not overlap
    (common.spread_verdict, the labs' timing rule)."""
    return spread_verdict(a_range, b_range) != "within"


def beyond_variation(difference: float, neighbours: list[float]) -> bool:
    """Without repeats: a difference counts only when it exceeds the spread of the same quantity measured at
    neighbouring settings of one record (max - min)."""
    return abs(difference) > max(neighbours) - min(neighbours)


def impossible_below(claimed: float, floor: float) -> bool:
    """A claimed time below what the arithmetic allows (bytes / bandwidth, FLOPs / peak) cannot be measured."""
    return claimed < floor


def holds_in(held: int, of: int) -> str:
    """A sentence checked in `of` measured configurations, holding in `held` of them."""
    return "right" if held == of else ("wrong" if held == 0 else "partly")


# ---- the rules the labs name ---------------------------------------------------------------------------
def graphs_same_results(_figure=None) -> str:
    """"CUDA graphs only change how kernels are launched, not the computation": does every recorded comparison of
    a graph replay with eager give the same tokens? Lab 06's FULL graphs (16 requests), Lab 10's same-size and
    padded replays (bitwise), and Lab 10's default mode (graphs with torch.compile) at batch 8 and 64."""
    checks = [value("lab06.json", "graphs.same_tokens") == value("lab06.json", "graphs.requests"),
              value("lab10.json", "padded_graph.exact_vs_eager.identical")
              == value("lab10.json", "padded_graph.exact_vs_eager.requests"),
              value("lab10.json", "padded_graph.padded_vs_eager.identical")
              == value("lab10.json", "padded_graph.padded_vs_eager.requests")]
    for row in value("lab10.json", "graphs_vs_eager.rows"):
        checks.append(row["identical"] == row["requests"])
    return holds_in(sum(checks), len(checks))


def prefill_floor_ms(params: float, tokens: int, peak_flops: float) -> float:
    """A prefill does about 2 x parameters x tokens FLOPs: at the datasheet's dense peak it takes at least this."""
    return 2 * params * tokens / peak_flops * 1e3


def ttft_a100_13b(_figure=None) -> str:
    """The article's A100 LLaMA-2-13B TTFT, 38 -> 21 ms for a 512-token prompt: both below the prefill's
    arithmetic floor (constants.yaml: llama13b_prefill_floor) are impossible."""
    c = constants()["llama13b_prefill_floor"]
    floor = prefill_floor_ms(c["params"], c["tokens"], c["peak_flops"])
    return "wrong" if impossible_below(max(c["claimed_ms"]), floor) else "unverifiable"


def gains_at_batch_8(_figure=None) -> str:
    """"At batch 8 the gain drops to about 20%": the measured share of TPOT that graphs save at batch 8 against
    the claimed 20%. latency.json has one run per batch size, so the difference counts only beyond the variation
    of eager TPOT across batch 1, 2, 4 and 8 (each relative to its mean)."""
    eager = [value("latency.json", f"rows.{i}.tpot_s") for i in range(4)]
    graphs8 = value("latency.json", "rows.12.tpot_s")
    gain = 1 - graphs8 / eager[3]
    mean = sum(eager) / len(eager)
    variation = [e / mean for e in eager]  # a run-to-run scale on eager TPOT, as a fraction
    return "wrong" if beyond_variation(gain - 0.20, variation) else "partly"


def graph_launch_saves(graph_launch_us: float) -> str:
    """"The runtime submits the recorded kernels at once and saves the launch overhead": one replay of Lab 01's
    graph of n tiny ops costs the CPU `graph_launch_us`, against n x the eager cost per op; right when the whole
    graph launches for less than the eager launches of 1% of its ops."""
    lo = value("lab01.json", "launch_overhead")
    return "right" if graph_launch_us < 0.01 * lo["n_ops"] * lo["eager_us_per_op"] else "partly"
