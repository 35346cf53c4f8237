"""How exactly an exported graph reproduces torch: per forward kind, and for whole decodes.

`forward_kinds` drives torch (`HFModel.forward` on a DynamicCache) and onnxruntime (`OnnxModel.forward` on its own
cache) through the forwards a block decode makes, each side keeping its own cache: a block-causal prefill, a draft, a
2L verify, a commit, a commit fused with the next draft, AR steps, and an AR-style causal prefill on an empty cache.
Token ids come from torch's argmax so the inputs look like a decode's. Each row gives the largest |logit difference|,
how many rows' argmax agree (rows whose top two logits lie within `NEAR_TIE` are counted apart: there a float
difference may legitimately flip the choice) and the largest |difference| of the cache kept.

`decodes` runs `s2d2.generate` with both models: output ids and the forward kinds and counts must be identical.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..models.masks import block_causal_mask, draft_query, fused_draft_query, verify_2l_query
from .onnx_model import OnnxModel

NEAR_TIE = 1e-3  # a row whose top-2 logits differ by less is a near-tie (its argmax may flip on float noise)
PROMPT = "What is 12 + 7?"


@dataclass(frozen=True)
class KindRow:
    """One forward of the script, torch against onnxruntime."""

    kind: str
    queries: int
    cache: int
    max_abs: float
    argmax_equal: int
    rows: int
    near_ties: int
    cache_max_abs: float


@dataclass(frozen=True)
class DecodeRow:
    """One decode with each model: are the tokens and the forwards the same?"""

    preset: str
    prompt: str
    same_ids: bool
    same_forwards: bool
    tokens: int
    forwards: int


def compare(kind: str, hf: Any, onnx: OnnxModel, caches: tuple[Any, Any], ids: list[int], positions: list[int],
            attention: Any, keep: int) -> tuple[KindRow, torch.Tensor]:
    """Run one forward on both sides; the row and torch's logits."""
    ref_cache, got_cache = caches
    past = ref_cache.get_seq_length()
    ids_t, pos_t = torch.tensor(ids), torch.tensor(positions)
    ref = hf.forward(ref_cache, ids_t, pos_t, attention, keep)
    got = onnx.forward(got_cache, ids_t, pos_t, attention, keep)
    top2 = ref.topk(2, dim=-1).values
    tie = (top2[:, 0] - top2[:, 1]) < NEAR_TIE
    agree = ref.argmax(-1) == got.argmax(-1)
    cache_diff = max(float((torch.from_numpy(g) - r).abs().max()) if r.numel() else 0.0
                     for g, r in zip(got_cache.tensors, _torch_tensors(ref_cache)))
    row = KindRow(kind, len(ids), past, float((ref - got).abs().max()), int((agree & ~tie).sum()),
                  int((~tie).sum()), int(tie.sum()), cache_diff)
    return row, ref


def _torch_tensors(cache: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for layer in cache.layers:
        out += [layer.keys, layer.values]
    return out


def forward_kinds(hf: Any, onnx: OnnxModel, block: int = 4, ar_steps: int = 3) -> list[KindRow]:
    """The script of forwards (module docstring), torch against onnxruntime, one row per forward."""
    from ..api import encode_prompt

    prompt, _ = encode_prompt(hf, PROMPT)
    n, B, mask = len(prompt), block, hf.spec.mask_id
    caches = (hf.new_cache(), onnx.new_cache())
    rows: list[KindRow] = []

    def step(kind: str, ids: list[int], start: int, attention: Any, keep: int, repeat: int = 1) -> list[int]:
        positions = list(range(start, start + len(ids) // repeat)) * repeat
        row, logits = compare(kind, hf, onnx, caches, ids, positions, attention, keep)
        rows.append(row)
        return logits.argmax(-1).tolist()

    step("prefill", prompt, 0, block_causal_mask(n, B), keep=n)
    draft = step("draft", [mask] * B, n, draft_query(B, 0, "cpu"), keep=0)
    verified = step("verify_2l", draft + [mask] * B, n, verify_2l_query(B, "cpu"), keep=0, repeat=2)
    step("commit", draft, n, "full", keep=B)
    nxt = step("commit+draft", verified[B:] + [mask] * B, n + B, fused_draft_query(B, B, True, 1, "cpu"), keep=B)
    token, at = nxt[-1], n + 2 * B
    for _ in range(ar_steps):
        token = step("ar", [token, mask], at, "causal", keep=1)[-1]
        at += 1
    caches = (hf.new_cache(), onnx.new_cache())
    step("prefill (causal)", prompt + [mask], 0, "causal", keep=n)
    return rows


def decodes(hf: Any, onnx: OnnxModel, presets: list[str], prompts: list[str], gen_length: int = 32,
            seed: int = 0) -> list[DecodeRow]:
    """`s2d2.generate` with torch and with onnxruntime on every preset x prompt (greedy and sampled alike: both use
    the same generator, so only float differences could part them)."""
    from .. import generate, preset

    out = []
    for name in presets:
        cfg = preset(name, gen_length=gen_length)
        for prompt in prompts:
            ref = generate(hf, prompt, cfg, seed=seed)
            got = generate(onnx, prompt, cfg, seed=seed)
            out.append(DecodeRow(name, prompt, ref.token_ids == got.token_ids, kinds(ref) == kinds(got),
                                 len(ref.token_ids), len(ref.trace.forwards)))
    return out


def kinds(result: Any) -> list[tuple[str, int, int]]:
    """(kind, cache length, query tokens) of every forward of a decode."""
    return [(f.kind, f.cache_len, f.query_tokens) for f in result.trace.forwards]


def check_export(name: str, folder: Path) -> list[KindRow]:
    """Load checkpoint `name` in float32 and the export in `folder`; the forward-kind rows."""
    from ..models.loading import load_model

    hf = load_model(name, device="cpu", dtype="float32", backend="dynamic")
    onnx = OnnxModel(folder, hf.tokenizer)
    return forward_kinds(hf, onnx, block=min(hf.spec.default_block, 8))


def format_rows(rows: list[KindRow]) -> str:
    """A plain table of the rows."""
    head = f"{'forward':18s} {'Q':>3s} {'cache':>5s} {'max|Δlogit|':>12s} {'argmax':>9s} {'ties':>4s} {'max|Δkv|':>10s}"
    lines = [head] + [f"{r.kind:18s} {r.queries:3d} {r.cache:5d} {r.max_abs:12.2e} {r.argmax_equal:4d}/{r.rows:<4d} "
                      f"{r.near_ties:4d} {r.cache_max_abs:10.2e}" for r in rows]
    return "\n".join(lines)
