"""Decoder options beyond the paper that save forwards: their knobs and cross-field checks (the decoding lives in
s2d2/decoding/kv.py and s2d2/decoding/decoder.py). Off in every paper preset.
"""
from __future__ import annotations

from typing import Any

from .knob import Knob

KNOBS = (
    Knob("kv_reuse", "Reuse the verifier's KV (beyond the paper)", "bool", whatif=False,
         help="keep the causal KV of the accepted prefix from the verify forward; later forwards query only the "
              "undecided rest (needs cache_ver and draft_ver)"),
    Knob("fused_commit", "Fuse the commit into the next draft (beyond the paper)", "bool", whatif=False,
         help="the next block's first draft forward also caches this block's uncached tail: no commit forward"),
    Knob("trim_verify", "Verifier queries only its span's rows (beyond the paper)", "bool", whatif=False,
         help="the 2L verifier's first half stops at the span's end and its second half holds the span only; "
              "the causal verifier stops at the span's last position (same q in exact arithmetic)"),
)


def check(cfg: Any) -> None:
    """One ValueError naming a field when an option is on without what it needs."""
    if cfg.kv_reuse and not (cfg.cache_ver and cfg.draft_ver):
        raise ValueError("kv_reuse: needs cache_ver=True and draft_ver=True (kept rows must be the causal KV the "
                         "commit would store, and the decoded prefix must be causal in drafts)")
    for name in ("kv_reuse", "fused_commit", "adaptive_block", "trim_verify"):
        if getattr(cfg, name) and cfg.method == "ar":
            raise ValueError(f"{name}: applies to block decoding (methods diffusion and s2d2), not method 'ar'")
    if cfg.adaptive_block:
        if not cfg.cache_ver:
            raise ValueError("adaptive_block: needs cache_ver=True (a block-causal cache of varying blocks is a "
                             "layout the model never saw)")
        if cfg.sub_block_length is not None:
            raise ValueError("sub_block_length: must be unset (None) with adaptive_block")
        if cfg.denoising_steps is not None:
            raise ValueError("denoising_steps: must be unset (None, S = B) with adaptive_block")
