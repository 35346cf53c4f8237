"""Official-layout LLaDA2 folders load onto native Glm4MoeForCausalLM (s2d2/models/llada2.py): the test writes the
official layout itself (fused query_key_value, word_embeddings, dense, query/key_layernorm, expert_bias,
per-expert MLPs) from a random tiny Glm4Moe, and the loaded model's logits equal the original's."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

import s2d2
from s2d2.models import ModelLoadError
from s2d2.models.llada2 import to_native, to_official
from s2d2.models.registry import lookup

H, KV, HD, LAYERS, E, INTER = 4, 2, 16, 3, 8, 24


def native_model(seed=0, shared=1, top_k=2, dense=False):
    """The function an official checkpoint computes, as a Glm4Moe (the official router renormalises the top-k
    weights only when top_k > 1; no shared expert = a zero-width one)."""
    from transformers import Glm4MoeConfig, Glm4MoeForCausalLM

    config = Glm4MoeConfig(
        vocab_size=300, hidden_size=64, intermediate_size=96, moe_intermediate_size=INTER,
        num_hidden_layers=LAYERS, num_attention_heads=H, num_key_value_heads=KV, head_dim=HD, n_routed_experts=E,
        num_experts_per_tok=top_k, n_group=4, topk_group=2, n_shared_experts=shared,
        first_k_dense_replace=LAYERS if dense else 1,
        routed_scaling_factor=2.5, use_qk_norm=True, tie_word_embeddings=False, norm_topk_prob=top_k > 1,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        num_mtp_layers=0, max_position_embeddings=256, attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    model = Glm4MoeForCausalLM(config).eval()
    with torch.no_grad():  # non-trivial norms and routing bias, so a misplaced tensor shows in the logits
        for name, t in model.named_parameters():
            if name.endswith("norm.weight"):
                t.add_(0.3 * torch.randn_like(t))
        for layer in model.model.layers[model.config.first_k_dense_replace:]:
            layer.mlp.gate.e_score_correction_bias.copy_(0.2 * torch.randn(E))
    return model


def official_layout(model, shared=1, top_k=2, dense=False):
    """Hand-written inverse map (independent of s2d2.models.llada2) + an official config.json."""
    sd = model.state_dict()
    out = {"model.word_embeddings.weight": sd["model.embed_tokens.weight"],
           "model.norm.weight": sd["model.norm.weight"], "lm_head.weight": sd["lm_head.weight"]}
    for i in range(LAYERS):
        n, o = f"model.layers.{i}.", f"model.layers.{i}."
        out[o + "attention.query_key_value.weight"] = torch.cat(
            [sd[n + "self_attn.q_proj.weight"], sd[n + "self_attn.k_proj.weight"], sd[n + "self_attn.v_proj.weight"]])
        out[o + "attention.dense.weight"] = sd[n + "self_attn.o_proj.weight"]
        out[o + "attention.query_layernorm.weight"] = sd[n + "self_attn.q_norm.weight"]
        out[o + "attention.key_layernorm.weight"] = sd[n + "self_attn.k_norm.weight"]
        for norm in ("input_layernorm", "post_attention_layernorm"):
            out[o + f"{norm}.weight"] = sd[n + f"{norm}.weight"]
        if i < model.config.first_k_dense_replace:
            for p in ("gate_proj", "up_proj", "down_proj"):
                out[o + f"mlp.{p}.weight"] = sd[n + f"mlp.{p}.weight"]
            continue
        out[o + "mlp.gate.weight"] = sd[n + "mlp.gate.weight"]
        out[o + "mlp.gate.expert_bias"] = sd[n + "mlp.gate.e_score_correction_bias"]
        for e in range(E):
            gate_up = sd[n + "mlp.experts.gate_up_proj"][e]
            out[o + f"mlp.experts.{e}.gate_proj.weight"] = gate_up[:INTER]
            out[o + f"mlp.experts.{e}.up_proj.weight"] = gate_up[INTER:]
            out[o + f"mlp.experts.{e}.down_proj.weight"] = sd[n + "mlp.experts.down_proj"][e]
        if shared:
            for p in ("gate_proj", "up_proj", "down_proj"):
                out[o + f"mlp.shared_experts.{p}.weight"] = sd[n + f"mlp.shared_experts.{p}.weight"]
    config = {
        "architectures": ["LLaDA2MoeModelLM"], "model_type": "llada2_moe", "vocab_size": 300, "hidden_size": 64,
        "intermediate_size": 96, "moe_intermediate_size": INTER, "num_hidden_layers": LAYERS,
        "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": HD, "hidden_act": "silu",
        "rms_norm_eps": 1e-5, "max_position_embeddings": 256, "rope_theta": 10000.0, "rope_scaling": None,
        "partial_rotary_factor": 0.5, "num_experts": None if dense else E,
        "num_shared_experts": shared or None,
        "num_experts_per_tok": top_k, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
        "first_k_dense_replace": 1, "use_qk_norm": True, "use_qkv_bias": False, "use_bias": False,
        "tie_word_embeddings": False, "score_function": "sigmoid", "moe_router_enable_expert_bias": True,
        "torch_dtype": "bfloat16", "auto_map": {"AutoModelForCausalLM": "modeling_llada2_moe.LLaDA2MoeModelLM"},
    }
    return {k: v.contiguous().clone() for k, v in out.items()}, config


def write(folder, weights, config, **changes):
    folder.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def logits(model, ids, causal):
    mask = torch.ones(len(ids), len(ids), dtype=torch.bool)
    mask = torch.tril(mask) if causal else mask
    with torch.no_grad():
        return model(input_ids=ids[None], attention_mask=mask[None, None]).logits[0]


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")  # the zero-width shared expert
@pytest.mark.parametrize("shared,top_k,dense", [(1, 2, False), (None, 2, False), (1, 1, False), (1, 2, True)])
def test_official_folder_loads_with_identical_logits(tmp_path, shared, top_k, dense):
    ref = native_model(shared=shared or 0, top_k=top_k, dense=dense)
    weights, config = official_layout(ref, shared, top_k, dense)
    folder = write(tmp_path / "llada2", weights, config, mask_token_id=299, stop_token_ids=[298])
    model = s2d2.load_model(folder, device="cpu", dtype=torch.float32)
    assert type(model.model).__name__ == "Glm4MoeForCausalLM"
    assert (model.spec.mask_id, model.spec.stop_ids, model.spec.default_block) == (299, [298], 32)
    assert model.spec.extra["family"] == "llada2" and model.spec.extra["unexpected_keys"] == []
    ids = torch.randint(0, 299, (24,), generator=torch.Generator().manual_seed(1))
    for causal in (False, True):
        assert torch.equal(logits(model.model, ids, causal), logits(ref, ids, causal))
    # the decoder runs on it: the LLaDA2 loop with edits, verification and a prefill
    res = s2d2.generate(model, list(range(10, 19)), s2d2.preset("llada2-quality", block_length=4, gen_length=8,
                                                                editing_threshold=0.3))
    assert res.trace.replay() == res.token_ids


def test_map_round_trip():
    sd = native_model().state_dict()
    back = to_native(to_official(sd), {"num_attention_heads": H, "num_key_value_heads": KV, "head_dim": HD,
                                       "hidden_size": 64})
    assert sorted(back) == sorted(sd) and all(torch.equal(back[k], sd[k]) for k in sd)


def test_refusals_and_family_defaults(tmp_path):
    weights, config = official_layout(native_model())
    with pytest.raises(ModelLoadError, match="use_bias"):
        s2d2.load_model(write(tmp_path / "bias", weights, config, use_bias=True), device="cpu")
    with pytest.raises(ModelLoadError, match="rope_scaling"):
        s2d2.load_model(write(tmp_path / "yarn", weights, config, rope_scaling={"type": "yarn"}), device="cpu")
    broken = dict(weights)
    broken.pop("model.layers.1.mlp.experts.3.up_proj.weight")
    with pytest.raises(ModelLoadError, match="experts"):
        s2d2.load_model(write(tmp_path / "broken", broken, config, mask_token_id=299), device="cpu")
    # no tokenizer and no mask_token_id: the family default 156895 is used (here outside this tiny vocabulary)
    with pytest.raises(ModelLoadError, match="156895"):
        s2d2.load_model(write(tmp_path / "nomask", weights, config), device="cpu")


def test_registry_knows_llada2():
    for repo in ("inclusionAI/LLaDA2.1-mini", "inclusionai/llada2.0-mini"):
        entry = lookup(repo)
        assert entry is not None and entry.family == "llada2"
        assert (entry.mask_id, entry.stop_ids, entry.block_size, entry.alignment) == (156895, (156892,), 32,
                                                                                      "aligned")
