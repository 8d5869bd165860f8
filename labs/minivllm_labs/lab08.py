"""Lab 08, "Interview prep": a graded bank of interview questions over 19 topics, each answered by a
measurement of this engine (labs 01-07, assets/results/h200/) or, where the engine cannot measure it, by a
formula and a public source; and a mock-interview mode.

The bank is data (data/lab08.yaml, read by quiz_data.py, which shuffles each question's options with a seed
taken from its id, so the letter carries no hint and the order is the same on every machine); this module
adds each question's evidence (the numbers it cites, read when shown), grades any answer without raising,
draws a seeded mock interview across topics, scores it per topic and names what to revisit. The same sampler
and grader run in the
static page (lab08_views.py: JavaScript built from the Python grader's feedback) and live in a kernel
(ipywidgets).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from minivllm_labs.lab_info import LabInfo
from minivllm_labs.quiz import NumericQuestion, Question, answer_tail, grade
from minivllm_labs.quiz_data import cite_lines, entries, question_from_data


@dataclass(frozen=True)
class Entry:
    """One question of the bank as data/lab08.yaml holds it, right option first (the notebook's exercise
    writes one by hand). A measured question has `cites`, (results file, key, label, label_zh) tuples; a
    reasoning one has `not_measured` (why, EN and ZH) and its `formula`; `link` is the public source behind
    it; `lab` and `code` link to where it is measured and implemented."""

    qid: str
    topic: str
    source: str
    prompt: str
    prompt_zh: str
    model_answer: str
    model_answer_zh: str
    right: tuple = ()  # (text, why, text_zh, why_zh)
    wrong: tuple = ()  # of such tuples
    answer: float | None = None  # numeric questions: the value, the relative tolerance and the unit
    rel_tol: float = 0.1
    unit: str = ""
    cites: tuple = ()  # (file, key, label, label_zh)
    lab: str = ""  # "labs/06_paged_kv_and_batching.ipynb"
    code: str = ""  # "minivllm/engine/scheduler.py::Scheduler.schedule"
    not_measured: str = ""
    not_measured_zh: str = ""
    formula: str = ""
    formula_zh: str = ""
    link: str = ""

    @classmethod
    def from_data(cls, d: dict) -> Entry:
        opt = lambda o: (o["text"], o["why"], o.get("text_zh", ""), o.get("why_zh", ""))
        extra = ({"answer": float(d["answer"]), "rel_tol": d["rel_tol"], "unit": d.get("unit", "")} if "answer" in d
                 else {"right": opt(d["right"]), "wrong": tuple(opt(w) for w in d["wrong"])})
        return cls(d["id"], d["topic"], d["source"], d["prompt"], d["prompt_zh"], d["model_answer"],
                   d["model_answer_zh"],
                   cites=tuple((c["file"], c["key"], c["label"], c.get("label_zh", "")) for c in d.get("cites", ())),
                   **{k: d.get(k, "") for k in ("lab", "code", "not_measured", "not_measured_zh", "formula",
                                                "formula_zh", "link")},
                   **extra)

    def as_data(self) -> dict:
        """The entry as the data file writes it (what quiz_data.question_from_data reads)."""
        opt = lambda o: dict(zip(("text", "why", "text_zh", "why_zh"), o))
        d: dict[str, Any] = {"id": self.qid, "topic": self.topic, "source": self.source, "prompt": self.prompt,
                             "prompt_zh": self.prompt_zh, "model_answer": self.model_answer,
                             "model_answer_zh": self.model_answer_zh}
        if self.answer is not None:
            d.update(answer=self.answer, rel_tol=self.rel_tol, unit=self.unit)
        else:
            d.update(right=opt(self.right), wrong=[opt(w) for w in self.wrong])
        if self.cites:  # quiz_data reads them into Question.cites, which the catalog lists as the evidence
            d["cites"] = [{"file": f, "key": k, "label": label} for f, k, label, _ in self.cites]
        if self.not_measured:
            d["not_measured"] = self.not_measured
        return d

    def catalog_extra(self) -> dict:
        """What only this bank adds to a question's catalog row: why nothing is measured in Chinese, the formula
        and the public source (the evidence itself is Question.cites and Question.not_measured, listed by
        quiz.question_dict as for every lab)."""
        d: dict[str, Any] = {}
        if self.not_measured_zh:
            d["not_measured_zh"] = self.not_measured_zh
        d.update({k: v for k, v in (("formula", self.formula), ("formula_zh", self.formula_zh),
                                    ("link", self.link)) if v})
        return d


BANK: tuple[Entry, ...] = tuple(Entry.from_data(d) for d in entries("lab08").values())

# topic -> (title, title_zh, the lab to revisit (or ""), what to read, what to read in Chinese)
TOPIC_INFO: dict[str, tuple[str, str, str, str, str]] = {
    "cuda-graphs": ("CUDA graphs", "CUDA Graph", "labs/02_inside_a_cuda_graph.ipynb",
                    "Lab 01 (launch cost) and Lab 02 (capture, replay, padding, the pool)",
                    "Lab 01（发射开销）和 Lab 02（捕获、重放、padding、显存池）"),
    "torch-compile": ("torch.compile", "torch.compile", "labs/03_torch_compile.ipynb",
                      "Lab 03: one trace split at attention", "Lab 03：整体 trace 一次，在 attention 处切分"),
    "custom-ops": ("custom ops", "自定义算子", "labs/03_torch_compile.ipynb",
                   "Lab 03: registering attention with torch.library", "Lab 03：用 torch.library 注册 attention"),
    "paged-attention": ("paged attention", "Paged Attention", "labs/06_paged_kv_and_batching.ipynb",
                        "Lab 06: blocks, block tables, fragmentation", "Lab 06：块、block table、碎片"),
    "continuous-batching": ("continuous batching", "连续批处理", "labs/06_paged_kv_and_batching.ipynb",
                            "Lab 06: the workload sweep and preemption", "Lab 06：负载扫描与抢占"),
    "chunked-prefill": ("chunked prefill", "Chunked Prefill", "labs/06_paged_kv_and_batching.ipynb",
                        "Lab 06: what the decoders wait for", "Lab 06：解码在等什么"),
    "prefix-caching": ("prefix caching", "前缀缓存", "labs/06_paged_kv_and_batching.ipynb",
                       "Lab 06: hash chains and reference counts", "Lab 06：链式哈希与引用计数"),
    "startup-caches": ("startup and caches", "启动与缓存", "labs/04_startup_and_cache.ipynb",
                       "Lab 04: startup phase by phase, cold and warm", "Lab 04：逐阶段的启动，冷启动与热启动"),
    "debugging": ("debugging", "调试", "labs/05_fallback_ladder.ipynb",
                  "Lab 05: diagnose() and the fallback ladder", "Lab 05：diagnose() 与回退阶梯"),
    "kv-capacity": ("KV sizing and capacity", "KV Cache 容量规划", "labs/06_paged_kv_and_batching.ipynb",
                    "Lab 06: KV bytes per token and the engine's sizing",
                    "Lab 06：每 token 的 KV 字节与引擎的 KV 大小"),
    "roofline": ("prefill/decode roofline", "预填充/解码的 Roofline", "labs/07_claims.ipynb",
                 "Lab 07: bandwidth floors; the ridge point = peak FLOP/s / bandwidth",
                 "Lab 07：带宽下限；拐点 = 峰值算力 ÷ 带宽"),
    "attention-kernels": ("split-KV and FlashAttention tiling", "split-KV 与 FlashAttention 分块", "",
                          ("minivllm/kernels/triton_decode.py and triton_prefill.py (their docstrings); "
                           "FlashAttention, arXiv 2205.14135"),
                          ("minivllm/kernels/triton_decode.py 和 triton_prefill.py（看文件开头的说明）；"
                           "FlashAttention，arXiv 2205.14135")),
    "sampling": ("sampling", "采样", "", "minivllm/layers/sampler.py; vLLM's SamplingParams docs",
                 "minivllm/layers/sampler.py；vLLM 的 SamplingParams 文档"),
    "quantization": ("quantization", "量化", "", "vLLM docs: Quantized KV Cache; Marlin, arXiv 2408.11743",
                     "vLLM 文档：Quantized KV Cache；Marlin，arXiv 2408.11743"),
    "speculative-decoding": ("speculative decoding", "投机解码", "",
                             "Leviathan et al., arXiv 2211.17192; vLLM docs: Speculative Decoding",
                             "Leviathan 等，arXiv 2211.17192；vLLM 文档：Speculative Decoding"),
    "parallelism": ("tensor, pipeline and expert parallelism", "张量/流水线/专家并行", "",
                    "vLLM docs: Parallelism and Scaling; Megatron-LM, arXiv 1909.08053",
                    "vLLM 文档：Parallelism and Scaling；Megatron-LM，arXiv 1909.08053"),
    "moe": ("MoE", "MoE", "", "vLLM docs: Expert Parallel Deployment", "vLLM 文档：Expert Parallel Deployment"),
    "disaggregated-prefill": ("disaggregated prefill", "PD 分离", "",
                              "vLLM docs: Disaggregated Prefilling; DistServe, arXiv 2401.09670",
                              "vLLM 文档：Disaggregated Prefilling；DistServe，arXiv 2401.09670"),
    "slo-tradeoffs": ("SLO trade-offs", "SLO 取舍", "labs/06_paged_kv_and_batching.ipynb",
                      "Lab 06: the workload sweep (TTFT, TPOT, tok/s per setting)",
                      "Lab 06：负载扫描（每个设置的 TTFT、TPOT、tok/s）"),
}
TOPICS = tuple(TOPIC_INFO)


# ---- evidence: numbers read from the results files when shown ---------------------------------------
def evidence_text(e: Entry, lang: str = "en") -> str:
    """The lines under the model answer: the measured numbers, or why there are none, the formula, the source
    and the links, in one language."""
    zh = lang == "zh"
    lines = cite_lines(e.cites, lang=lang)
    out = (["H200 实测："] if zh else ["Measured on the H200:"]) + lines if lines else []
    if e.not_measured:
        out.append(f"推理题，本引擎未实测：{e.not_measured_zh or e.not_measured}。" if zh else
                   f"Reasoning, not measured here: {e.not_measured}.")
    if e.formula:
        out.append(f"公式：{e.formula_zh or e.formula}" if zh else f"Formula: {e.formula}")
    if e.link:
        out.append(f"出处：{e.link}" if zh else f"Source: {e.link}")
    links = ([f"实验：{e.lab}" if zh else f"measured in {e.lab}"] if e.lab else []) + \
        ([f"引擎代码：{e.code}" if zh else f"engine code: {e.code}"] if e.code else [])
    if links:
        out.append("；".join(links) if zh else "; ".join(links))
    return "\n".join(out)


def _evidence(e: Entry, lang: str = "en"):
    """The entry's evidence, in `lang` unless the quiz asks for another (quiz.evidence_text passes `lang`)."""
    return lambda _results=None, lang=lang: evidence_text(e, lang)


# ---- the bank as Questions ---------------------------------------------------------------------------
def build(e: Entry, lang: str = "en") -> Question | NumericQuestion:
    """The entry as a quiz question, options shuffled with random.Random(qid) (quiz_data does it); its
    evidence in `lang`."""
    return question_from_data(e.as_data(), _evidence(e, lang))


QUESTIONS = tuple(build(e) for e in BANK)
BY_ID = {q.qid: q for q in QUESTIONS}
ENTRIES = {e.qid: e for e in BANK}
_ZH = {e.qid: build(e, "zh") for e in BANK}  # the same questions with the evidence written in Chinese


# ---- grading: any answer, never an exception ---------------------------------------------------------
def grade_any(q, answer: Any, results: dict | None = None, lang: str = "en") -> tuple[bool, str]:
    """(correct, feedback in `lang`) for a choice or a numeric question, of this bank or any lab's. quiz.grade
    does the grading: a number is read by quiz_numbers and converted to the question's unit ("284 us" to ms),
    odd input is graded wrong with a hint; this adds the bank's evidence in Chinese and never raises."""
    zh = lang == "zh"
    try:
        same = _ZH.get(q.qid, q) if zh and BY_ID.get(q.qid) is q else q
        return grade(same, answer, results, lang)
    except Exception as e:  # noqa: BLE001 - the grader promises never to raise to a learner
        return False, (f"未评分：{type(e).__name__}。" if zh else f"No answer graded: {type(e).__name__}.")


def answer_tail_both(q, results: dict | None = None) -> tuple[str, str]:
    """The model answer and evidence under a numeric verdict, in English and in Chinese (the page appends it)."""
    zh = _ZH.get(q.qid, q) if BY_ID.get(q.qid) is q else q
    return answer_tail(q, results, "en"), answer_tail(zh, results, "zh")


# ---- mock interview ---------------------------------------------------------------------------------
def mulberry32(seed: int) -> Iterator[float]:
    """A tiny PRNG with an exact JavaScript twin (in MOCK_JS), so the page and Python draw the same questions."""
    a = seed & 0xFFFFFFFF
    while True:
        a = (a + 0x6D2B79F5) & 0xFFFFFFFF
        t = a
        t = ((t ^ (t >> 15)) * (t | 1)) & 0xFFFFFFFF
        t ^= (t + (((t ^ (t >> 7)) * (t | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF
        yield ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296


def mock_interview(n: int, seed: int = 0) -> list[str]:
    """n distinct question ids drawn across topics: a seeded Fisher-Yates shuffle of the bank, then one
    question of each topic before a second of any (the page's JavaScript draws the same)."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= len(QUESTIONS):
        raise ValueError(f"n must be an int in [1, {len(QUESTIONS)}], got {n!r}")
    ids = [q.qid for q in QUESTIONS]
    rng = mulberry32(int(seed))
    for i in range(len(ids) - 1, 0, -1):
        j = int(next(rng) * (i + 1))
        ids[i], ids[j] = ids[j], ids[i]
    seen: Counter = Counter()
    rank = []
    for qid in ids:
        rank.append(seen[BY_ID[qid].topic])
        seen[BY_ID[qid].topic] += 1
    order = sorted(range(len(ids)), key=lambda i: (rank[i], i))
    return [ids[i] for i in order[:n]]


@dataclass
class MockResult:
    correct: int
    total: int
    by_topic: dict[str, list[int]] = field(default_factory=dict)  # topic -> [right, asked]
    weak_topics: list[str] = field(default_factory=list)  # worst first

    def text(self, lang: str = "en") -> str:
        """The score, the score per topic, and for each weak topic the lab or reading to revisit."""
        zh = lang == "zh"
        names = [TOPIC_INFO.get(t, (t, t))[1 if zh else 0] for t in self.weak_topics]
        head = (f"得分 {self.correct}/{self.total}；薄弱主题：{'、'.join(names) or '无'}" if zh else
                f"score {self.correct}/{self.total}; weak topics: {', '.join(names) or 'none'}")
        rows = [f"  {TOPIC_INFO.get(t, (t, t))[1 if zh else 0]}: {r}/{n}"
                for t, (r, n) in sorted(self.by_topic.items())]
        out = [head, "按主题：" if zh else "by topic:", *rows]
        for t in self.weak_topics:
            title, title_zh, lab, read, read_zh = TOPIC_INFO.get(t, (t, t, "", "", ""))
            where = "；".join(x for x in (lab, read_zh) if x) if zh else "; ".join(x for x in (lab, read) if x)
            out.append(f"复习 {title_zh}：{where}" if zh else f"revisit {title}: {where}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text("en")


def score(qids: list[str], answers: dict[str, Any]) -> MockResult:
    """Grade every asked question (unanswered = wrong); weak topics are those with any miss, worst first.
    An id that is not in the bank is a ValueError naming it."""
    if unknown := [qid for qid in qids if qid not in BY_ID]:
        raise ValueError(f"unknown question id(s) {unknown}: the bank's ids are {QUESTIONS[0].qid} ... "
                         f"{QUESTIONS[-1].qid} (lab08.BY_ID)")
    by: dict[str, list[int]] = {}
    right = 0
    for qid in qids:
        q = BY_ID[qid]
        ok, _ = grade_any(q, answers.get(qid))
        right += ok
        t = by.setdefault(q.topic, [0, 0])
        t[0] += ok
        t[1] += 1
    weak = sorted((t for t, (r, n) in by.items() if r < n), key=lambda t: (by[t][0] / by[t][1], t))
    return MockResult(right, len(qids), by, weak)


def bank_table() -> str:
    topics = Counter(q.topic for q in QUESTIONS)
    kinds = Counter("numeric" if isinstance(q, NumericQuestion) else "choice" for q in QUESTIONS)
    letters = Counter(chr(65 + q.correct) for q in QUESTIONS if isinstance(q, Question))
    measured = sum(bool(e.cites) for e in BANK)
    return "\n".join([(f"{len(QUESTIONS)} questions over {len(topics)} topics: {kinds['choice']} multiple choice, "
                       f"{kinds['numeric']} numeric; {measured} measured on this engine, "
                       f"{len(BANK) - measured} reasoning with a formula and a source"),
                      "by topic: " + ", ".join(f"{t} {topics[t]}" for t in TOPICS),
                      "right answers by letter: " + ", ".join(f"{k} {letters[k]}" for k in sorted(letters)),
                      "handbook interview questions: " + ", ".join(q.qid for q in QUESTIONS
                                                                   if q.source.startswith("handbook"))])


def answer_key() -> str:
    """Each question's right option (or numeric answer) and where it is measured."""
    out = []
    for q in QUESTIONS:
        a = f"{q.answer:g} {q.unit}" if isinstance(q, NumericQuestion) else chr(65 + q.correct)
        out.append(f"{q.qid:<12} {a:<14} {q.topic:<22} {ENTRIES[q.qid].lab or 'not measured'}")
    return "\n".join(out)


def run_all(model: str, quick: bool = False) -> dict:
    """Lab 08 measures nothing itself: it records the numbers its feedback cites, as read now."""
    return {"questions": len(QUESTIONS),
            "cited": {q.qid: cite_lines(ENTRIES[q.qid].cites) for q in QUESTIONS if ENTRIES[q.qid].cites}}


@dataclass(frozen=True)
class BankInfo(LabInfo):
    """Lab 08's LabInfo: each catalog row is quiz.question_dict's (options in Chinese, evidence or not_measured,
    as for every lab) plus the bank's own fields: the cited labels and the reason in Chinese, the formula and
    the source."""

    def as_dict(self) -> dict:
        d = super().as_dict()
        for row in d["questions"]:
            e = ENTRIES[row["id"]]
            for ev, (*_, label_zh) in zip(row["evidence"], e.cites):
                ev["label_zh"] = label_zh
            for k, v in e.catalog_extra().items():
                row.setdefault(k, v)
        return d


LAB_INFO = BankInfo(
    lab="lab08", notebook="labs/08_interview_prep.ipynb", title="Interview prep", title_zh="面试准备",
    sections=("§5 interview questions", "all labs"), questions=QUESTIONS, claims=(),
    code=tuple(sorted({e.code.split("::")[0] for e in BANK if e.code})))
