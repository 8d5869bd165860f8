"""Lab 02's views: the tables and plots of its measurements, the numbers behind its questions, the verdicts.

Split from lab02.py (the measurements) so that each file has one job. Every function takes a results dict,
either recorded on the H200 (assets/results/h200/lab02.json) or measured in the notebook, and copes with
the parts a CPU cannot measure (they are absent or say {"device": "cpu"}).
"""

from __future__ import annotations

from minivllm_labs.plots import show  # noqa: F401  (re-exported for the notebook)
from minivllm_labs.quiz_data import load_claims, load_questions
from minivllm_labs.quiz_show import show_quiz  # noqa: F401  (re-exported for the notebook)

RESULTS = "assets/results/h200/lab02.json"


def _get(res: dict | None, *keys, default=None):
    cur = res
    for k in keys:
        if not isinstance(cur, dict) or k not in cur:
            return default
        cur = cur[k]
    return cur


def _gpu(part: dict | None) -> bool:
    return isinstance(part, dict) and part.get("device") == "cuda"


NOT_RECORDED = "(not recorded yet: `python -m minivllm_labs.record lab02` on a GPU makes these numbers)"
NEEDS_GPU = "(needs a CUDA GPU: see the recorded H200 results)"


def _why_missing(res: dict | None) -> str:
    return NOT_RECORDED if res is None else NEEDS_GPU


def _src(res: dict | None, lang: str = "en") -> str:
    gpu = _get(res, "provenance", "gpu")
    if lang == "zh":
        return f"在 {gpu} 上测得" if gpu else "在本机测得"
    return f"Measured on {gpu}" if gpu else "Measured here"


# ---- a) limits -------------------------------------------------------------------------------------------
def limits_text(res: dict | None, lang: str = "en") -> str:
    lim = _get(res, "limits") or {}
    if not _gpu(lim.get("snippet")):
        return _why_missing(res)
    s, f, b, a, h = (lim.get(k, {}) for k in ("snippet", "fixed_address", "branch", "alloc", "host_sync"))
    if lang == "zh":  # the error messages are quoted as the library wrote them
        lines = [f"示例（先 copy_ 再回放）：回放与 eager 一致 = {s.get('replay_matches_eager')}",
                 f"限制 1，重新绑定而不是 copy_：输出对应新输入 = {f.get('output_is_for_new_input')}，"
                 f"对应旧输入 = {f.get('output_is_for_old_input')}，报错 = {f.get('error_raised')}",
                 f"限制 2，主机端分支：eager {b.get('eager_result')}，回放 {b.get('replay_result')}，"
                 f"报错 = {b.get('error_raised')}",
                 f"限制 3，捕获内分配内存：捕获成功 = {a.get('capture_ok')}，回放正确 = {a.get('replay_correct')}，"
                 f"私有显存池 {a.get('pool_mib')} MiB",
                 f"真正会失败的：捕获内调用 .item()：报错 = {h.get('error_raised')}"]
        for c in h.get("chain", []) or [{"type": h.get("error_type"), "message": h.get("message")}]:
            lines.append(f"    {c.get('type')}：“{c.get('message')}”")
        return "\n".join(lines)
    lines = [
        f"snippet (copy_ then replay): replay matches eager = {s.get('replay_matches_eager')}",
        f"limit 1, rebinding instead of copy_: output is for the NEW input = {f.get('output_is_for_new_input')}, "
        f"for the OLD one = {f.get('output_is_for_old_input')}, error raised = {f.get('error_raised')}",
        f"limit 2, host-side branch: eager {b.get('eager_result')} vs replay {b.get('replay_result')}, "
        f"error raised = {b.get('error_raised')}",
        f"limit 3, allocation inside the capture: capture ok = {a.get('capture_ok')}, replay correct = "
        f"{a.get('replay_correct')}, private pool {a.get('pool_mib')} MiB",
        f"what does fail, .item() inside the capture: error raised = {h.get('error_raised')}",
    ]
    for c in h.get("chain", []) or [{"type": h.get("error_type"), "message": h.get("message")}]:
        lines.append(f"    {c.get('type')}: {c.get('message')}")
    return "\n".join(lines)


def rng_text(res: dict | None) -> str:
    r = _get(res, "rng") or {}
    if not _gpu(r):
        return _why_missing(res)
    lines = [f"replay {i + 1}: samples {s}" for i, s in enumerate(r["samples"])]
    return "\n".join(lines + [f"{r['distinct']} distinct results in {r['replays']} replays"])


# ---- b) capture sizes ------------------------------------------------------------------------------------
def capture_sizes_text(res: dict | None) -> str:
    cs = _get(res, "capture_sizes")
    if not cs:
        return "(no capture sizes in these results)"
    d = cs["default_256"]
    lines = [f"max_num_seqs=256 (the default): {len(d)} sizes: {d[:6]} ... {d[-3:]}",
             f"{'max_num_seqs':>13} {'graphs':>7} {'largest':>8}"]
    lines += [f"{r['max_num_seqs']:>13} {r['num_graphs']:>7} {r['largest']:>8}" for r in cs["rows"]]
    return "\n".join(lines)


# ---- c) padding ------------------------------------------------------------------------------------------
def _ms(s: dict | None) -> str:
    if not s:
        return "n/a"
    return f"{s['median']} ms ({s['min']}-{s['max']}, n={s['n']})"


def padding_verdict(res: dict | None, lang: str = "en") -> str | None:
    """Graph 8 minus graph 5 against the spread of the repeats: is padding 5 -> 8 measurable at all?"""
    r = _get(res, "padding", "replay_ms") or {}
    if "5" not in r or "8" not in r:
        return None
    d = r["8"]["median"] - r["5"]["median"]
    spread = max(r["8"]["max"] - r["8"]["min"], r["5"]["max"] - r["5"]["min"])
    where = "within" if abs(d) <= spread else "beyond"
    if lang == "zh":
        if d < 0 and where == "beyond":
            return (f"尺寸 8 的图回放比尺寸 5 的快 {round(-d, 4)} ms（{round(-100 * d / r['5']['median'], 1)}%），超出多次重复的"
                    f"波动（{round(spread, 4)} ms）：这里 pad 出来的行不花时间")
        return (f"从 5 pad 到 8 每次回放多花 {round(d, 4)} ms（{round(100 * d / r['5']['median'], 1)}%），"
                f"{'在' if where == 'within' else '超出'}多次重复的波动（{round(spread, 4)} ms）{'之内' if where == 'within' else ''}")
    if d < 0 and where == "beyond":
        return (f"graph 8 replays {round(-d, 4)} ms faster than graph 5 ({round(-100 * d / r['5']['median'], 1)}%), "
                f"beyond the spread of the repeats ({round(spread, 4)} ms): the padded rows cost no time here")
    return (f"padding 5 -> 8 costs {round(d, 4)} ms per replay ({round(100 * d / r['5']['median'], 1)}%), "
            f"{where} the spread of the repeats ({round(spread, 4)} ms)")


def padding_table(res: dict | None) -> str:
    p = _get(res, "padding") or {}
    if not _gpu(p):
        return _why_missing(res)
    rows = ["one replay of the FULL_DECODE_ONLY graph of size n (GPU time, median and min-max):"]
    rows += [f"  n={n:>3}: {_ms(s)}" for n, s in p.get("replay_ms", {}).items()]
    if (v := padding_verdict(res)) is not None:
        rows.append(f"  {v}")
    rows.append("engine TPOT, vLLM-style sizes (5 captured too) vs one graph of size 256 only:")
    for b in ("1", "5", "8"):
        rows.append(f"  batch {b}: {_ms(_get(p, 'tpot_several', b))}  vs  {_ms(_get(p, 'tpot_largest_only', b))}")
    cap = p.get("capture") or {}
    rows.append(f"capturing {len(cap.get('sizes') or [])} sizes took {cap.get('seconds')} s, "
                f"pool {cap.get('pool_mib')} MiB")
    return "\n".join(rows)


def plot_padding(res: dict):
    from minivllm_labs.plots import figure

    p = res["padding"]
    batches = ["1", "5", "8"]
    series = {"several sizes": [_get(p, "tpot_several", b, "median") for b in batches],
              "one graph of size 256": [_get(p, "tpot_largest_only", b, "median") for b in batches]}
    return figure([f"batch {b}" for b in batches], series, kind="bar", toggle=True, y_title="TPOT (ms)",
                  title="Padding to a captured size: several sizes vs the largest only",
                  zh={"title": "padding 到已捕获的尺寸：多个尺寸 vs 只捕获最大尺寸", "y": "TPOT（毫秒）",
                      "names": {"several sizes": "多个尺寸", "one graph of size 256": "只有一张 256 的图"}})


# ---- d) pools --------------------------------------------------------------------------------------------
def pool_table(res: dict | None) -> str:
    p = _get(res, "pool")
    if not p:
        return _why_missing(res)
    sh, se = p["shared"], p["separate"]
    return (f"{p['num_graphs']} graphs (sizes {p['sizes']}):\n"
            f"  one shared pool, largest first: {sh['total_mib']} MiB in the allocator "
            f"(free memory fell {sh['free_drop_mib']} MiB)\n"
            f"  separate pools:                 {se['total_mib']} MiB in the allocator "
            f"(free memory fell {se['free_drop_mib']} MiB)\n"
            f"  the article: 150 MB per graph, 1,500 MB for 10 (for a 7B model)")


def plot_pool(res: dict):
    from minivllm_labs.plots import figure

    p = res["pool"]
    sizes = [str(s) for s in p["sizes"]]
    return figure(sizes, {"shared pool (growth per graph)": [p["shared"]["per_graph_mib"][s] for s in sizes],
                          "separate pools": [p["separate"]["per_graph_mib"][s] for s in sizes]},
                  kind="bar", toggle=True, x_title="graph (batch size)", y_title="MiB",
                  title="Graph pool memory per captured size",
                  zh={"title": "每个捕获尺寸占用的图显存池", "x": "图（batch 大小）", "y": "MiB",
                      "names": {"shared pool (growth per graph)": "共享显存池（每张图的增量）",
                                "separate pools": "各自独立的显存池"}})


# ---- f) modes --------------------------------------------------------------------------------------------
def _paths(s: dict | None, lang: str = "en") -> str:
    zh = lang == "zh"
    if not s:
        return "无数据" if zh else "n/a"
    paths = s.get("steps_by_path")
    if paths is None:
        return "走 eager（未捕获图）" if zh else "eager (no graphs captured)"
    return ("、" if zh else ", ").join(f"{k} {v}" for k, v in paths.items() if v) or ("无" if zh else "none")


def _decode_only_full(res: dict | None) -> bool:
    """A record made before FULL took vLLM's meaning: its four modes list no FULL_DECODE_ONLY, and its "FULL" was
    the decode-only mode (the H200 record made at 135d8b1)."""
    names = _get(res, "modes", "modes") or []
    return "FULL" in names and "FULL_DECODE_ONLY" not in names


def _label(res: dict | None, mode: str, lang: str = "en") -> str:
    if mode == "FULL" and _decode_only_full(res):
        return ("FULL（录制时只管 decode，即现在的 FULL_DECODE_ONLY）" if lang == "zh" else
                "FULL (recorded as decode-only: today's FULL_DECODE_ONLY)")
    return mode


def modes_record_text(res: dict | None) -> str:
    """Which meaning of FULL this record holds, and the path FULL's prefills took in it."""
    m = _get(res, "modes")
    if not m or "FULL" not in m.get("modes", []):
        return _why_missing(res)
    commit = _get(res, "provenance", "commit") or "an unknown commit"
    s, ln = m["FULL"]["prefill_short"], m["FULL"]["prefill_long"]
    ran = (f"its {s['prompt_len']}-token prefill ran {_paths(s)}, its {ln['prompt_len']}-token prefill ran "
           f"{_paths(ln)} (modes.FULL.prefill_short / prefill_long .steps_by_path)")
    if _decode_only_full(res):
        return (f"This record was made at {commit}, when the engine's FULL was decode-only (today's FULL_DECODE_ONLY): "
                f"{ran}. Under today's FULL a prefill up to the largest capture size replays a full graph.")
    return f"Recorded at {commit}, FULL with vLLM's meaning (any batch, keyed by token count): {ran}."


def piecewise_gap_text(res: dict | None) -> str:
    """PIECEWISE's decode TPOT against the full-graph modes: in this record, and in modes.json (one process per
    mode, the engine's default compile mode), whichever are present."""
    lines = []
    m = _get(res, "modes") or {}
    at = f"this record (at {_get(res, 'provenance', 'commit')})"
    fulls = [k for k in ("FULL_DECODE_ONLY", "FULL") if k in m.get("modes", [])]
    for b in ("1", "8"):
        pw = _get(m, "PIECEWISE", "decode", b, "tpot_ms", "median")
        for full in fulls:
            fu = _get(m, full, "decode", b, "tpot_ms", "median")
            if pw and fu:
                lines.append(f"{at}, batch {b}: PIECEWISE {pw} ms vs {_label(res, full)} {fu} ms TPOT: "
                             f"{round(pw / fu, 2)}x (modes.PIECEWISE / modes.{full} .decode.{b}.tpot_ms.median)")
    mj = _other_record(MODES_RESULTS) or {}
    commit = _get(mj, "provenance", "commit")
    # modes_check.py divides by FULL_DECODE_ONLY (the full decode graphs) where the record has it, else by FULL
    over = "FULL_DECODE_ONLY" if _get(mj, "modes", "FULL_DECODE_ONLY") else "FULL"
    for b in ("1", "64"):
        t = {k: _get(mj, "modes", k, "tpot_ms", b) for k in ("PIECEWISE", over, "FULL", "FULL_AND_PIECEWISE")}
        if all(t.values()):
            listed = ", ".join(f"{k} {v} ms" for k, v in t.items())
            lines.append(f"{MODES_RESULTS} (at {commit}), batch {b}: {listed} TPOT; PIECEWISE / {over} = "
                         f"{_get(mj, 'piecewise_over_full_tpot', b)}x (modes.<mode>.tpot_ms.{b})")
    return "\n".join(lines) or _why_missing(res)


def modes_table(res: dict | None) -> str:
    m = _get(res, "modes")
    if not m:
        return _why_missing(res)
    lines = []
    for mode in m["modes"]:
        r = m[mode]
        pieces = f", {r['pieces']} pieces" if r.get("pieces") else ""
        lines.append(f"{_label(res, mode)}{pieces}:")
        for b, s in r["decode"].items():
            lines.append(f"  decode batch {b}: TPOT {_ms(s.get('tpot_ms'))}; steps: {_paths(s)}")
        for key in ("prefill_short", "prefill_long"):
            s = r[key]
            lines.append(f"  prefill of {s['prompt_len']} tokens: TTFT {_ms(s['ttft_ms'])}; step ran: {_paths(s)}")
    return "\n".join(lines)


def plot_modes(res: dict):
    from minivllm_labs.plots import figure

    m = res["modes"]
    names = m["modes"]
    series = {"TPOT batch 1": [_get(m, n, "decode", "1", "tpot_ms", "median") for n in names],
              "TPOT batch 8": [_get(m, n, "decode", "8", "tpot_ms", "median") for n in names],
              "TTFT 128 tokens": [_get(m, n, "prefill_short", "ttft_ms", "median") for n in names],
              f"TTFT {m['long_prompt']} tokens": [_get(m, n, "prefill_long", "ttft_ms", "median") for n in names]}
    zh_names = {"TPOT batch 1": "TPOT batch 1", "TPOT batch 8": "TPOT batch 8", "TTFT 128 tokens": "TTFT 128 个 token",
                f"TTFT {m['long_prompt']} tokens": f"TTFT {m['long_prompt']} 个 token"}
    return figure(names, series, kind="bar", toggle=True, log_y=True, y_title="ms",
                  title="CUDA graph modes on the engine",
                  zh={"title": "引擎上的各种 CUDA Graph 模式", "y": "毫秒", "names": zh_names})


def show_code(fn) -> None:
    """Print a measurement's source: the notebook shows exactly the code whose output it records."""
    import inspect

    print(inspect.getsource(fn).rstrip())


# ---- the questions' evidence; the questions and claims themselves are data/lab02.yaml ----------------------
def _no_gpu(res: dict | None, lang: str = "en") -> str | None:
    if not res:
        return ("没有可用的测量（本仓库没有录制的 GPU 结果）。" if lang == "zh" else
                "No measurements available (no recorded GPU results in this checkout).")
    return None


def _no_graphs(res: dict | None, lang: str) -> str:
    return (f"{_src(res, lang)}：本设备没有 CUDA Graph；见录制的 H200 结果。" if lang == "zh" else
            f"{_src(res)}: no graphs on this device; see the recorded H200 results.")


def q1_evidence(res: dict | None, lang: str = "en") -> str:
    """Interview 2: the cost of one graph of the largest size, and what several sizes cost at startup."""
    if (msg := _no_gpu(res, lang)) is not None:
        return msg
    p = _get(res, "padding") or {}
    if not _gpu(p):
        return _no_graphs(res, lang)
    if lang == "zh":
        r, cap = p.get("replay_ms", {}), p.get("capture") or {}
        lines = [f"{_src(res, lang)}："]
        lines += [f"- batch {b}：多档尺寸时 TPOT {_get(p, 'tpot_several', b, 'median')} ms，pad 到 256 的图时 "
                  f"{_get(p, 'tpot_largest_only', b, 'median')} ms" for b in ("1", "8")]
        if "1" in r and "256" in r:
            lines.append(f"- 回放一次：尺寸 1 {r['1']['median']} ms，尺寸 256 {r['256']['median']} ms")
        lines.append(f"- 启动时捕获全部 {len(cap.get('sizes') or [])} 个尺寸花了 {cap.get('seconds')} s 和 "
                     f"{cap.get('pool_mib')} MiB 显存池")
        return "\n".join(lines)
    lines = [f"{_src(res)}:"]
    for b in ("1", "8"):
        lines.append(f"- batch {b}: TPOT {_get(p, 'tpot_several', b, 'median')} ms with several sizes, "
                     f"{_get(p, 'tpot_largest_only', b, 'median')} ms padded to the size-256 graph")
    r = p.get("replay_ms", {})
    if "1" in r and "256" in r:
        lines.append(f"- one replay: size 1 {r['1']['median']} ms, size 256 {r['256']['median']} ms")
    cap = p.get("capture") or {}
    lines.append(f"- capturing all {len(cap.get('sizes') or [])} sizes cost {cap.get('seconds')} s and "
                 f"{cap.get('pool_mib')} MiB of pool at startup")
    return "\n".join(lines)


def q2_evidence(res: dict | None, lang: str = "en") -> str:
    """Interview 3: which path the prefill step took in each mode, and its TTFT."""
    if (msg := _no_gpu(res, lang)) is not None:
        return msg
    m = _get(res, "modes") or {}
    if lang == "zh":
        lines = [f"{_src(res, lang)}："]
        for mode in m.get("modes", []):
            s, ln = m[mode]["prefill_short"], m[mode]["prefill_long"]
            lines.append(f"- {_label(res, mode, lang)}：{s['prompt_len']} token 的预填充：{_paths(s, lang)}"
                         f"（TTFT {s['ttft_ms']['median']} ms）；{ln['prompt_len']} token 的：{_paths(ln, lang)}"
                         f"（TTFT {ln['ttft_ms']['median']} ms）")
        return "\n".join(lines if len(lines) > 1 else lines + ["- 没有各模式的测量"])
    lines = [f"{_src(res)}:"]
    for mode in m.get("modes", []):
        s, ln = m[mode]["prefill_short"], m[mode]["prefill_long"]
        lines.append(f"- {_label(res, mode)}: {s['prompt_len']}-token prefill ran {_paths(s)} "
                     f"(TTFT {s['ttft_ms']['median']} ms); "
                     f"{ln['prompt_len']} tokens ran {_paths(ln)} (TTFT {ln['ttft_ms']['median']} ms)")
    if len(lines) == 1:
        lines.append("- no mode measurements")
    return "\n".join(lines)


def q3_evidence(res: dict | None, lang: str = "en") -> str:
    if (msg := _no_gpu(res, lang)) is not None:
        return msg
    r = _get(res, "rng") or {}
    if not _gpu(r):
        return _no_graphs(res, lang)
    if lang == "zh":
        return f"{_src(res, lang)}：同一个捕获的采样步回放 {r['replays']} 次，得到 {r['distinct']} 种不同的采样：{r['samples']}"
    return f"{_src(res)}: {r['replays']} replays of one captured sampling step gave {r['distinct']} distinct " \
           f"samples: {r['samples']}"


def q4_evidence(res: dict | None, lang: str = "en") -> str:
    if (msg := _no_gpu(res, lang)) is not None:
        return msg
    p = _get(res, "padding") or {}
    r = p.get("replay_ms", {})
    if not ("5" in r and "8" in r):
        return _no_graphs(res, lang)
    if lang == "zh":
        return (f"{_src(res, lang)}：尺寸 5 的图回放一次 {_ms(r['5'])}，尺寸 8 的图 {_ms(r['8'])}："
                f"{padding_verdict(res, lang)}；引擎在 batch 5 用自己那张图时 TPOT 为 "
                f"{_get(p, 'tpot_several', '5', 'median')} ms")
    return (f"{_src(res)}: one replay of the size-5 graph {_ms(r['5'])}, of the size-8 graph {_ms(r['8'])}: "
            f"{padding_verdict(res)}; engine TPOT at batch 5: {_get(p, 'tpot_several', '5', 'median')} ms on its "
            f"own graph")


def q5_evidence(res: dict | None, lang: str = "en") -> str:
    if (msg := _no_gpu(res, lang)) is not None:
        return msg
    if lang == "zh":
        return f"{_src(res, lang)}：\n{limits_text(res, lang)}"
    return f"{_src(res)}:\n{limits_text(res)}"


QUESTIONS = load_questions("lab02", {"q1_evidence": q1_evidence, "q2_evidence": q2_evidence, "q3_evidence": q3_evidence, "q4_evidence": q4_evidence, "q5_evidence": q5_evidence})
Q1, Q2, Q3, Q4, Q5 = (QUESTIONS[f"lab02.q{i}"] for i in range(1, 6))
CLAIMS = load_claims("lab02")


def _figure_of(c, res: dict | None):
    """The number behind a claim: recorded in this lab's results (when present), else the claim's figure."""
    if c.evidence_file == RESULTS and res:
        from minivllm_labs.lab_info import resolve_key

        try:
            return resolve_key(res, c.evidence_key)
        except (KeyError, IndexError):
            return None
    return c.figure


def verdicts_table(res: dict | None) -> str:
    """The summary: one line per claim, its verdict, the number that decides it and where it lives."""
    lines = [f"{'claim':<58} {'verdict':<8} {'number':>8}  file:key"]
    for c in CLAIMS:
        fig = _figure_of(c, res)
        shown = "(record)" if fig is None else str(fig)
        lines.append(f"{c.claim_en[:58]:<58} {c.verdict:<8} {shown:>8}  "
                     f"{c.evidence_file.rsplit('/', 1)[-1]}:{c.evidence_key}")
    return "\n".join(lines)


# Qwen3-0.6B's parameters (from its config.json: 28 layers, hidden 1024, 16 q / 8 kv heads of 128, MLP 3072,
# vocabulary 151936, tied embeddings): a property of the model, not a measurement. One decode step reads them all.
QWEN3_06B_PARAMS = 596_049_920
KERNELS_RESULTS = "kernels.json"  # the device's measured copy bandwidth (`minivllm bench kernels`)
MODES_RESULTS = "modes.json"  # every graph mode, one process each (`scripts/gpu_check.sh modes`)


def _other_record(name: str, *keys):
    """A value from another results file beside lab02.json (a bench's record), or None when absent."""
    from minivllm_labs.recorded import other_record

    data = other_record(name)
    return None if data is None else _get(data, *keys)


def _copy_gbps() -> float | None:
    """The H200's copy bandwidth recorded by `bench kernels`, or None when the file is absent."""
    v = _other_record(KERNELS_RESULTS, "copy_GBps")
    return float(v) if isinstance(v, (int, float)) else None


def padding_bound_text(res: dict | None, copy_gbps: float | None = None) -> str:
    """Why a padded row costs no time at small batches: the weights' read time against the replay time.

    At batch 1-8 a decode step is neither compute- nor bandwidth-bound: reading every weight once at the
    device's copy bandwidth takes a fraction of the replay, so the step's time is the latency of its kernels
    in sequence, each too small to fill the GPU; more rows add almost nothing to any of them."""
    r = _get(res, "padding", "replay_ms") or {}
    if not _gpu(_get(res, "padding")) or not {"1", "8"} <= set(r):
        return _why_missing(res)
    gbps = copy_gbps if copy_gbps is not None else _copy_gbps()
    weight_gb = QWEN3_06B_PARAMS * 2 / 1e9  # bf16
    lines = [f"weights read per decode step: {weight_gb:.2f} GB (Qwen3-0.6B shape, bf16)"]
    small = [r[k]["median"] for k in ("1", "5", "8") if k in r]
    lo, hi = min(small), max(small)
    if gbps:
        floor_ms = weight_gb / gbps * 1e3
        lines.append(f"at the measured copy bandwidth, {round(gbps / 1e3, 2)} TB/s ({KERNELS_RESULTS} copy_GBps), "
                     f"that is {floor_ms:.2f} ms")
        lines.append(f"replays of graphs 1-8 take {lo}-{hi} ms, {lo / floor_ms:.1f}-{hi / floor_ms:.1f}x that "
                     f"floor: the step is latency-bound (kernels in sequence, each too small to fill the GPU), "
                     f"not memory-bound")
    else:
        lines.append(f"replays of graphs 1-8 take {lo}-{hi} ms ({KERNELS_RESULTS} absent: no bandwidth to compare)")
    return "\n".join(lines)


def pool_figures_text(res: dict | None) -> str:
    """Every graph-pool figure Lab 02 shows, with what was captured for it, so that none contradicts another."""
    if res is None:
        return NOT_RECORDED
    alloc = _get(res, "limits", "alloc") or {}
    pool = _get(res, "pool") or {}
    cap = _get(res, "padding", "capture") or {}
    lines = []
    if alloc.get("pool_mib") is not None:
        lines.append(f"{alloc['pool_mib']} MiB: limit 3's toy graph (a 16 MiB tensor and its product allocated inside "
                     f"one capture), not the engine")
    if pool.get("shared"):
        lines.append(f"{pool['shared']['total_mib']} MiB shared vs {pool['separate']['total_mib']} MiB separate: the "
                     f"model's forward alone, {pool.get('num_graphs')} decode sizes {pool.get('sizes')} at a "
                     f"{pool.get('context')}-token context, one pool vs one pool per graph (section d)")
    if cap.get("pool_mib") is not None:
        lines.append(f"{cap['pool_mib']} MiB: the engine's own capture of the whole decode step (forward and LM head, "
                     f"the sampler runs after it) for {len(cap.get('sizes') or [])} sizes {cap.get('sizes')}, "
                     f"contexts up to 256 tokens (section c); the largest graph sets it, growth per size "
                     f"{cap.get('pool_growth_mib')}")
    full = _other_record("latency.json", "modes", "FULL") or {}
    if full.get("graph_pool_mib") is not None:
        sizes = _get(full, "startup", "cudagraph", "FULL", "sizes") or [0]
        what = "decode graphs, sizes up to max_num_seqs" if max(sizes) <= 256 else "graphs keyed by token count, up to"
        lines.append(f"{full['graph_pool_mib']} MiB: the engine's capture of {len(sizes)} FULL {what} {max(sizes)}, "
                     f"read from the allocator (latency.json modes.FULL, at "
                     f"{_other_record('latency.json', 'provenance', 'git', 'commit')}); the device's free memory "
                     f"drops {full.get('graph_free_memory_drop_mib')} MiB, the graph executables included")
    old = _other_record("compile_vs_graphs.json", "modes", "FULL", "graph_pool_mib")
    if old is not None:
        lines.append(f"{old} MiB for the same graphs in compile_vs_graphs.json (fec5d27, older): read before the pool "
                     f"came from the allocator's segments; superseded by the line above")
    return "\n".join(lines) or _why_missing(res)
