"""The bundled LLaDA2-architecture tiny model: a small Glm4Moe (LLaDA2-MoE) upcycled from the in-place Qwen3 tiny.

Upcycling (our own model, so reusing its weights is legitimate) keeps the start close to a model that already
works in the position-aligned block-diffusion convention:

* embeddings, norms, the tied head and every attention layer are copied (q/k/v/o and the per-head q/k norms map
  one to one);
* RoPE: the shipped model keeps `partial_rotary_factor` 1.0 (the Qwen3 attention as trained; the official
  LLaDA2 models use 0.5, which the loader supports). With `rope_fraction=0.5`, LLaDA2 rotates only the first
  half of each head: Qwen3 paired dims (i, i+hd/2) at frequency θ^(-2i/hd), half RoPE pairs (j, j+hd/4) at
  θ^(-4j/hd), which is the old pair i = 2j, so q/k rows (and q/k-norm weights) are permuted per head to put the
  even-numbered old pairs in the rotary half with their exact frequencies and the odd-numbered ones in the
  pass-through half (q·k is invariant under a common permutation). Measured: that start agrees with the Qwen3
  argmax on 72 % of positions and needs far more re-training than our CPU budget, hence 1.0;
* layer 0 stays dense (`first_k_dense_replace` 1) with the Qwen3 MLP; in layers 1.. the shared expert (width
  `n_shared_experts · moe_intermediate_size` = the dense width) is the Qwen3 MLP, so the MoE model starts as the
  dense one, and each routed expert is a `moe_intermediate_size` slice of that MLP (fine-grained sparse
  upcycling) with a small output projection (`routed_init_scale`) plus a little noise, so the routed
  contributions start small and distinct. The router starts random (std 0.02), its score bias at 0.

Nothing here imports transformers: models are built through `s2d2.models.builders`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

N_EXPERTS = 8
TOP_K = 2
N_GROUP = 4
TOPK_GROUP = 2
ROUTED_SCALING = 2.5  # LLaDA2-mini's value
BLOCK = 32  # LLaDA2's default block length


def config_from_qwen3(q: dict[str, Any], n_experts: int = N_EXPERTS, rope_fraction: float = 1.0) -> dict[str, Any]:
    """Glm4MoeConfig keyword arguments for a LLaDA2-style MoE with the Qwen3 model's sizes."""
    ffn = int(q["intermediate_size"])
    n_shared = 6 if ffn % 6 == 0 else 1
    return dict(
        vocab_size=q["vocab_size"], hidden_size=q["hidden_size"], intermediate_size=ffn,
        moe_intermediate_size=ffn // n_shared, num_hidden_layers=q["num_hidden_layers"],
        num_attention_heads=q["num_attention_heads"], num_key_value_heads=q["num_key_value_heads"],
        head_dim=q["head_dim"], hidden_act="silu", rms_norm_eps=q.get("rms_norm_eps", 1e-6),
        max_position_embeddings=q["max_position_embeddings"], tie_word_embeddings=True,
        n_routed_experts=n_experts, num_experts_per_tok=TOP_K, n_group=N_GROUP, topk_group=TOPK_GROUP,
        n_shared_experts=n_shared, first_k_dense_replace=1, routed_scaling_factor=ROUTED_SCALING,
        norm_topk_prob=True, use_qk_norm=True, attention_bias=False, num_mtp_layers=0,
        rope_parameters={"rope_type": "default", "rope_theta": float(_rope_theta(q)),
                         "partial_rotary_factor": float(rope_fraction)},
        pad_token_id=q.get("pad_token_id"), bos_token_id=q.get("bos_token_id"), eos_token_id=q.get("eos_token_id"),
    )


def _rope_theta(q: dict[str, Any]) -> float:
    rope = q.get("rope_parameters") or {}
    return float(rope.get("rope_theta", q.get("rope_theta", 10000.0)))


def half_rope_permutation(head_dim: int) -> torch.Tensor:
    """perm[new] = old: even old rotate-half pairs -> the rotary half (same frequency), odd ones -> pass-through."""
    half = head_dim // 2
    even, odd = torch.arange(0, half, 2), torch.arange(1, half, 2)
    return torch.cat([even, even + half, odd, odd + half])


def _permute_heads(w: torch.Tensor, perm: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Permute the per-head rows of a [heads·hd, ...] projection (or a [hd] norm weight)."""
    if w.dim() == 1:
        return w[perm]
    heads = w.shape[0] // head_dim
    return w.view(heads, head_dim, -1)[:, perm].reshape(w.shape)


def upcycle(qwen_state: dict[str, torch.Tensor], qwen_cfg: dict[str, Any], glm_cfg: dict[str, Any],
            routed_init_scale: float = 0.02, seed: int = 0) -> dict[str, torch.Tensor]:
    """A Glm4Moe state dict from a Qwen3 one (see the module docstring). The router weights are left out
    (they keep the model's own random init)."""
    g = torch.Generator().manual_seed(seed)
    hd = int(qwen_cfg["head_dim"])
    fraction = float(glm_cfg["rope_parameters"].get("partial_rotary_factor", 1.0))
    if fraction not in (0.5, 1.0):
        raise ValueError(f"rope_fraction: 0.5 or 1.0 can be upcycled from full RoPE, got {fraction}")
    perm = half_rope_permutation(hd) if fraction == 0.5 else torch.arange(hd)
    inter = int(glm_cfg["moe_intermediate_size"])
    n_slices = int(glm_cfg["intermediate_size"]) // inter
    out: dict[str, torch.Tensor] = {}
    for name, w in qwen_state.items():
        w = w.float()
        if name == "lm_head.weight" and qwen_cfg.get("tie_word_embeddings", True):
            continue
        if not name.startswith("model.layers."):
            out[name] = w.clone()
            continue
        layer = int(name.split(".")[2])
        rest = name.split(".", 3)[3]
        prefix = f"model.layers.{layer}."
        if rest in ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.q_norm.weight",
                    "self_attn.k_norm.weight"):
            out[name] = _permute_heads(w, perm, hd).clone()
        elif rest.startswith("mlp."):
            proj = rest.split(".")[1]  # gate_proj | up_proj | down_proj
            if layer < int(glm_cfg["first_k_dense_replace"]):
                out[name] = w.clone()
                continue
            out[f"{prefix}mlp.shared_experts.{proj}.weight"] = w.clone()
        else:
            out[name] = w.clone()
    for layer in range(int(glm_cfg["first_k_dense_replace"]), int(glm_cfg["num_hidden_layers"])):
        src = f"model.layers.{layer}.mlp."
        gate, up, down = (qwen_state[f"{src}{p}.weight"].float() for p in ("gate_proj", "up_proj", "down_proj"))
        gu, dn = [], []
        for e in range(int(glm_cfg["n_routed_experts"])):
            s = slice((e % n_slices) * inter, (e % n_slices + 1) * inter)
            noise = lambda t: t + 0.02 * t.std() * torch.randn(t.shape, generator=g)  # noqa: E731
            gu.append(torch.cat([noise(gate[s]), noise(up[s])], dim=0))
            dn.append(routed_init_scale * noise(down[:, s]))
        out[f"{src}experts.gate_up_proj"] = torch.stack(gu)
        out[f"{src}experts.down_proj"] = torch.stack(dn)
    return out


def build_from_qwen3(folder: str | Path, seed: int = 0, rope_fraction: float = 1.0) -> Any:
    """The upcycled Glm4MoeForCausalLM (float32) from a Qwen3 checkpoint folder."""
    from safetensors.torch import load_file

    from ..models.builders import glm4moe

    folder = Path(folder)
    qcfg = json.loads((folder / "config.json").read_text())
    gcfg = config_from_qwen3(qcfg, rope_fraction=rope_fraction)
    model = glm4moe(gcfg, seed=seed)
    state = upcycle(load_file(str(folder / "model.safetensors")), qcfg, gcfg, seed=seed)
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed = {n for n in missing if n.endswith("mlp.gate.weight") or n.endswith("e_score_correction_bias")
               or n == "lm_head.weight"}
    if set(missing) - allowed or unexpected:
        raise RuntimeError(f"upcycling mismatch: missing {sorted(set(missing) - allowed)[:5]}, "
                           f"unexpected {sorted(unexpected)[:5]}")
    model.tie_weights()
    return model


class ExpertBalancer:
    """Auxiliary-loss-free load balancing (as Ling-2.0 / LLaDA2 routers): after each optimizer step every
    expert's routing bias moves by `rate` towards equal load (down if it was chosen more than average)."""

    def __init__(self, model: Any, rate: float) -> None:
        self.rate = rate
        self.gates = [m for n, m in model.named_modules() if n.endswith("mlp.gate")]
        self.counts: dict[int, torch.Tensor] = {}
        for i, gate in enumerate(self.gates):
            gate.register_forward_hook(self._hook(i))

    def _hook(self, i: int):
        def hook(module, args, output):
            if module.training:
                idx = output[2].detach().reshape(-1)
                c = torch.bincount(idx, minlength=module.num_experts).float()
                self.counts[i] = self.counts.get(i, 0) + c
        return hook

    @torch.no_grad()
    def step(self) -> float:
        """Apply the bias update; returns the max/mean load ratio of the busiest layer (1.0 = balanced)."""
        worst = 1.0
        for i, gate in enumerate(self.gates):
            c = self.counts.get(i)
            if c is None or c.sum() == 0:
                continue
            gate.e_score_correction_bias -= self.rate * torch.sign(c - c.mean())
            worst = max(worst, float(c.max() / c.mean()))
        self.counts.clear()
        return worst
