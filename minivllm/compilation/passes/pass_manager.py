"""PostGradPassManager: the engine's FX passes, run by Inductor on each graph it compiles, after its own
post-grad passes and before it generates code (vLLM: vllm/compilation/passes/pass_manager.py).

How it plugs in: Inductor calls `config.post_grad_custom_post_pass(graph)` on every post-grad graph, so
the manager is handed to Inductor as that config patch (compilation/levels.py), for each piece at mode 3
and for the whole graph at modes 1-2. It is a CustomGraphPass: its uuid() (the passes asked for and the
source of every pass file) enters Inductor's FX-graph cache key, so a cached piece compiled with other
passes is never reused. The engine's own compile-cache key covers pass_config as part of the compilation
config (compilation/cache.py).

Each pass returns how many rewrites it made; the manager sums them per pass over the graphs it saw, and
compile_report() lists them. A warm start loads compiled pieces and runs no pass: its counts are 0 and the
report's cache_warm says why.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from torch import fx
from torch._inductor.custom_graph_pass import CustomGraphPass

from minivllm.compilation.passes.pass_config import PassConfig

logger = logging.getLogger("minivllm")


def _make_pass(name: str):
    if name == "eliminate_noops":
        from minivllm.compilation.passes.noop_elimination import NoOpEliminationPass

        return NoOpEliminationPass()
    from minivllm.compilation.passes import fusion

    return fusion.rms_norm_quant_pass() if name == "fuse_norm_quant" else fusion.act_quant_pass()


class PostGradPassManager(CustomGraphPass):
    def __init__(self, config: PassConfig) -> None:
        self.config = config
        self.passes = [(name, _make_pass(name)) for name in config.enabled()]
        self.matches = {name: 0 for name, _ in self.passes}
        self.graphs = 0

    def __call__(self, graph: fx.Graph) -> None:
        self.graphs += 1
        for name, p in self.passes:
            n = p(graph)
            self.matches[name] += n
            logger.debug("pass %s: %d rewrite(s) in graph %d", name, n, self.graphs)
        graph.eliminate_dead_code()

    def uuid(self) -> str:
        h = hashlib.sha256(repr(self.config.enabled()).encode())
        for f in sorted(Path(__file__).parent.glob("*.py")):
            h.update(f.read_bytes())
        return h.hexdigest()

    def report(self) -> dict:
        """{"graphs": how many graphs the passes ran on, "passes": [{"name", "matches"}] in run order}."""
        return {"graphs": self.graphs, "passes": [{"name": n, "matches": self.matches[n]} for n, _ in self.passes]}


def for_config(config: PassConfig) -> PostGradPassManager | None:
    """The manager for this pass_config, or None when no pass is asked for (Inductor then runs none)."""
    return PostGradPassManager(config) if config.enabled() else None
