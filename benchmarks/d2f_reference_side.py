"""The reference half of benchmarks/d2f_reference.py: runs phymhan/S2D2's D2F code (its LLaDA and Dream modeling
files and `generation_utils.generate_block_single` / `generate_block_speculative`) on the tiny official-layout
checkpoints the other half wrote, and writes what it saw to a file.

It runs in its own process because the reference modeling files need transformers 4.x (Dream's indexes a
DynamicCache, which 5.x removed): PYTHONPATH puts a transformers 4.46 + peft 0.13 site and the reference's D2F
folder first. It imports nothing from s2d2. Usage (the other half does this): python d2f_reference_side.py JOB OUT.

Three things are patched *around* the reference, never inside it:
* torch 2.13's CPU scaled_dot_product_attention misreads a float32 additive mask given float64 queries (errors of
  order 1 for some shapes; bf16 and float32 queries are fine), and LLaDA's modeling code always casts its mask to
  float32: in this process such a mask is cast to the query's dtype first (a torch defect, not the reference's);
* the mask token's logit is set to -inf in every forward (docs/algorithm.md, 'Sampling a draft',
  'Where we deviate from the reference code': the reference can draft the mask token itself; on a random model it does,
  and its loop then never ends);
* with `wire_dream_mask`, the mask the reference passes as `attention_bias=` reaches DreamModel as
  `attention_mask=` (DreamModel.forward has no `attention_bias` argument: it lands in **loss_kwargs, so the
  reference's Dream forwards run with no mask at all). Runs without it show what the reference computes as is.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

_sdpa = F.scaled_dot_product_attention


def _sdpa_same_dtype(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None, **kw: Any) -> Any:
    if attn_mask is not None and attn_mask.is_floating_point() and attn_mask.dtype != q.dtype:
        attn_mask = attn_mask.to(q.dtype)
    return _sdpa(q, k, v, attn_mask=attn_mask, **kw)


F.scaled_dot_product_attention = _sdpa_same_dtype


def load(family: str, folder: str, adapter: str | None) -> Any:
    if family == "llada":
        from model_cache.llada.configuration_llada import LLaDAConfig
        from model_cache.llada.modeling_llada import LLaDAModelLM

        model = LLaDAModelLM.from_pretrained(folder, config=LLaDAConfig.from_pretrained(folder),
                                             torch_dtype=torch.float64)
    else:
        from model_cache.dream.configuration_dream import DreamConfig
        from model_cache.dream.model_dream import DreamModel

        model = DreamModel.from_pretrained(folder, config=DreamConfig.from_pretrained(folder),
                                           torch_dtype=torch.float64)
    model = model.eval()
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).eval()
    return model


class Recorded(torch.nn.Module):
    """Wraps a reference model: counts and describes every forward, optionally wires Dream's mask, and sets the
    mask token's logit to -inf (the two patches named in the module docstring)."""

    def __init__(self, model: Any, mask_id: int, wire_dream_mask: bool) -> None:
        super().__init__()
        self.inner, self.mask_id, self.wire = model, mask_id, wire_dream_mask
        self.calls: list[dict[str, Any]] = []
        self.config = getattr(model, "config", None)

    def forward(self, input_ids: torch.Tensor, **kw: Any) -> Any:
        if self.wire and "attention_bias" in kw:
            kw["attention_mask"] = kw.pop("attention_bias")
        out = self.inner(input_ids, **kw)
        out.logits[..., self.mask_id] = -torch.inf
        self.calls.append({"input_len": int(input_ids.shape[1]), "store": int(kw.get("update_kvcache") or 0),
                           "use_cache": bool(kw.get("use_cache"))})
        return out


def d2f_bias(prompt: int, total: int, block: int) -> torch.Tensor:
    """The reference's additive D2F mask (its own function, imported here so the mask is the reference's)."""
    from generation_utils import _create_full_block_attention_mask

    return _create_full_block_attention_mask(prompt, total, block, dtype=torch.float64)


def logits_job(job: dict[str, Any]) -> dict[str, Any]:
    """The forwards the loading test compares, on the reference modeling code (float64)."""
    out: dict[str, Any] = {}
    for fam in ("llada", "dream"):
        spec = job[fam]
        model = load(fam, spec["folder"], None)
        ids = torch.tensor([spec["ids"]])
        P, B, n = spec["prompt"], spec["block"], ids.shape[1]
        full = torch.zeros(1, 1, n, n, dtype=torch.float64)
        bias = d2f_bias(P, n, B)
        key = "attention_bias" if fam == "llada" else "attention_mask"
        with torch.no_grad():
            out[f"{fam}/full"] = model(ids, **{key: full}).logits[0]
            out[f"{fam}/d2f"] = model(ids, **{key: bias}).logits[0]
            first = model(ids, **{key: bias}, use_cache=True, update_kvcache=P)
            cache = first.past_key_values
            out[f"{fam}/cached"] = model(ids[:, P:], **{key: extract(bias, P, n - P, P)}, past_key_values=cache,
                                         use_cache=True, update_kvcache=P if fam == "llada" else 0).logits[0]
            out[f"{fam}/verify"] = verify_logits(model, fam, ids, P, cache, spec["mask_id"])
        lora = load(fam, spec["folder"], spec["adapter"])
        with torch.no_grad():
            out[f"{fam}/lora_full"] = (lora(ids, attention_bias=full) if fam == "llada"
                                       else lora(input_ids=ids, attention_mask=full)).logits[0]
    return out


def extract(bias: torch.Tensor, start: int, length: int, cache: int) -> torch.Tensor:
    from generation_utils import _extract_attention_mask

    return _extract_attention_mask(bias, start, length, cache)


def verify_logits(model: Any, fam: str, ids: torch.Tensor, P: int, cache: Any, mask_id: int) -> torch.Tensor:
    """The verifier forward over ids[P:] on a cache holding the prompt: LLaDA's 2L layout (positions duplicated,
    the reference's own mask builder at target block size 1), Dream's causal pass."""
    from generation_utils import _construct_2L_attention_mask

    n = ids.shape[1]
    L = n - P
    ver = d2f_bias(P, n, 1)
    base = extract(ver, P, L, P)
    if fam == "llada":
        seq = torch.cat([ids[:, P:], torch.full((1, L), mask_id)], dim=1)
        pos = torch.arange(P, n)[None]
        position_ids = torch.cat([torch.arange(P)[None], pos, pos], dim=1)
        return model(seq, attention_bias=_construct_2L_attention_mask(base, 1), position_ids=position_ids,
                     past_key_values=cache, use_cache=False, update_kvcache=0).logits[0]
    return model(ids[:, P:], attention_mask=base, past_key_values=cache, use_cache=False, update_kvcache=0).logits[0]


def decode_job(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Every decode case of the job through the reference's generate function, with its forward log."""
    import generation_utils as ref

    results = []
    models: dict[tuple[str, bool], Any] = {}
    for case in job["cases"]:
        key = (case["family"], case["wire_dream_mask"])
        if key not in models:
            models[key] = load(case["family"], case["folder"], case.get("adapter"))
        rec = Recorded(models[key], case["mask_id"], case["wire_dream_mask"])
        fn = ref.generate_block_speculative if case["speculative"] else ref.generate_block_single
        torch.manual_seed(case["seed"])
        ids, stats = fn(rec, torch.tensor([case["prompt"]]), return_forward_stats=True, device=torch.device("cpu"),
                        dtype=torch.float64, **case["kwargs"])
        results.append({"name": case["name"], "tokens": ids.tolist(), "forwards": rec.calls,
                        "decoding_order": stats["decoding_order"], "total_forwards": stats["total_forwards"]})
    return results


def main() -> None:
    job_path, out_path = Path(sys.argv[1]), Path(sys.argv[2])
    job = json.loads(job_path.read_text())
    if job["kind"] == "logits":
        from safetensors.torch import save_file

        tensors = {k: v.contiguous() for k, v in logits_job(job).items()}
        save_file(tensors, str(out_path))
    else:
        out_path.write_text(json.dumps(decode_job(job)))


if __name__ == "__main__":
    main()
