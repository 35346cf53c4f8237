"""Known checkpoints as data (docs/model-families.md, 'Known checkpoints'). No transformers import here: this is plain
facts.

Keys are Hub ids (matched case-insensitively) plus the bundled names "tiny", "tiny-llada2" and "tiny-shift". Bundled
entries leave the block-diffusion facts to the checkpoint's config.json (`mask_token_id`, `block_size`,
`logits_alignment`, `stop_token_ids`), so they hold None there.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# <repo>/assets: s2d2/models/registry.py -> parents[2] is the repository root.
ASSETS = Path(__file__).resolve().parents[2] / "assets"

SDAR_MASK = 151669  # <|MASK|>
SDAR_STOPS = (151645, 151643)  # <|im_end|>, <|endoftext|>
FAST_DLLM_MASK = 151665  # |<MASK>|
FAST_DLLM_STOPS = (151645,)
LLADA2_MASK = 156895  # <|mask|>; mirrors s2d2.models.llada2 (this module stays free of torch imports)
LLADA2_STOPS = (156892,)  # <|endoftext|>
LLADA_MASK = 126336  # <|mdm_mask|>; mirrors s2d2.models.llada
LLADA_STOPS = (126081, 126348)  # <|endoftext|>, <|eot_id|>
DREAM_MASK = 151666  # <|mask|>; mirrors s2d2.models.dream
DREAM_STOPS = (151643, 151644, 151645)  # <|endoftext|>, <|im_start|>, <|im_end|> (the D2F demo's stop list)


@dataclass(frozen=True)
class ModelEntry:
    """One known checkpoint: where it lives and the facts the decoder needs."""

    name: str
    model_class: str  # concrete native class: Qwen3ForCausalLM | Qwen3MoeForCausalLM | Qwen2ForCausalLM |
    # Glm4MoeForCausalLM (LLaDA2, official layout mapped at load time)
    repo: str | None = None  # Hub id; None for bundled models
    path: Path | None = None  # local folder for bundled models
    mask_id: int | None = None  # None: read from the checkpoint
    stop_ids: tuple[int, ...] | None = None
    alignment: str | None = None  # "aligned" | "shifted"
    block_size: int | None = None
    use_chat_template: bool | None = None
    size_gb: float = 0.0  # approximate weight size on disk (bf16)
    family: str = ""  # "sdar" | "sdar_moe" | "fast_dllm" | "llada2" | "d2f_llada" | "d2f_dream" | "tiny"
    adapter: str | None = None  # a peft LoRA adapter (Hub id) merged into `repo` at load (the D2F checkpoints)


def _sdar(size: str, gb: float, block: int | None) -> ModelEntry:
    repo = f"JetLM/SDAR-{size}-Chat" + (f"-b{block}" if block else "")
    return ModelEntry(
        name=repo, repo=repo, model_class="Qwen3ForCausalLM", mask_id=SDAR_MASK, stop_ids=SDAR_STOPS,
        alignment="aligned", block_size=block or 4, use_chat_template=True, size_gb=gb, family="sdar",
    )


def _fast_dllm(size: str, gb: float) -> ModelEntry:
    repo = f"Efficient-Large-Model/Fast_dLLM_v2_{size}"
    return ModelEntry(
        name=repo, repo=repo, model_class="Qwen2ForCausalLM", mask_id=FAST_DLLM_MASK, stop_ids=FAST_DLLM_STOPS,
        alignment="shifted", block_size=32, use_chat_template=True, size_gb=gb, family="fast_dllm",
    )


def _llada2(repo: str, gb: float) -> ModelEntry:
    return ModelEntry(
        name=repo, repo=repo, model_class="Glm4MoeForCausalLM", mask_id=LLADA2_MASK, stop_ids=LLADA2_STOPS,
        alignment="aligned", block_size=32, use_chat_template=True, size_gb=gb, family="llada2",
    )


def _d2f(adapter: str, base: str, model_class: str, mask: int, stops: tuple[int, ...], alignment: str,
         gb: float, family: str) -> ModelEntry:
    """A D2F checkpoint: the base model with D2F's LoRA adapter merged at load; decoded by the pipeline loop."""
    return ModelEntry(
        name=adapter, repo=base, adapter=adapter, model_class=model_class, mask_id=mask, stop_ids=stops,
        alignment=alignment, block_size=32, use_chat_template=True, size_gb=gb, family=family,
    )


def _build() -> dict[str, ModelEntry]:
    entries: list[ModelEntry] = []
    for size, gb in (("1.7B", 4.06), ("4B", 8.8), ("8B", 16.4)):
        # Block variants follow the Hub naming "<base>-bN"; not every size publishes every N.
        entries += [_sdar(size, gb, block) for block in (None, 8, 16, 32, 64)]
    entries.append(ModelEntry(
        name="JetLM/SDAR-30B-A3B-Chat", repo="JetLM/SDAR-30B-A3B-Chat", model_class="Qwen3MoeForCausalLM",
        mask_id=SDAR_MASK, stop_ids=SDAR_STOPS, alignment="aligned", block_size=4, use_chat_template=True,
        size_gb=61.0, family="sdar_moe",
    ))
    entries += [_fast_dllm("1.5B", 3.1), _fast_dllm("7B", 15.2)]
    # LLaDA2 mini: 16B-parameter MoE (~1.4B active), bf16 ~32 GB on disk.
    entries += [_llada2("inclusionAI/LLaDA2.1-mini", 32.5), _llada2("inclusionAI/LLaDA2.0-mini", 32.5)]
    # D2F (Discrete Diffusion Forcing): LLaDA-8B-Instruct (8.0B, bf16 ~16.0 GB) and Dream-v0-Base-7B (7.6B, bf16
    # ~15.2 GB) with D2F's LoRA adapters (rank 32 on the attention projections, a few hundred MB at most).
    entries += [
        _d2f("SJTU-Deng-Lab/D2F_LLaDA_Instruct_8B_Lora", "GSAI-ML/LLaDA-8B-Instruct", "LlamaForCausalLM", LLADA_MASK,
             LLADA_STOPS, "aligned", 16.1, "d2f_llada"),
        _d2f("SJTU-Deng-Lab/D2F_Dream_Base_7B_Lora", "Dream-org/Dream-v0-Base-7B", "Qwen2ForCausalLM", DREAM_MASK,
             DREAM_STOPS, "shifted", 15.3, "d2f_dream"),
    ]
    entries.append(ModelEntry(name="tiny", path=ASSETS / "tiny", model_class="Qwen3ForCausalLM", family="tiny"))
    entries.append(ModelEntry(name="tiny-llada2", path=ASSETS / "tiny-llada2", model_class="Glm4MoeForCausalLM",
                              family="llada2"))
    return {e.name.lower(): e for e in entries}


_ENTRIES = _build()


def _tiny_shift() -> ModelEntry | None:
    # Listed only once the folder exists (it is optional).
    path = ASSETS / "tiny-shift"
    if not path.is_dir():
        return None
    return ModelEntry(name="tiny-shift", path=path, model_class="Qwen3ForCausalLM", family="tiny")


def known_models() -> list[str]:
    """Registry names, Hub ids first, then the bundled models."""
    names = [e.name for e in _ENTRIES.values()]
    if _tiny_shift() is not None:
        names.append("tiny-shift")
    return names


def lookup(name: str) -> ModelEntry | None:
    """The entry for a registry name or Hub id (case-insensitive), or None if unknown."""
    key = name.strip().lower()
    if key == "tiny-shift":
        return _tiny_shift()
    return _ENTRIES.get(key)
