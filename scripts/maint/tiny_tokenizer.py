"""A small byte-level BPE tokenizer, trained here in about a second, that `AutoTokenizer` loads offline.

Why train one: real tokenizers cannot be downloaded in this project, and the engine needs a tokenizer next
to every checkpoint. train_tiny.py writes this one beside the embedded model (assets/models/minivllm-tiny),
and minivllm/tools/make_random_checkpoint.py copies it from there beside every random-weight checkpoint.
Byte-level BPE (GPT-2 / Llama 3 / Qwen style) can encode any text, so prompts outside the training text
still work, only in more tokens.

Choices that matter for the tiny task: digits are split one by one (as in Llama 3 and Qwen) so numbers
are sequences of digit tokens, and the post-processor prepends <s> (as Llama does), so
`tokenizer(prompt)` already starts with BOS and the engine needs no special case.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS = "<pad>", "<s>", "</s>"  # ids 0, 1, 2
DEFAULT_VOCAB_SIZE = 512

#: A little ordinary English so that general prompts get real merges, not only single bytes.
ENGLISH = """\
The quick brown fox jumps over the lazy dog. A language model reads a prompt, one token at a time,
and writes the next token. Serving many requests at once is about memory: the key and value cache
grows with every token, so the engine stores it in fixed-size blocks, like pages of virtual memory.
Hello, my name is minivllm. The capital of France is Paris. The future of AI is open and small.
Once upon a time there was a tiny model that learned to add numbers, reverse words and sort letters.
What is the meaning of life? Write a short poem about the sea. Explain how attention works in simple words.
"""


def train_tokenizer(texts: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Train byte-level BPE on `texts` and wrap it for transformers (pad=0, bos=1, eos=2)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: any text can be encoded
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, tok.token_to_id(BOS))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, padding_side="left",
        model_max_length=4096,
    )


def default_tokenizer(vocab_size: int = DEFAULT_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """The project's tokenizer: trained on the tiny task's training text plus a paragraph of English.
    Deterministic: training it again gives the files the embedded model ships."""
    from minivllm.tools.tiny_task import KINDS, make_examples

    corpus = [f"{p} {a}" for p, a in make_examples(2000 * len(KINDS), seed=0)]  # training-split "prompt answer"
    return train_tokenizer(corpus + ENGLISH.splitlines() * 20, vocab_size)


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, out_dir: str | Path) -> None:
    """Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json.

    The class is named "PreTrainedTokenizerFast" (not transformers 5's "TokenizersBackend") and the
    special-tokens map is written by hand, so that transformers 4.x loads the directory too."""
    out_dir = Path(out_dir)
    tokenizer.save_pretrained(str(out_dir))
    cfg_path = out_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    special = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
