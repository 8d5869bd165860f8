"""Load a local Hugging Face checkpoint directory: config.json, *.safetensors, tokenizer.

Only safetensors are read: a .bin/.pt file is a pickle, and unpickling runs arbitrary code, so such a
checkpoint is refused. Nothing is downloaded and no code from the checkpoint is executed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import nn
from tqdm.auto import tqdm

from minivllm.hub_cache import find_snapshot, hub_model_root, looks_like_repo_id
from minivllm.layers.rotary import attach_rope_tables
from minivllm.logger import progress_bars_enabled
from minivllm.models.config import ModelConfig
from minivllm.models.config_check import check_config_fields
from minivllm.models.registry import MODEL_REGISTRY

logger = logging.getLogger("minivllm")


def check_model_dir(model: str | Path) -> Path:
    """The checkpoint directory of `model`: a local directory, or a Hub name ("org/name") found in the
    local Hugging Face cache (hub_cache.py). Nothing is downloaded."""
    if isinstance(model, str) and not model.strip():
        raise ValueError(f"model={model!r}: an empty name; pass a checkpoint directory or a Hub name "
                         f"('org/name', found in the local Hugging Face cache), or leave model out (None) for "
                         f"the embedded model")
    path = Path(model).expanduser()
    if not path.is_dir() and isinstance(model, str) and looks_like_repo_id(model):
        path = find_snapshot(model)
    if not path.is_dir():
        raise ValueError(f"model={str(model)!r}: no such local directory (minivllm loads local Hugging Face "
                         f"checkpoint directories, or 'org/name' from the local Hugging Face cache; nothing is "
                         f"downloaded)")
    if not (path / "config.json").is_file():
        raise ValueError(f"model={str(model)!r}: the directory has no config.json")
    return path


def _read_json(file: Path) -> object:
    """The parsed JSON of `file`; any problem is a ValueError that names the file."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{file}: not valid JSON ({e})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{file}: cannot be read ({e})") from None


def load_model_config(path: Path) -> ModelConfig:
    file = path / "config.json"
    raw = _read_json(file)
    if not isinstance(raw, dict):
        raise ValueError(f"{file}: must hold a JSON object ({{\"architectures\": [...], ...}}), "
                         f"got {type(raw).__name__}")
    check_config_fields(file, raw)
    archs = raw.get("architectures") or ["<none>"]
    if archs[0] not in MODEL_REGISTRY:
        raise ValueError(f"unsupported architecture {archs[0]!r} in config.json; supported: {sorted(MODEL_REGISTRY)}")
    try:
        return ModelConfig.from_dict(raw)
    except KeyError as e:
        raise ValueError(f"config.json of {str(path)!r} lacks the field {e}") from None


def _check_inside(file: Path, path: Path, what: str) -> Path:
    """`file`, refused unless it resolves inside the model directory, or for a Hub-cache snapshot its whole
    `models--*` folder (its files are symlinks into ../../blobs/): an index or a symlink is data from the
    checkpoint, and '../../x' or an absolute path must not make the loader read elsewhere."""
    root = (hub_model_root(path) or path).resolve()
    if not file.resolve().is_relative_to(root):
        raise ValueError(f"{what} {file.name!r} points outside the model directory {str(path)!r} (it resolves "
                         f"to {str(file.resolve())!r}, not inside {str(root)!r}); refused")
    return file


def _weights_file(path: Path, name: object, index: Path) -> Path:
    """A shard named by the index: a .safetensors file inside the model directory."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{index}: 'weight_map' values must be file names, got {name!r}")
    if not name.endswith(".safetensors"):
        raise ValueError(f"{index}: shard {name!r} is not a .safetensors file; minivllm loads safetensors "
                         f"only, because unpickling a checkpoint (.bin/.pt) can execute arbitrary code")
    return _check_inside(path / name, path, f"{index}: shard")


def safetensors_files(path: Path) -> list[Path]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        raw = _read_json(index)
        weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index}: must be a JSON object with a non-empty 'weight_map' "
                             f"{{tensor name: shard file}}, got {str(raw)[:80]!r}")
        files = sorted({_weights_file(path, n, index) for n in weight_map.values()})
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            raise ValueError(f"model={str(path)!r}: shards listed in the index are missing: {missing}")
    else:
        files = [_check_inside(f, path, "weights file") for f in sorted(path.glob("*.safetensors"))]
    dirs = [str(f) for f in files if f.is_dir()]
    if dirs:
        raise ValueError(f"{dirs[0]}: is a directory, not a safetensors file")
    if files:
        return files
    pickles = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
    if pickles:
        raise ValueError(f"model={str(path)!r} has only pickle weights ({', '.join(pickles)}); minivllm loads "
                         f"safetensors only, because unpickling a checkpoint can execute arbitrary code. Convert "
                         f"it once with transformers: model.save_pretrained(dir, safe_serialization=True)")
    raise ValueError(f"model={str(path)!r} has no *.safetensors weights")


def _load_file(file: Path, model: nn.Module, params: dict, packed: dict, tied: bool, loaded: set[str],
               finite: list, device: torch.device, dtype: torch.dtype) -> None:
    """Copy every tensor of one safetensors file into its parameter (or shard of a packed parameter)."""
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
                raise ValueError(f"{file}: checkpoint tensor {name!r} matches no parameter of "
                                 f"{type(model).__name__}")
            param = params[target]
            shape = tuple(f.get_slice(name).get_shape())
            if len(shape) != param.dim():  # checked before any loader indexes the shape (a 0-d tensor)
                raise ValueError(f"{file}: tensor {name!r} has {len(shape)} dimension(s), shape {shape}; the "
                                 f"model expects a {param.dim()}-d tensor for {target!r}")
            stored = f.get_slice(name).get_dtype()  # safetensors' name: F32, BF16, I8, U8, BOOL, ...
            if param.is_floating_point() and not stored.startswith(("F", "BF")):
                raise ValueError(f"{file}: tensor {name!r} is stored as {stored}, the model needs floating-point "
                                 f"weights for {target!r}; casting integers to floats would change the model "
                                 f"silently (a quantized checkpoint says so in config.json's quantization_config, "
                                 f"and minivllm runs unquantized checkpoints only)")
            tensor = f.get_tensor(name).to(device=device, dtype=dtype)
            if tensor.is_floating_point():
                finite.append((name, torch.isfinite(tensor).all()))
            loader = getattr(param, "weight_loader", None)
            try:
                if loader is None:
                    if param.shape != tensor.shape:
                        raise ValueError(f"it has shape {tuple(tensor.shape)}, the model expects "
                                         f"{tuple(param.shape)}")
                    param.data.copy_(tensor)
                else:
                    loader(param, tensor, shard)
            except ValueError as e:  # the layer knows the shapes, this loop knows the tensor and the file
                raise ValueError(f"{file}: tensor {name!r}: {e}") from None
            loaded.add(f"{target}:{shard}")


def load_weights(model: nn.Module, path: Path, device: torch.device, dtype: torch.dtype) -> None:
    params = dict(model.named_parameters(remove_duplicate=False))
    packed = model.packed_modules
    tied = model.config.tie_word_embeddings
    loaded: set[str] = set()
    files = safetensors_files(path)
    finite: list[tuple[str, torch.Tensor]] = []  # checked in one sync at the end
    quiet = len(files) < 2 or not progress_bars_enabled()
    with tqdm(total=len(files), desc="Loading safetensors shards", disable=quiet) as bar:
        for file in files:
            try:
                _load_file(file, model, params, packed, tied, loaded, finite, device, dtype)
            except (SafetensorError, OSError) as e:
                raise ValueError(f"{file}: not a readable safetensors file ({type(e).__name__}: {e}); is it "
                                 f"truncated or corrupted? Write it again (save_pretrained)") from None
            bar.update(1)
    if finite:
        flags = torch.stack([ok for _, ok in finite]).tolist()
        bad = [name for (name, _), ok in zip(finite, flags) if not ok]
        if bad:
            logger.warning("Checkpoint %s has NaN or inf values in %d tensor(s): %s%s; outputs will be garbage",
                           path, len(bad), ", ".join(bad[:5]), " ..." if len(bad) > 5 else "")
    expected = {f"{pname}:{sid}" for pname, p in params.items() if not (tied and pname == "lm_head.weight")
                for sid in getattr(p, "shard_ids", [None])}
    missing = sorted(expected - loaded)
    if missing:
        raise ValueError(f"checkpoint {str(path)!r} is missing weights: {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''}")


def build_model(cfg: ModelConfig, device: torch.device, dtype: torch.dtype, max_positions: int) -> nn.Module:
    """The model with uninitialized weights of `dtype` on `device`, and its RoPE table.

    Built on the meta device first (no memory), then each parameter is allocated in `dtype` directly. No
    process-wide default (torch.set_default_dtype) is touched, so two engines built at once in two threads
    each get their own dtype; a `torch.device` context is local to its thread."""
    with torch.device("meta"):
        model = MODEL_REGISTRY[cfg.architecture](cfg)
    real: dict[int, nn.Parameter] = {}  # by the meta Parameter's id: a tied lm_head stays the embedding's
    for module in model.modules():
        for name, meta in module._parameters.items():
            if meta is None:
                continue
            if id(meta) not in real:
                p = nn.Parameter(torch.empty(meta.shape, dtype=dtype, device=device), requires_grad=False)
                p.__dict__.update(meta.__dict__)  # weight_loader, shard_ids
                real[id(meta)] = p
            module._parameters[name] = real[id(meta)]
    attach_rope_tables(model, max_positions, device)
    return model


def load_model(path: Path, cfg: ModelConfig, device: torch.device, dtype: torch.dtype,
               max_positions: int, quantization: str | None = None) -> nn.Module:
    """max_positions: how many positions the RoPE table covers (the engine passes max_model_len rounded up
    to whole KV blocks)."""
    model = build_model(cfg, device, dtype, max_positions)
    load_weights(model, path, device, dtype)
    if quantization is not None:  # vLLM: process_weights_after_loading
        from minivllm.quantization import quantize_model

        quantize_model(model, quantization, device)
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


# Files that define a tokenizer. A checkpoint written by model.save_pretrained alone has none of them, and
# AutoTokenizer would then build an empty one from config.json's model type (Qwen: a vocabulary of 1) or ask
# for sentencepiece (Llama).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")


class NoTokenizer:
    """Stands in for the tokenizer with skip_tokenizer_init (vLLM's flag): token ids in, token ids out,
    empty text. The EOS id then comes from config.json / generation_config.json."""

    eos_token_id = None

    def __init__(self, path: Path, reason: str) -> None:
        self.path, self.reason = path, reason

    def encode(self, text: str) -> list[int]:
        raise ValueError(f"text prompts need a tokenizer, and this engine has none ({self.reason}); pass token "
                         f"ids instead: {{'prompt_token_ids': [...]}}, or put the tokenizer files "
                         f"({', '.join(TOKENIZER_FILES[:2])}, ...) next to the weights")

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str:
        return ""


def load_tokenizer(path: Path, skip_tokenizer_init: bool = False):
    """FastTokenizer when tokenizer.json alone defines the tokenizer, else transformers' AutoTokenizer;
    NoTokenizer with skip_tokenizer_init, or (with one warning) when the checkpoint has no tokenizer files."""
    if skip_tokenizer_init:
        return NoTokenizer(path, "skip_tokenizer_init=True / --skip-tokenizer-init")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        logger.warning("%s has no tokenizer files (%s): running as with skip_tokenizer_init=True (token ids in "
                       "and out, empty text)", path, ", ".join(TOKENIZER_FILES))
        return NoTokenizer(path, f"{str(path)!r} has no tokenizer files, so the engine started with "
                                 f"skip_tokenizer_init=True / --skip-tokenizer-init")
    config_file = path / "tokenizer_config.json"
    config = _read_json(config_file) if config_file.is_file() else {}  # bad JSON: a ValueError naming the file
    if not isinstance(config, dict):
        raise ValueError(f"{config_file}: must hold a JSON object, got {type(config).__name__}")
    simple = (path / "tokenizer.json").is_file() and not config.get("clean_up_tokenization_spaces") \
        and not any(k in config for k in _NEEDS_TRANSFORMERS)
    fast_error = None
    if simple:
        try:
            return FastTokenizer(path, config)
        except Exception as e:  # noqa: BLE001 - fall back to transformers, which may know better
            logger.warning("tokenizers could not load %s (%s); using transformers' AutoTokenizer", path, e)
            fast_error = e
    return load_hf_tokenizer(path, fast_error)


def load_hf_tokenizer(path: Path, fast_error: Exception | None = None):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - report any tokenizer problem the same way
        # Name the file at fault: transformers' own message says what broke (a JSON error, a line) but not where.
        if fast_error is not None:
            raise ValueError(f"{path / 'tokenizer.json'}: not a tokenizer file the tokenizers library can read "
                             f"({fast_error}); is it truncated or corrupted?") from e
        for name in ("tokenizer.json", "special_tokens_map.json", "added_tokens.json", "vocab.json"):
            if (path / name).is_file():
                _read_json(path / name)  # a ValueError naming the file
        files = [name for name in TOKENIZER_FILES + ("merges.txt",) if (path / name).is_file()]
        raise ValueError(f"model={str(path)!r}: could not load its tokenizer ({', '.join(files)}) with "
                         f"AutoTokenizer: {e}") from e


def load_generation_eos(path: Path) -> list[int]:
    """generation_config.json's eos_token_id (an int or a list of them; [] without the file or the field):
    ids that end generation as the model's EOS does, as vLLM applies them to every request."""
    file = path / "generation_config.json"
    if not file.is_file():
        return []
    raw = _read_json(file)
    eos = raw.get("eos_token_id") if isinstance(raw, dict) else None
    ids = [eos] if isinstance(eos, int) else eos if isinstance(eos, list) else [] if eos is None else None
    if ids is None or any(type(t) is not int or t < 0 for t in ids):
        raise ValueError(f"{file}: eos_token_id must be a token id or a list of token ids, got {eos!r}")
    return ids
