"""D2F's two model types load natively, no remote code (s2d2/models/llada.py, dream.py, adapters.py): official-layout
LLaDA (v1) onto LlamaForCausalLM, Dream onto Qwen2ForCausalLM, D2F LoRA adapters merged with peft.

The expected logits were computed by the reference's own modeling files (phymhan/S2D2 D2F/model_cache, transformers
4.46, float64) on exactly these checkpoints (fixtures/tiny_d2f.py, fingerprints checked) by
`python -m benchmarks.d2f_reference --record-logits`; this test needs neither the reference nor transformers 4.x.
Cases: full attention, D2F's block-causal mask (prompt bidirectional, blocks causal across), a forward over a
cache (the reference caches pre-RoPE keys, transformers post-RoPE ones), the verifier (LLaDA: 2L with duplicated
position ids; Dream: causal), and the base with its LoRA adapter (merged here, unmerged in the reference).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from transformers import DynamicCache

from fixtures import tiny_d2f as M
import s2d2
from tests.support.recorded_floats import tensors_close
from s2d2.models import ModelLoadError
from s2d2.models.llada import module_to_native, module_to_official, to_native, to_official
from s2d2.models.masks import segments_pattern, verify_2l_pattern, widen
from s2d2.models.registry import lookup

DATA = Path(__file__).parent.parent / "data" / "d2f_reference_logits.safetensors"


def recorded() -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(DATA), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("d2f")
    out = {}
    for fam, write in (("llada", M.write_llada), ("dream", M.write_dream)):
        out[fam] = (write(tmp / fam), M.write_lora(tmp / f"{fam}-lora", fam))
    return out


def run(model, ids, mask, positions=None, cache=None):
    kw = {} if positions is None else {"position_ids": positions[None]}
    with torch.no_grad():
        return model(input_ids=ids[None], attention_mask=mask[None, None], cache=cache, use_cache=cache is not None,
                     **kw).logits[0]


@pytest.mark.parametrize("fam", ["llada", "dream"])
def test_native_logits_equal_the_reference_modeling_code(folders, fam):
    expected, meta = recorded()
    folder, adapter = folders[fam]
    assert M.fingerprint(folder) == meta[f"{fam}/fingerprint"], "fixtures/tiny_d2f.py no longer writes the " \
        "checkpoint the reference logits were recorded on; re-record them (benchmarks/d2f_reference.py)"
    assert M.fingerprint(adapter) == meta[f"{fam}/adapter_fingerprint"]
    ids, P, B = torch.tensor(json.loads(meta["ids"])), int(meta["prompt"]), int(meta["block"])
    n, L = ids.shape[0], ids.shape[0] - P
    hf = s2d2.load_model(folder, device="cpu", dtype=torch.float64)
    assert type(hf.model).__name__ == ("LlamaForCausalLM" if fam == "llada" else "Qwen2ForCausalLM")
    assert hf.spec.alignment == ("aligned" if fam == "llada" else "shifted")
    m = hf.model
    got = {"full": run(m, ids, torch.ones(n, n, dtype=torch.bool)),
           "d2f": run(m, ids, segments_pattern((P,) + (B,) * (L // B)))}
    cache = DynamicCache(config=m.config)
    run(m, ids[:P], torch.ones(P, P, dtype=torch.bool), cache=cache)
    got["cached"] = run(m, ids[P:], widen(segments_pattern((B,) * (L // B)), P), torch.arange(P, n), cache)
    cache.crop(-L)
    if fam == "llada":  # 2L: [drafts | MASK copies] at duplicated positions
        seq = torch.cat([ids[P:], torch.full((L,), M.MASK_ID)])
        got["verify"] = run(m, seq, widen(verify_2l_pattern(L), P), torch.arange(P, n).repeat(2), cache)
    else:  # causal over the block, after the cache
        got["verify"] = run(m, ids[P:], widen(torch.ones(L, L, dtype=torch.bool).tril(), P), torch.arange(P, n),
                            cache)
    lora = s2d2.load_model(folder, device="cpu", dtype=torch.float64, adapter=adapter)
    assert lora.spec.extra["adapter_modules"] == 8 and lora.spec.extra["adapter_rank"] == 4
    got["lora_full"] = run(lora.model, ids, torch.ones(n, n, dtype=torch.bool))
    for case, logits in got.items():
        diff = (logits - expected[f"{fam}/{case}"]).abs().max().item()  # recorded: the shared float tolerance
        assert tensors_close(logits, expected[f"{fam}/{case}"]), f"{fam}/{case}: max |Δlogit| {diff:.3g}"
    assert (got["lora_full"] - got["full"]).abs().max() > 1.0  # the adapter was applied, not ignored


def test_llada_map_round_trip_and_module_names():
    sd = M.llama_model().state_dict()
    assert to_native(to_official(sd)) == {k: v for k, v in sd.items()} or all(
        torch.equal(to_native(to_official(sd))[k], sd[k]) for k in sd)
    assert module_to_native("model.transformer.blocks.3.attn_out") == "model.layers.3.self_attn.o_proj"
    assert module_to_native("model.transformer.blocks.0.ff_out") == "model.layers.0.mlp.down_proj"
    assert module_to_native("model.transformer.ff_out") == "lm_head"
    assert module_to_official("model.layers.1.mlp.gate_proj") == "model.transformer.blocks.1.ff_proj"
    with pytest.raises(KeyError):
        module_to_native("model.transformer.blocks.0.att_proj")


def _rewrite(folder: Path, **changes) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return folder


@pytest.mark.parametrize("field,value", [("block_type", "sequential"), ("activation_type", "gelu"),
                                         ("include_bias", True), ("input_emb_norm", True),
                                         ("scale_logits", True), ("alibi", True), ("attention_layer_norm", True)])
def test_llada_configs_the_port_cannot_represent_are_refused(tmp_path, field, value):
    folder = _rewrite(M.write_llada(tmp_path / "llada"), **{field: value})
    with pytest.raises(ModelLoadError, match=field):
        s2d2.load_model(folder, device="cpu")


def test_a_checkpoint_missing_a_weight_is_refused_not_left_random(tmp_path):
    """A weight the file lacks would stay random and decode garbage: the strict load names it (models/weights.py)."""
    from safetensors.torch import load_file, save_file

    folder = M.write_llada(tmp_path / "llada")
    weights = load_file(str(folder / "model.safetensors"))
    gone = next(k for k in sorted(weights) if k.endswith("ff_out.weight") and ".blocks.1." in k)
    del weights[gone]
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    expected = ("1 missing and 0 mismatched weights (e.g. model.layers.1.mlp.down_proj.weight) after mapping to "
                "Llama; they would be left random")
    with pytest.raises(ModelLoadError, match=re.escape(expected)):
        s2d2.load_model(folder, device="cpu")


def test_adapter_refusals(tmp_path):
    folder = M.write_llada(tmp_path / "llada")
    adapter = M.write_lora(tmp_path / "lora", "llada")
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    for change, words in (({"use_dora": True}, "use_dora"), ({"peft_type": "IA3"}, "LoRA"),
                          ({"modules_to_save": ["wte"]}, "modules_to_save")):
        (adapter / "adapter_config.json").write_text(json.dumps({**cfg, **change}))
        with pytest.raises(ModelLoadError, match=words):
            s2d2.load_model(folder, device="cpu", adapter=adapter)
    (adapter / "adapter_config.json").write_text(json.dumps(cfg))
    (adapter / "adapter_model.safetensors").rename(adapter / "adapter_model.bin")
    with pytest.raises(ModelLoadError, match="safetensors only"):
        s2d2.load_model(folder, device="cpu", adapter=adapter)
    dream_adapter = M.write_lora(tmp_path / "dream-lora", "dream")  # Dream's module names on a LLaDA base
    with pytest.raises(ModelLoadError, match="targets a module"):
        s2d2.load_model(folder, device="cpu", adapter=dream_adapter)


def test_an_adapter_folder_loads_onto_the_base_it_names(tmp_path):
    base = M.write_dream(tmp_path / "dream")
    adapter = M.write_lora(tmp_path / "lora", "dream")
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps({**cfg, "base_model_name_or_path": str(base)}))
    direct = s2d2.load_model(base, device="cpu", dtype=torch.float64, adapter=adapter)
    via = s2d2.load_model(adapter, device="cpu", dtype=torch.float64)
    ids = torch.arange(3, 15)
    mask = torch.ones(12, 12, dtype=torch.bool)
    assert torch.equal(run(direct.model, ids, mask), run(via.model, ids, mask))
    assert via.spec.extra["adapter"] == str(adapter.resolve())


def test_registry_knows_the_public_d2f_checkpoints():
    llada = lookup("SJTU-Deng-Lab/D2F_LLaDA_Instruct_8B_Lora")
    dream = lookup("sjtu-deng-lab/d2f_dream_base_7b_lora")
    assert (llada.repo, llada.adapter, llada.mask_id, llada.alignment) == (
        "GSAI-ML/LLaDA-8B-Instruct", "SJTU-Deng-Lab/D2F_LLaDA_Instruct_8B_Lora", 126336, "aligned")
    assert (dream.repo, dream.mask_id, dream.alignment, dream.block_size) == (
        "Dream-org/Dream-v0-Base-7B", 151666, "shifted", 32)
    assert llada.size_gb > 15 and dream.size_gb > 15


def test_loaded_facts_of_each_family(folders):
    llada = s2d2.load_model(folders["llada"][0], device="cpu")
    dream = s2d2.load_model(folders["dream"][0], device="cpu")
    assert (llada.spec.mask_id, llada.spec.stop_ids, llada.spec.default_block) == (M.MASK_ID, [M.EOS_ID], 32)
    assert (dream.spec.mask_id, dream.spec.alignment, dream.spec.extra["family"]) == (M.MASK_ID, "shifted", "dream")


def test_the_default_allow_list_offers_d2f_only_where_it_fits(monkeypatch):
    from components.serve import model_pool

    names = ("SJTU-Deng-Lab/D2F_LLaDA_Instruct_8B_Lora", "SJTU-Deng-Lab/D2F_Dream_Base_7B_Lora")
    for free, offered in ((12.0, False), (10_000.0, True)):  # the rule: every loaded model together must fit
        model_pool.default_models.cache_clear()
        monkeypatch.setattr(model_pool, "free_memory_gb", lambda: free)
        monkeypatch.setattr(model_pool, "fetchable", lambda *repos: True)  # as online (tests run offline)
        assert all((n in model_pool.default_models()) == offered for n in names)
    model_pool.default_models.cache_clear()
