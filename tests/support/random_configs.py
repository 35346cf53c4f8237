"""Random decode cases for the differential batch tests: presets of a model's loops with random changes of the knobs
their validation allows (policies, estimators, acceptance, remasking, sampling and its random source, the options
beyond the paper, block sizes), prompts of random lengths and seeds, mixed configs in one batch. Every draw comes
from a seeded `random.Random`, so a case is the same on every run and machine.

The batch-vs-alone tests pick their cases here because hand-picked ones cover the combinations someone thought of;
these cover those nobody wrote down (tests/lib/test_batch_random_configs.py)."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, NamedTuple, Optional

import torch

import s2d2
from fixtures import tiny_d2f
from s2d2.config import ESTIMATORS, SCORE_TYPES
from tests.support.batch_cases import model64

BLOCK = ["ar", "dynamic-baseline", "sdar-config-a", "sdar-config-b", "fastdllm-config-a", "fastdllm-config-b",
         "fastdllm-config-c", "sdar-config-b+reuse", "sdar-config-b+fused", "sdar-config-b+adaptive",
         "sdar-config-b+all", "sdar-config-b+trim", "sdar-config-b+reuse+fused+trim", "lossless"]
EDITING = ["llada2-static", "llada2-dynamic", "llada2-dynamic-edit", "llada2-conservative", "llada2-quality"]
PIPELINE = ["d2f", "d2f-s2d2", "d2f-s2d2-dream"]
# the loops each test model runs: the editing loop needs a position-aligned model
# the token ids a prompt draws from, per test model
VOCAB = {"aligned": 100, "shifted": 100, "llada": 50, "dream": 50}
LOOPS = {"aligned": [BLOCK, EDITING, PIPELINE], "shifted": [BLOCK, PIPELINE], "llada": [PIPELINE, PIPELINE, BLOCK],
         "dream": [PIPELINE, PIPELINE, BLOCK]}


class Case(NamedTuple):
    cfgs: list[s2d2.DecodeConfig]
    prompts: list[list[int]]
    seeds: list[int]
    batch_size: int
    detailed: bool


def _changes(rng: random.Random, name: str) -> dict[str, Any]:
    """Random knob changes for preset `name` (each knob changed with its own probability)."""
    ch: dict[str, Any] = {}

    def maybe(p: float, knob: str, values: list[Any]) -> None:
        if rng.random() < p:
            ch[knob] = rng.choice(values)

    maybe(.4, "policy", ["mask_span_length", "score_threshold", "score_hysteresis", "contextual_bandit_ucb",
                         "always", "never"])
    maybe(.4, "estimator", list(ESTIMATORS))
    maybe(.3, "score_type", list(SCORE_TYPES))
    maybe(.4, "score_threshold", [-1.0, 0.0, 0.5, 1.0, 2.0])
    maybe(.3, "acceptance", ["paper", "sampled", "greedy_exact"])
    maybe(.3, "remasking", ["low_confidence_static", "low_confidence_dynamic", "sequential", "entropy_bounded"])
    maybe(.3, "confidence_threshold", [0.3, 0.5, 0.9])
    maybe(.3, "temperature", [0.0, 0.7, 1.0])
    maybe(.2, "top_k", [0, 5])
    maybe(.2, "top_p", [1.0, 0.9])
    maybe(.3, "rng", ["torch", "counter"])
    maybe(.2, "allow_resample", [True, False])
    maybe(.15, "ratio_threshold", [None, 0.5])
    maybe(.1, "always_check_high_conf", [True, False])
    maybe(.2, "min_span_length", [1, 2, 3])
    maybe(.2, "ar_accounting", ["fused", "reference"])
    maybe(.3, "block_length", [2, 4, 8])
    maybe(.15, "hysteresis_on", [0.0, 0.5])
    maybe(.15, "hysteresis_off", [-1.0, 0.2])
    if ch.get("acceptance") == "sampled" and not ch.get("temperature"):
        ch["temperature"] = 0.8  # (sampled acceptance needs a sampled draft)
    if ch.get("acceptance") == "greedy_exact":
        ch["temperature"] = 0.0
    if name in PIPELINE:
        ch.pop("remasking", None)  # (the pipeline's rule is D2F's own)
        ch["block_length"] = rng.choice([2, 4, 8])
        maybe(.3, "block_add_threshold", [0.1, 0.25, 0.5])
        maybe(.3, "decoded_token_threshold", [0.5, 0.8])
        maybe(.2, "pipeline_fallback", ["d2f", "reference"])
        maybe(.2, "verify_confidence_threshold", [None, 0.3])
        maybe(.2, "draft_confidence_threshold", [None, 0.2])
    if "adaptive" in name or "all" in name or name.startswith("fastdllm"):
        ch.pop("block_length", None)  # (adaptive bounds and sub-blocks are set for the preset's own length)
    if name in EDITING:
        maybe(.3, "editing_threshold", [None, 0.5, 0.9])
        maybe(.3, "max_post_steps", [0, 2])
    return ch


def random_config(rng: random.Random, names: list[str]) -> Optional[s2d2.DecodeConfig]:
    """A preset of `names` with random changes and a short gen_length; None when its validation refuses it."""
    name = rng.choice(names)
    changes: dict[str, Any] = {"gen_length": rng.choice([8, 12, 16, 24]), **_changes(rng, name)}
    if name in PIPELINE:  # (the pipeline decodes gen_length // block_length blocks: at least two here)
        changes["gen_length"] = max(changes["gen_length"], 2 * changes["block_length"])
    try:
        return s2d2.preset(name, **changes).validate()
    except ValueError:
        return None


def random_case(rng: random.Random, family: str, vocab: int, tries: int = 50) -> Case:
    """2-6 sequences of one model: one to three configs of one loop's presets, each shared by several sequences
    (the batch runs a config's rules once over all its rows), prompts of 1-14 ids, seeds, fewer or as many slots
    as sequences, a detailed or a lean trace. Draws again while a config is refused (at most `tries` times)."""
    for _ in range(tries):
        names = rng.choice(LOOPS[family])
        n = rng.randint(2, 6)
        distinct = [random_config(rng, names) for _ in range(rng.randint(1, 3))]
        if all(c is not None for c in distinct):
            cfgs = [rng.choice(distinct) for _ in range(n)]
            prompts = [[rng.randrange(3, vocab) for _ in range(rng.randint(1, 14))] for _ in range(n)]
            return Case(cfgs, prompts, [rng.randrange(100) for _ in range(n)],  # type: ignore[arg-type]
                        rng.randint(1, n), rng.random() < .6)
    raise AssertionError(f"no valid case for {family} in {tries} draws")


def case_models(folder: Path) -> dict[str, Any]:
    """The four test models in float64: the sharpened tiny random ones (position-aligned and right-shifted) and the
    D2F fixtures (LLaDA and Dream, written under `folder`)."""
    return {"aligned": model64("aligned"), "shifted": model64("shifted"),
            "llada": s2d2.load_model(tiny_d2f.write_llada(folder / "llada"), device="cpu", dtype=torch.float64),
            "dream": s2d2.load_model(tiny_d2f.write_dream(folder / "dream"), device="cpu", dtype=torch.float64)}
