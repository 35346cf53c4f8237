"""Golden decodes: traces recorded before the device-side step (issue 11) and compared since (discrete content
exactly, floats to the tolerance of tests/recorded_floats.py).

Recorded with the engine of main before that change (re-recorded once when main's trace schema gained the editing
loop's fields: every earlier trace was unchanged but for those fields), then checked against the new engine.

`python tests/support/golden_cases.py` records them into tests/data/golden_traces.json.gz. Only record again when a change
is *meant* to change traces, and say so in the commit: the file is what "same tokens, same NFE, same trace" means.

Each case is one (model, prompt, config, seed) decode with the full trace. Wall times and the creation stamp are
dropped (they differ every run); everything else must match: discrete content exactly, floats to the tolerance
of tests/recorded_floats.py (their last bits depend on the CPU's kernels; the recording machine had AVX-512).
"""
from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden_traces.json.gz"

PROMPTS = {"a": list(range(5, 15)), "b": [3, 1, 4, 1, 5, 9, 2, 6], "c": list(range(40, 72))}

_B8 = dict(block_length=8)
# (name, model, prompt, seed, config) — models: "aligned"/"shifted" are the sharpened tiny random models of
# test_decoder.py (float64), "bundled" is assets/tiny (float32, trained, with a tokenizer), "llada2" is
# assets/tiny-llada2 (the editing loop's bundled model).
CASES: list[tuple[str, str, str, int, dict[str, Any]]] = [
    ("diff-static-S3", "aligned", "a", 0, dict(method="diffusion", denoising_steps=3,
                                               remasking="low_confidence_static", **_B8)),
    ("diff-eb", "aligned", "b", 0, dict(method="diffusion", remasking="entropy_bounded", eb_gamma=0.5, **_B8)),
    ("diff-seq-sampled", "aligned", "a", 2, dict(method="diffusion", block_length=4, remasking="sequential",
                                                 temperature=1.0)),
    ("always", "aligned", "a", 0, dict(method="s2d2", policy="always", **_B8)),
    ("always-sampled-S2", "aligned", "b", 1, dict(method="s2d2", policy="always", denoising_steps=2, temperature=1.0,
                                                   acceptance="sampled", **_B8)),
    ("threshold", "aligned", "a", 0, dict(method="s2d2", policy="score_threshold", score_threshold=0.5,
                                          score_type="difference_static", penalty_coef=1.0, temperature=0.8, **_B8)),
    ("hysteresis", "aligned", "b", 0, dict(method="s2d2", policy="score_hysteresis", hysteresis_on=0.6,
                                           hysteresis_off=0.2, confidence_threshold=0.3, temperature=0.7, **_B8)),
    ("ucb", "aligned", "a", 3, dict(method="s2d2", policy="contextual_bandit_ucb", temperature=1.0, **_B8)),
    ("ucb-masks", "aligned", "c", 0, dict(method="s2d2", policy="contextual_bandit_ucb", ucb_entropy_scope="masks",
                                          estimator="soft_renyi_2_entropy", **_B8)),
    ("no-resample", "aligned", "a", 0, dict(method="s2d2", policy="always", allow_resample=False, temperature=1.0,
                                            **_B8)),
    ("no-resample-eb-S2", "aligned", "b", 0, dict(method="s2d2", policy="always", allow_resample=False, temperature=1.0,
                                                  denoising_steps=2, remasking="entropy_bounded", **_B8)),
    ("extras", "aligned", "a", 0, dict(method="s2d2", policy="always", ratio_threshold=0.3, always_check_high_conf=True,
                                       confidence_threshold=0.004, temperature=1.0, **_B8)),
    ("extras-skip", "aligned", "b", 1, dict(method="s2d2", policy="score_threshold", score_threshold=2.0,
                                            always_check_high_conf=True, confidence_threshold=0.004,
                                            remasking="low_confidence_static", denoising_steps=3, **_B8)),
    ("greedy-exact", "aligned", "a", 0, dict(method="s2d2", policy="always", acceptance="greedy_exact", cache_ver=True,
                                             draft_ver=True, **_B8)),
    ("topk-topp-margin", "aligned", "c", 0, dict(method="s2d2", policy="score_threshold", score_threshold=0.2,
                                                 estimator="hard_margin_threshold", temperature=1.5, top_k=50,
                                                 top_p=0.95, **_B8)),
    ("reuse-fused", "aligned", "a", 0, dict(method="s2d2", policy="always", kv_reuse=True, fused_commit=True,
                                            cache_ver=True, draft_ver=True, temperature=1.0, **_B8)),
    ("reuse-greedy-exact", "aligned", "c", 0, dict(method="s2d2", policy="always", kv_reuse=True,
                                                   acceptance="greedy_exact", cache_ver=True, draft_ver=True, **_B8)),
    ("adaptive", "aligned", "b", 0, dict(method="s2d2", policy="always", adaptive_block=True, adaptive_min_block=4,
                                         adaptive_max_block=16, cache_ver=True, draft_ver=True, **_B8)),
    ("ar", "aligned", "a", 0, dict(method="ar")),
    ("ar-reference-sampled", "aligned", "b", 0, dict(method="ar", ar_accounting="reference", temperature=1.0)),
    ("s-diff", "shifted", "a", 0, dict(method="diffusion", remasking="low_confidence_dynamic", **_B8)),
    ("s-always", "shifted", "b", 0, dict(method="s2d2", policy="always", temperature=1.0, **_B8)),
    ("s-hysteresis-sub", "shifted", "c", 0, dict(method="s2d2", policy="score_hysteresis", hysteresis_on=0.5,
                                                  hysteresis_off=-1.0, sub_block_length=4, confidence_threshold=0.01,
                                                  **_B8)),
    ("s-ucb-extras", "shifted", "a", 1, dict(method="s2d2", policy="contextual_bandit_ucb", ratio_threshold=0.3,
                                              always_check_high_conf=True, confidence_threshold=0.004,
                                              temperature=1.0, **_B8)),
    ("s-reuse-fused", "shifted", "b", 0, dict(method="s2d2", policy="always", kv_reuse=True, fused_commit=True,
                                              cache_ver=True, draft_ver=True, **_B8)),
    ("s-ar", "shifted", "a", 0, dict(method="ar", temperature=1.0)),
    ("tiny-sdar-a", "bundled", "q", 0, dict(preset="sdar-config-a")),
    ("tiny-sdar-b", "bundled", "q", 0, dict(preset="sdar-config-b")),
    ("tiny-sdar-b-sampled", "bundled", "q", 5, dict(preset="sdar-config-b", temperature=1.0, acceptance="sampled")),
    ("tiny-baseline", "bundled", "q", 0, dict(preset="dynamic-baseline")),
    ("tiny-sdar-b-all", "bundled", "q", 0, dict(preset="sdar-config-b+all")),
    ("tiny-ar", "bundled", "q", 0, dict(preset="ar")),
    ("edit-baseline", "aligned", "b", 0, dict(loop="editing", method="diffusion", confidence_threshold=0.7,
                                              editing_threshold=0.5, **_B8)),
    ("edit-s2d2-sampled", "aligned", "a", 1, dict(loop="editing", method="s2d2", policy="score_threshold",
                                                  score_threshold=0.0, score_type="difference_static",
                                                  penalty_coef=1.0, confidence_threshold=0.7, editing_threshold=0.5,
                                                  temperature=1.0, **_B8)),
    ("tiny-llada2-quality", "llada2", "q", 0, dict(preset="llada2-quality")),
    ("tiny-llada2-conservative", "llada2", "q", 0, dict(preset="llada2-conservative")),
]
GEN_LENGTH = {"aligned": 24, "shifted": 24, "bundled": 40, "llada2": 40}
VOLATILE = ("wall_s", "forward_wall_s", "created")


@lru_cache(maxsize=None)
def golden_model(name: str) -> Any:
    from tests.support.tiny_models import tiny_qwen2, tiny_qwen3

    if name in ("bundled", "llada2"):
        import s2d2

        return s2d2.load_model("tiny" if name == "bundled" else "tiny-llada2")
    model = tiny_qwen3(seed=0) if name == "aligned" else tiny_qwen2(seed=1)
    model.model.model.norm.weight.data *= 25.0  # test_decoder.sharpen: drafts and verifier often disagree
    return model


def bundled_available(model_name: str = "bundled") -> bool:
    folder = ROOT / "assets" / ("tiny" if model_name == "bundled" else "tiny-llada2")
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def prompt_for(model_name: str, key: str) -> Any:
    if model_name in ("bundled", "llada2"):
        from s2d2.tasks.arithmetic import heldout

        return heldout(1)[0].question
    return PROMPTS[key]


def config_for(model_name: str, settings: dict[str, Any]) -> Any:
    import s2d2

    settings = dict(settings)
    name = settings.pop("preset", None)
    gen = GEN_LENGTH[model_name]
    return s2d2.preset(name, gen_length=gen, **settings) if name else s2d2.DecodeConfig(gen_length=gen, **settings)


def run_case(case: tuple[str, str, str, int, dict[str, Any]], detailed: bool = True) -> Any:
    import s2d2

    _, model_name, prompt, seed, settings = case
    return s2d2.generate(golden_model(model_name), prompt_for(model_name, prompt), config_for(model_name, settings),
                         seed=seed, detailed=detailed)


def stable(data: Any) -> Any:
    """The trace as plain data without wall times and the creation stamp."""
    if isinstance(data, dict):
        return {k: stable(v) for k, v in data.items() if k not in VOLATILE}
    if isinstance(data, list):
        return [stable(v) for v in data]
    return data


def record() -> None:
    import torch

    torch.set_num_threads(1)
    out = {}
    for case in CASES:
        if case[1] in ("bundled", "llada2") and not bundled_available(case[1]):
            continue
        out[case[0]] = stable(run_case(case).trace.to_dict())
        print(case[0], len(out[case[0]]["steps"]), "steps")
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(GOLDEN, "wt", encoding="utf-8") as f:
        json.dump(out, f, sort_keys=True, allow_nan=False)
    print(f"wrote {len(out)} traces to {GOLDEN}")


def load_golden() -> dict[str, Any]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        return json.load(f)


if __name__ == "__main__":
    record()
