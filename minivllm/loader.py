"""Load a local Hugging Face checkpoint directory: config.json, *.safetensors, tokenizer.

Only safetensors are read: a .bin/.pt file is a pickle, and unpickling runs arbitrary code, so such a
checkpoint is refused. Nothing is downloaded and no code from the checkpoint is executed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn
from tqdm.auto import tqdm

from minivllm.models.config import ModelConfig
from minivllm.models.registry import MODEL_REGISTRY, get_model_class

logger = logging.getLogger("minivllm")


def check_model_dir(model: str | Path) -> Path:
    path = Path(model).expanduser()
    if not path.is_dir():
        raise ValueError(f"model={str(model)!r}: no such local directory (minivllm loads local Hugging Face "
                         f"checkpoint directories only; nothing is downloaded)")
    if not (path / "config.json").is_file():
        raise ValueError(f"model={str(model)!r}: the directory has no config.json")
    return path


def load_model_config(path: Path) -> ModelConfig:
    with open(path / "config.json") as f:
        raw = json.load(f)
    archs = raw.get("architectures") or ["<none>"]
    if archs[0] not in MODEL_REGISTRY:
        raise ValueError(f"unsupported architecture {archs[0]!r} in config.json; supported: {sorted(MODEL_REGISTRY)}")
    try:
        return ModelConfig.from_dict(raw)
    except KeyError as e:
        raise ValueError(f"config.json of {str(path)!r} lacks the field {e}") from None


def safetensors_files(path: Path) -> list[Path]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        with open(index) as f:
            names = sorted(set(json.load(f)["weight_map"].values()))
        files = [path / n for n in names]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise ValueError(f"model={str(path)!r}: shards listed in the index are missing: {missing}")
        return files
    files = sorted(path.glob("*.safetensors"))
    if files:
        return files
    pickles = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
    if pickles:
        raise ValueError(f"model={str(path)!r} has only pickle weights ({', '.join(pickles)}); minivllm loads "
                         f"safetensors only, because unpickling a checkpoint can execute arbitrary code. Convert "
                         f"it once with transformers: model.save_pretrained(dir, safe_serialization=True)")
    raise ValueError(f"model={str(path)!r} has no *.safetensors weights")


def load_weights(model: nn.Module, path: Path, device: torch.device, dtype: torch.dtype) -> None:
    params = dict(model.named_parameters(remove_duplicate=False))
    packed = getattr(model, "packed_modules", {})
    tied = getattr(model.config, "tie_word_embeddings", False)
    loaded: set[str] = set()
    files = safetensors_files(path)
    with tqdm(total=len(files), desc="Loading safetensors shards", disable=len(files) < 2) as bar:
        for file in files:
            with safe_open(str(file), framework="pt", device="cpu") as f:
                for name in f.keys():
                    if "rotary_emb.inv_freq" in name:
                        continue
                    if tied and name == "lm_head.weight":
                        continue
                    target, shard = name, None
                    for frag, (packed_frag, shard_id) in packed.items():
                        if frag in name:
                            target, shard = name.replace(frag, packed_frag), shard_id
                            break
                    if target not in params:
                        raise ValueError(f"checkpoint tensor {name!r} matches no parameter of "
                                         f"{type(model).__name__}")
                    param = params[target]
                    tensor = f.get_tensor(name).to(device=device, dtype=dtype)
                    loader = getattr(param, "weight_loader", None)
                    if loader is None:
                        if param.shape != tensor.shape:
                            raise ValueError(f"{name}: shape {tuple(tensor.shape)} != {tuple(param.shape)}")
                        param.data.copy_(tensor)
                    elif shard is None:
                        loader(param, tensor)
                    else:
                        loader(param, tensor, shard)
                    loaded.add(f"{target}:{shard}")
            bar.update(1)
    expected = set()
    for pname, p in params.items():
        if not (tied and pname == "lm_head.weight"):
            expected |= {f"{pname}:{sid}" for sid in getattr(p, "shard_ids", [None])}
    got = loaded
    missing = sorted(expected - got)
    if missing:
        more = " ..." if len(missing) > 5 else ""
        raise ValueError(f"checkpoint {str(path)!r} is missing weights: {missing[:5]}{more}")


def load_model(path: Path, cfg: ModelConfig, device: torch.device, dtype: torch.dtype) -> nn.Module:
    cls = get_model_class(cfg)
    with torch.device(device):
        prev = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            model = cls(cfg)
        finally:
            torch.set_default_dtype(prev)
    # RoPE tables stay fp32 whatever the model dtype.
    for m in model.modules():
        if hasattr(m, "cos_sin_cache"):
            m.cos_sin_cache = m.cos_sin_cache.float()
    load_weights(model, path, device, dtype)
    return model.eval()


# tokenizer_config.json keys that make transformers change tokenizer.json's behaviour at load time; with
# any of them set we let transformers build the tokenizer, so encode/decode stay exactly its.
_NEEDS_TRANSFORMERS = ("add_bos_token", "add_eos_token", "add_prefix_space", "legacy")


class FastTokenizer:
    """The checkpoint's tokenizer.json run by the `tokenizers` library directly.

    Why not AutoTokenizer: building a transformers tokenizer costs seconds at every engine start (2.5 s on a
    laptop CPU, 10 s on the H200 host), and the engine only needs encode, decode and the EOS id. Checkpoints
    whose tokenizer_config asks transformers to rewrite the tokenizer (see _NEEDS_TRANSFORMERS) still get
    AutoTokenizer; `LLM.get_tokenizer()` always returns the full transformers tokenizer.
    """

    def __init__(self, path: Path, config: dict) -> None:
        from tokenizers import Tokenizer

        self.path = path
        self._tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        eos = config.get("eos_token")
        eos = eos.get("content") if isinstance(eos, dict) else eos
        self.eos_token_id = self._tok.token_to_id(eos) if eos else None
        self.vocab_size = self._tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=True).ids

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(token_ids, skip_special_tokens=skip_special_tokens)


def load_tokenizer(path: Path):
    """FastTokenizer when tokenizer.json alone defines the tokenizer, else transformers' AutoTokenizer."""
    config_file = path / "tokenizer_config.json"
    try:
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    except ValueError as e:
        raise ValueError(f"model={str(path)!r}: tokenizer_config.json is not valid JSON: {e}") from e
    simple = (path / "tokenizer.json").is_file() and not config.get("clean_up_tokenization_spaces") \
        and not any(k in config for k in _NEEDS_TRANSFORMERS)
    if simple:
        try:
            return FastTokenizer(path, config)
        except Exception as e:  # noqa: BLE001 - fall back to transformers, which may know better
            logger.warning("tokenizers could not load %s (%s); using transformers' AutoTokenizer", path, e)
    return load_hf_tokenizer(path)


def load_hf_tokenizer(path: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - report any tokenizer problem the same way
        raise ValueError(f"model={str(path)!r}: could not load its tokenizer with AutoTokenizer: {e}") from e
