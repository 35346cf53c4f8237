"""The editing loop's options (LLaDA2.x self-correction, docs/algorithm.md, 'Family variants', docs/editing.md): their
knobs and cross-field checks. The loop itself lives in s2d2/decoding/editing.py; every LLaDA2 preset turns it on, every
other preset leaves loop="block".
"""
from __future__ import annotations

from typing import Any

from .knob import Knob

LOOPS = ("block", "editing", "pipeline")  # editing: LLaDA2.x with self-correction; pipeline: D2F (policies/pipeline.py)
MAX_POST_STEPS = 64
# the block loop's forward-saving options, which assume that a decoded token is final (the editing loop's are not)
BLOCK_LOOP_ONLY = ("kv_reuse", "fused_commit", "adaptive_block")

KNOBS = (
    Knob("loop", "Block loop", "choice", choices=LOOPS, whatif=False,
         help="editing: the LLaDA2.x loop (edits decoded tokens, EOS early stop, no commit after the last block); "
              "pipeline: D2F (several blocks in flight, a block starts before the previous one is finished)"),
    Knob("editing_threshold", "Edit threshold τ_edit (0 = editing off)", "float", 0.0, 1.0, 0.01, optional=True,
         whatif=False, short="τ_edit",
         help="replace a decoded token when the draft there differs with p > τ_edit (editing loop only)"),
    Knob("max_post_steps", "Editing steps after the last mask", "int", 0, MAX_POST_STEPS, 1, ui=(0, 8),
         whatif=False, help="mask-free steps per block that may still edit (0 in the LLaDA2.1 eval scripts)"),
)


def check(cfg: Any) -> None:
    """One ValueError naming a field when an editing option is set outside the editing loop, or the editing loop
    is combined with something it does not define."""
    if cfg.loop != "editing":
        if cfg.editing_threshold is not None:
            raise ValueError("editing_threshold: editing needs loop='editing' (the LLaDA2.x loop)")
        if cfg.max_post_steps:
            raise ValueError("max_post_steps: post-mask editing steps need loop='editing'")
        return
    if cfg.method == "ar":
        raise ValueError("loop: 'editing' decodes blocks by diffusion; use method 'diffusion' or 's2d2'")
    if cfg.sub_block_length is not None:
        raise ValueError("sub_block_length: the editing loop (LLaDA2.x) has no sub-blocks; leave it unset")
    if cfg.ratio_threshold is not None or cfg.always_check_high_conf:
        raise ValueError("ratio_threshold / always_check_high_conf: these extras are not defined for the "
                         "editing loop; leave them off")
    for name in BLOCK_LOOP_ONLY:
        if getattr(cfg, name):
            raise ValueError(f"{name}: not available with loop='editing'. KV reuse, fused commits and adaptive "
                             "blocks assume a decoded token is final, but an edit may rewrite any decoded token "
                             "until its block ends, so the LLaDA2.x loop drafts each block whole and commits it "
                             "once; turn it off")
