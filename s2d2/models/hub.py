"""Fetching a checkpoint snapshot from the Hugging Face Hub (config, tokenizer and safetensors only), failing
fast and readably when offline."""
from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

_HUB_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken"]  # never *.bin


class ModelLoadError(ValueError):
    """A checkpoint could not be resolved or loaded; the message says why and what to do."""


def _offline() -> bool:
    # Read the environment at call time too: huggingface_hub reads it only once, at import.
    truthy = {"1", "true", "yes", "on"}
    env = any(os.environ.get(k, "").strip().lower() in truthy for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    from huggingface_hub import constants

    return env or bool(constants.HF_HUB_OFFLINE)


def _hub_reachable(timeout: float = 3.0) -> bool:
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def can_fetch(repo: str) -> bool:
    """Whether `fetch_from_hub(repo)` can succeed without trying it: always online (a download may still fail, and
    says why then); offline (HF_HUB_OFFLINE), only when the local cache holds the repo's config. Nothing is
    downloaded and no network is touched."""
    if not _offline():
        return True
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo, "config.json"), str)
    except Exception:  # a malformed id or an unreadable cache: not fetchable
        return False


def fetch_from_hub(repo: str) -> Path:
    """A local snapshot of `repo` (config, tokenizer, safetensors only): the cache first, then the Hub."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo, allow_patterns=_HUB_PATTERNS, local_files_only=True))
    except Exception:  # not cached; try the network below
        pass
    why = "offline mode: HF_HUB_OFFLINE is set" if _offline() else None
    if why is None and not _hub_reachable():
        why = "no network connection"
    if why:
        raise ModelLoadError(
            f"{repo!r} is not in the local Hugging Face cache and the Hub is unreachable ({why}); "
            "pass a local checkpoint folder instead"
        )
    try:
        return Path(snapshot_download(repo, allow_patterns=_HUB_PATTERNS))
    except Exception as e:
        raise ModelLoadError(f"could not download {repo!r} from the Hub: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
