"""HFModel forwards (invariant 1, no-store forwards) and checkpoint loading (registry, fake family checkpoints)."""
from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from pathlib import Path

import pytest
import torch
from tests.support.tiny_models import MASK_ID, STOP_IDS, tiny_qwen2_model, tiny_qwen3, tiny_qwen3_model, tiny_qwen3_moe_model, tiny_tokenizer

from s2d2.models import registry
from s2d2.models.loading import ModelLoadError, from_transformers, load_model
from s2d2.models.masks import block_causal_mask, verify_2l_mask

PROMPT = torch.tensor([11, 22, 33, 44, 55, 66, 77, 88])  # two full blocks of 4
DRAFT = torch.tensor([101, 102, 103, 104])  # x-tilde for the block at positions 8..11
TOLS = [("sdpa", 1e-10), ("eager", 1e-6)]  # eager's fp32 softmax leaves ~1e-7


def prefilled(hf, prefill: str):
    """A cache holding PROMPT, stored causally (cache_ver) or block-causally (block 4)."""
    cache = hf.new_cache()
    attention = "causal" if prefill == "causal" else block_causal_mask(len(PROMPT), 4)
    hf.forward(cache, PROMPT, torch.arange(len(PROMPT)), attention, keep=len(PROMPT))
    return cache


def verify_2l(hf, cache) -> torch.Tensor:
    """Second-half rows of the 2L verify over DRAFT: q for block positions 0..L-1."""
    n, c = len(DRAFT), cache.get_seq_length()
    ids = torch.cat([DRAFT, torch.full((n,), MASK_ID)])
    positions = torch.arange(c, c + n).repeat(2)  # duplicated absolute positions
    return hf.forward(cache, ids, positions, verify_2l_mask(c, n), keep=0, last=n)


def sequential_b1(hf, cache) -> torch.Tensor:
    """Row i: commit DRAFT[:i] causally on the cache, query one MASK at position i, then undo the commit."""
    c, rows = cache.get_seq_length(), []
    for i in range(len(DRAFT)):
        if i:
            hf.forward(cache, DRAFT[:i], torch.arange(c, c + i), "causal", keep=i)
        rows.append(hf.forward(cache, torch.tensor([MASK_ID]), torch.tensor([c + i]), "causal", keep=0)[0])
        if i:
            cache.crop(-i)
        assert cache.get_seq_length() == c
    return torch.stack(rows)


def ar_from_scratch(hf) -> torch.Tensor:
    """Row i: one causal forward over PROMPT + DRAFT[:i] + MASK on an empty cache."""
    rows = []
    for i in range(len(DRAFT)):
        ids = torch.cat([PROMPT, DRAFT[:i], torch.tensor([MASK_ID])])
        rows.append(hf.forward(hf.new_cache(), ids, torch.arange(len(ids)), "causal", keep=0)[-1])
    return torch.stack(rows)


# --------------------------------------------------------------------------------------------------------
# Invariant 1 and the forward primitive


@pytest.mark.parametrize("attn, tol", TOLS)
@pytest.mark.parametrize("prefill", ["causal", "block"])
def test_2l_equals_sequential_b1_on_same_cache(attn: str, tol: float, prefill: str) -> None:
    hf = tiny_qwen3(attn=attn)
    cache = prefilled(hf, prefill)
    q = verify_2l(hf, cache)
    assert cache.get_seq_length() == len(PROMPT)  # no-store
    assert (q - sequential_b1(hf, cache)).abs().max().item() <= tol


@pytest.mark.parametrize("attn, tol", TOLS)
def test_2l_equals_ar_from_scratch_only_with_causal_cache(attn: str, tol: float) -> None:
    hf = tiny_qwen3(attn=attn)
    ar = ar_from_scratch(hf)
    assert (verify_2l(hf, prefilled(hf, "causal")) - ar).abs().max().item() <= tol
    # A block-causal cache is a different context: the 2L is AR on *that* cache, not AR from scratch.
    assert (verify_2l(hf, prefilled(hf, "block")) - ar).abs().max().item() > 1e-4


def test_sdpa_and_eager_agree() -> None:
    a, b = tiny_qwen3(attn="sdpa"), tiny_qwen3(attn="eager")
    assert (verify_2l(a, prefilled(a, "block")) - verify_2l(b, prefilled(b, "block"))).abs().max().item() <= 1e-6


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_no_store_forwards_keep_cache_length(attn: str) -> None:
    hf = tiny_qwen3(attn=attn)
    cache = prefilled(hf, "block")
    keys_before = cache.layers[0].keys.clone()
    pos = torch.arange(8, 12)
    for attention in ("full", "causal", block_causal_mask(4, 4, start=8, cache_len=8)):
        logits = hf.forward(cache, DRAFT, pos, attention, keep=0)
        assert logits.shape == (4, 300) and logits.dtype == torch.float32
        assert cache.get_seq_length() == 8
    assert torch.equal(cache.layers[0].keys, keys_before)
    assert hf.forward(cache, DRAFT, pos, "full", keep=0, last=1).shape == (1, 300)
    hf.forward(cache, DRAFT, pos, "full", keep=4)
    assert cache.get_seq_length() == 12


def test_full_string_equals_full_mask_and_shape_checked() -> None:
    hf = tiny_qwen3()
    cache = prefilled(hf, "block")
    pos = torch.arange(8, 12)
    a = hf.forward(cache, DRAFT, pos, "full", keep=0)
    b = hf.forward(cache, DRAFT, pos, torch.ones(4, 12, dtype=torch.bool), keep=0)
    assert (a - b).abs().max().item() <= 1e-12
    with pytest.raises(ValueError, match="shape"):
        hf.forward(cache, DRAFT, pos, torch.ones(4, 4, dtype=torch.bool), keep=0)
    hf.attn_implementation = "flash_attention_2"  # cannot read explicit masks: refused, not misread
    with pytest.raises(ValueError, match="sdpa"):
        hf.forward(cache, DRAFT, pos, verify_2l_mask(8, 2), keep=0)
    assert cache.get_seq_length() == 8


# --------------------------------------------------------------------------------------------------------
# from_transformers and the registry


def test_from_transformers_spec() -> None:
    hf = tiny_qwen3(block_size=8)
    spec = hf.spec
    assert (spec.alignment, spec.mask_id, spec.stop_ids, spec.vocab_size, spec.max_positions, spec.default_block) == (
        "aligned", MASK_ID, list(STOP_IDS), 300, 512, 8
    )
    assert spec.verifier == "2l" and hf.dtype == torch.float64 and not spec.use_chat_template


def test_from_transformers_validates() -> None:
    model = tiny_qwen2_model()
    with pytest.raises(ModelLoadError, match="mask_token_id"):
        from_transformers(model, mask_token_id=300, stop_token_ids=[1])
    with pytest.raises(ValueError, match="logits"):  # ModelLoadError is a ValueError
        from_transformers(model, mask_token_id=MASK_ID, stop_token_ids=[1], logits="left")
    with pytest.raises(ModelLoadError, match="stop_token_ids"):
        from_transformers(model, mask_token_id=MASK_ID, stop_token_ids=[1000])
    hf = from_transformers(model, tiny_tokenizer(), mask_token_id=MASK_ID, stop_token_ids=[297], logits="shifted")
    assert hf.spec.verifier == "causal" and hf.tokenizer is not None


def test_registry_entries_sane() -> None:
    names = registry.known_models()
    assert "tiny" in names and len(names) == len(set(names))
    for name in names:
        e = registry.lookup(name)
        assert e is not None and e.name == name
        assert e.model_class in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen2ForCausalLM", "Glm4MoeForCausalLM",
                                 "LlamaForCausalLM")
        if e.path is not None:  # bundled: facts come from config.json
            continue
        assert (e.adapter or e.repo) == name and e.alignment in ("aligned", "shifted") and e.size_gb > 0
        assert e.mask_id is not None and e.stop_ids and e.block_size and e.use_chat_template
    sdar = registry.lookup("jetlm/sdar-1.7b-chat")  # case-insensitive
    assert sdar and (sdar.block_size, sdar.mask_id, sdar.stop_ids, sdar.alignment) == (4, 151669, (151645, 151643), "aligned")
    for size in ("1.7B", "4B", "8B"):
        for b in (8, 16, 32, 64):
            assert registry.lookup(f"JetLM/SDAR-{size}-Chat-b{b}").block_size == b
    assert registry.lookup("JetLM/SDAR-30B-A3B-Chat").model_class == "Qwen3MoeForCausalLM"
    for size in ("1.5B", "7B"):
        e = registry.lookup(f"Efficient-Large-Model/Fast_dLLM_v2_{size}")
        assert (e.model_class, e.alignment, e.block_size, e.mask_id, e.stop_ids) == (
            "Qwen2ForCausalLM", "shifted", 32, 151665, (151645,)
        )
    assert registry.lookup("no-such-model") is None
    assert registry.lookup("tiny").path == registry.ASSETS / "tiny"


# --------------------------------------------------------------------------------------------------------
# Loading fake family checkpoints


def write_checkpoint(folder: Path, model, config_updates: dict, tokenizer: bool = True, eos=(297, 298)) -> Path:
    """save_pretrained, then rewrite config.json with the real family's fields."""
    model.save_pretrained(folder)
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.pop("dtype", None)
    config.update(config_updates)
    path.write_text(json.dumps(config))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": list(eos)}))
    if tokenizer:
        tiny_tokenizer().save_pretrained(folder)
    return folder


SDAR_FIELDS = dict(
    model_type="sdar", architectures=["SDARForCausalLM"], block_size=4, mask_token_id=MASK_ID,
    torch_dtype="bfloat16", attn_implementation="flex_attention", use_cache=False,
    auto_map={"AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM"},
)


def logits_of(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids[None]).logits[0]


def test_load_sdar_fake(tmp_path: Path) -> None:
    original = tiny_qwen3_model()
    folder = write_checkpoint(tmp_path / "sdar", original, SDAR_FIELDS)
    hf = load_model(folder, device="cpu", dtype=torch.float64, attn_implementation="eager")
    assert hf.dtype == torch.float64 and hf.attn_implementation == "eager"  # overrides beat the config
    assert type(hf.model).__name__ == "Qwen3ForCausalLM"
    spec = hf.spec
    assert (spec.alignment, spec.mask_id, spec.default_block, spec.vocab_size, spec.max_positions) == (
        "aligned", MASK_ID, 4, 300, 512
    )
    assert spec.stop_ids == [297, 298] and hf.tokenizer.mask_token == "<|MASK|>"
    ids = torch.tensor([1, 2, 3, MASK_ID])
    assert (logits_of(hf.model, ids) - logits_of(original, ids)).abs().max().item() <= 1e-6  # eager vs SDPA
    same_backend = load_model(folder, dtype=torch.float64)
    assert torch.equal(logits_of(same_backend.model, ids), logits_of(original, ids))  # exact weights
    # Defaults on CPU: float32 and SDPA, whatever config.json says (bfloat16, flex_attention).
    default = load_model(str(folder))
    assert default.dtype == torch.float32 and default.attn_implementation == "sdpa"
    assert default.device.type == "cpu"
    assert load_model(folder, dtype="float64").dtype == torch.float64


def test_load_sdar_block_variant_and_config_facts(tmp_path: Path) -> None:
    fields = dict(SDAR_FIELDS, block_size=32, stop_token_ids=[297])
    hf = load_model(write_checkpoint(tmp_path / "b32", tiny_qwen3_model(), fields), dtype=torch.float64)
    assert hf.spec.default_block == 32 and hf.spec.stop_ids == [297]


def test_load_fast_dllm_fake(tmp_path: Path) -> None:
    original = tiny_qwen2_model()
    fields = dict(
        model_type="Fast_dLLM_Qwen", architectures=["Fast_dLLM_QwenForCausalLM"], bd_size=32,
        torch_dtype="bfloat16",
    )
    hf = load_model(write_checkpoint(tmp_path / "fdllm", original, fields), dtype=torch.float64)
    assert type(hf.model).__name__ == "Qwen2ForCausalLM"
    assert (hf.spec.alignment, hf.spec.default_block, hf.spec.mask_id, hf.spec.verifier) == (
        "shifted", 32, MASK_ID, "causal"
    )  # mask id from the tokenizer: this config has none
    ids = torch.tensor([1, 2, 3, MASK_ID])
    assert torch.equal(logits_of(hf.model, ids), logits_of(original, ids))


def test_load_sdar_moe_fake_applies_model_type_fix(tmp_path: Path) -> None:
    from transformers import Qwen3MoeForCausalLM

    original = tiny_qwen3_moe_model()
    fields = dict(SDAR_FIELDS, model_type="sdar_moe", architectures=["SDARMoeForCausalLM"])
    folder = write_checkpoint(tmp_path / "moe", original, fields)
    # The symptom without the fix: packed experts are missing (left random).
    _, info = Qwen3MoeForCausalLM.from_pretrained(folder, dtype=torch.float32, output_loading_info=True)
    assert any("experts" in k for k in info["missing_keys"])
    hf = load_model(folder, dtype=torch.float32)
    assert type(hf.model).__name__ == "Qwen3MoeForCausalLM" and hf.spec.extra["unexpected_keys"] == []
    ids = torch.tensor([1, 2, 3, 4, 5, MASK_ID])
    assert torch.equal(logits_of(hf.model, ids), logits_of(original, ids))


def test_wrong_architecture_is_refused(tmp_path: Path) -> None:
    # Qwen2 weights under a Qwen3 config: q_norm/k_norm would stay random.
    folder = write_checkpoint(tmp_path / "wrong", tiny_qwen2_model(), dict(SDAR_FIELDS, head_dim=16))
    with pytest.raises(ModelLoadError, match="missing"):
        load_model(folder)


def test_pickle_only_folder_is_refused(tmp_path: Path) -> None:
    folder = write_checkpoint(tmp_path / "bin", tiny_qwen3_model(), SDAR_FIELDS)
    for f in folder.glob("*.safetensors"):
        f.unlink()
    torch.save(tiny_qwen3_model().state_dict(), folder / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="safetensors only"):
        load_model(folder)


def test_mask_sources_must_agree(tmp_path: Path) -> None:
    folder = write_checkpoint(tmp_path / "dis", tiny_qwen3_model(), dict(SDAR_FIELDS, mask_token_id=5))
    with pytest.raises(ModelLoadError, match="disagree"):
        load_model(folder)


def test_no_mask_source_is_refused(tmp_path: Path) -> None:
    fields = {k: v for k, v in SDAR_FIELDS.items() if k != "mask_token_id"}
    folder = write_checkpoint(tmp_path / "nomask", tiny_qwen3_model(), fields, tokenizer=False)
    with pytest.raises(ModelLoadError, match="mask"):
        load_model(folder)


def test_bad_paths_and_names(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no checkpoint folder"):
        load_model(tmp_path / "missing")
    with pytest.raises(ModelLoadError, match="config.json"):
        load_model(tmp_path)
    (tmp_path / "weights.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="is a file"):
        load_model(tmp_path / "weights.safetensors")
    with pytest.raises(ModelLoadError, match="unknown model"):
        load_model("not-a-model")


@pytest.mark.parametrize("name", ["someone/not-a-real-model", "JetLM/SDAR-1.7B-Chat"])
def test_hub_ids_fail_fast_offline(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))  # an empty cache
    # fail fast, whatever the machine's speed: the calling thread neither sleeps (a retry loop) nor connects
    waits, sleep, connect, caller = [], time.sleep, socket.socket.connect, threading.current_thread()

    def sleeping(seconds):
        if threading.current_thread() is caller:
            waits.append(("sleep", seconds))
        sleep(seconds)

    def connecting(sock, address):
        if threading.current_thread() is caller:
            waits.append(("connect", address))
        return connect(sock, address)

    monkeypatch.setattr(time, "sleep", sleeping)
    monkeypatch.setattr(socket.socket, "connect", connecting)
    with pytest.raises(ModelLoadError) as err:
        load_model(name)
    assert waits == [], waits
    message = str(err.value)
    assert "\n" not in message and "unreachable" in message and "local checkpoint folder" in message


def test_bundled_names_resolve_through_the_same_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What the trained assets/tiny and assets/tiny-shift look like: plain Qwen3 with the facts in config.json.
    facts = dict(mask_token_id=MASK_ID, block_size=4, stop_token_ids=[297])
    write_checkpoint(tmp_path / "tiny", tiny_qwen3_model(), dict(facts, logits_alignment="aligned"))
    monkeypatch.setitem(registry._ENTRIES, "tiny", dataclasses.replace(registry.lookup("tiny"), path=tmp_path / "tiny"))
    monkeypatch.setattr(registry, "ASSETS", tmp_path)
    assert "tiny-shift" not in registry.known_models() and registry.lookup("tiny-shift") is None
    write_checkpoint(tmp_path / "tiny-shift", tiny_qwen3_model(seed=1), dict(facts, logits_alignment="shifted"))
    assert "tiny-shift" in registry.known_models()
    tiny, shift = load_model("tiny"), load_model("tiny-shift")
    assert (tiny.spec.name, tiny.spec.alignment, tiny.spec.stop_ids) == ("tiny", "aligned", [297])
    assert (shift.spec.name, shift.spec.alignment, shift.spec.default_block) == ("tiny-shift", "shifted", 4)


def test_bundled_tiny_missing_or_loadable() -> None:
    folder = registry.ASSETS / "tiny"
    ready = (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))
    if not ready:
        with pytest.raises(ModelLoadError, match="tiny"):
            load_model("tiny")
        return
    hf = load_model("tiny")
    assert hf.spec.alignment in ("aligned", "shifted") and 0 <= hf.spec.mask_id < hf.spec.vocab_size
