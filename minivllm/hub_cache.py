"""Find a Hugging Face Hub model ("org/name") in the local Hub cache, offline.

What `huggingface_hub.snapshot_download` leaves on disk is

    <cache>/models--org--name/refs/main            the revision (a commit hash) that "main" pointed to
    <cache>/models--org--name/snapshots/<rev>/...  the files, each a symlink into ../../blobs/
    <cache>/models--org--name/blobs/<sha>          the file contents

vLLM run offline (HF_HUB_OFFLINE=1) resolves a model name to such a snapshot directory; so does minivllm,
always, because it never downloads anything. The cache is where huggingface_hub puts it: $HF_HUB_CACHE,
else $HF_HOME/hub, else ~/.cache/huggingface/hub.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# "org/name" as the Hub spells repository ids: one slash, letters, digits, '-', '_', '.'.
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def looks_like_repo_id(model: str) -> bool:
    return bool(_REPO_ID.match(model)) and ".." not in model


def find_snapshot(repo_id: str) -> Path:
    """The snapshot directory of `repo_id`: the revision refs/main names, else the only (or the most
    recently written) snapshot. A ValueError that says where it looked when there is none."""
    if os.environ.get("HF_HUB_CACHE"):
        cache = Path(os.environ["HF_HUB_CACHE"]).expanduser()
    else:
        cache = Path(os.environ.get("HF_HOME") or "~/.cache/huggingface").expanduser() / "hub"
    repo = cache / ("models--" + repo_id.replace("/", "--"))  # huggingface_hub's folder name
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    rev = ref.read_text(encoding="utf-8").strip() if ref.is_file() else ""
    if rev and (snapshots / rev).is_dir():
        return snapshots / rev
    candidates = [d for d in snapshots.iterdir() if d.is_dir()] if snapshots.is_dir() else []
    if candidates:
        return max(candidates, key=lambda d: d.stat().st_mtime)
    raise ValueError(f"model={repo_id!r}: not a local directory, and not in the local Hugging Face cache "
                     f"(looked in {repo}; set HF_HUB_CACHE or HF_HOME to use another cache). "
                     f"minivllm never downloads: fetch it first, e.g. `huggingface-cli download {repo_id}`, "
                     f"or pass the checkpoint directory")


def hub_model_root(path: Path) -> Path | None:
    """The `models--*` folder a snapshot directory belongs to, or None when `path` is no Hub snapshot.
    Files of a snapshot are symlinks into that folder's blobs/, so that folder bounds what they may point to."""
    path = path.absolute()
    if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
        return path.parent.parent
    return None
