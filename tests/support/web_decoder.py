"""Run the page decoder (s2d2_web/decoding/) beside `s2d2.generate` and compare their traces.

`record_decode` runs the Python decoder with a model wrapper that records every forward (its inputs and the float32
logits it returned); `replay_decode` runs the JavaScript decoder under Node on a stand-in model that answers with
those logits after checking it was asked the same forward (tests/support/replay_model.js). `trace_differences` lists
where two traces disagree: token ids, forward kinds, counts and cache lengths, every decision and reason exactly;
recorded floats within a tolerance; wall times and the creation time are not compared.
"""
from __future__ import annotations

import json
import math
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

import s2d2
from s2d2.api import model_info
from s2d2.models.base import QueryMask
from tests.support.node_runner import ROOT, node

IGNORED = {"wall_s", "forward_wall_s", "created"}  # times: measured, never equal


def _mask_bits(attention: Any, q: int, cache_len: int) -> str:
    """The [q, cache_len + q] mask of a forward as a 0/1 string, row-major (what replay_model.js compares)."""
    if isinstance(attention, QueryMask):
        pattern = attention.pattern
    elif isinstance(attention, torch.Tensor):
        pattern = attention[:, -q:] if attention.shape[1] > q else attention
    elif attention == "causal":
        pattern = torch.ones(q, q, dtype=torch.bool).tril()
    else:
        pattern = torch.ones(q, q, dtype=torch.bool)
    full = torch.cat([torch.ones(q, cache_len, dtype=torch.bool), pattern.cpu().bool()], dim=1)
    return "".join("1" if b else "0" for b in full.reshape(-1).tolist())


class RecordingModel:
    """`model` whose every forward is recorded: inputs, cache length, rows kept and all its logits (float32)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.forwards: list[dict[str, Any]] = []
        self.logits: list[np.ndarray] = []
        self._offset = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def forward(self, cache: Any, ids: torch.Tensor, positions: torch.Tensor, attention: Any, keep: int,
                last: int | None = None) -> torch.Tensor:
        cache_len = cache.get_seq_length()
        logits = self._model.forward(cache, ids, positions, attention, keep).float()
        q = int(ids.shape[0])
        self.forwards.append({"ids": ids.tolist(), "positions": positions.tolist(), "cache_len": cache_len,
                              "keep": keep, "mask": _mask_bits(attention, q, cache_len), "offset": self._offset})
        self.logits.append(logits.detach().cpu().numpy().astype(np.float32).reshape(-1))
        self._offset += logits.numel()
        return logits if last is None else logits[-last:]

    def save(self, folder: Path) -> None:
        spec = self._model.spec
        tok = self._model.tokenizer
        texts = [tok.decode([i]) for i in range(spec.vocab_size)]
        meta = {"spec": {"name": spec.name, "alignment": spec.alignment, "mask_id": spec.mask_id,
                         "stop_ids": list(spec.stop_ids), "vocab_size": spec.vocab_size},
                "info": asdict(model_info(self._model)), "texts": texts, "forwards": self.forwards}
        (folder / "forwards.json").write_text(json.dumps(meta))
        np.concatenate(self.logits).astype("<f4").tofile(folder / "logits.f32")


def record_decode(model: Any, prompt: str, cfg: s2d2.DecodeConfig, seed: int, folder: Path) -> dict[str, Any]:
    """The Python trace (as a dict) of one decode, its forwards saved under `folder` for `replay_decode`."""
    folder.mkdir(parents=True, exist_ok=True)
    rec = RecordingModel(model)
    result = s2d2.generate(rec, prompt, cfg, seed=seed)
    rec.save(folder)
    return result.trace.to_dict()


def replay_decode(folder: Path, python_trace: dict[str, Any]) -> dict[str, Any]:
    """The page decoder's trace of the same decode (its header's config, prompt ids and seed) over the recording."""
    h = python_trace["header"]
    payload = {"config": h["config"], "prompt_ids": h["prompt_ids"], "seed": h["seed"], "prompt_text": h["prompt_text"]}
    done = subprocess.run([node(), str(ROOT / "tests" / "support" / "replay_decode.mjs"), str(folder)],
                          input=json.dumps(payload), text=True, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def trace_differences(want: Any, got: Any, tol: float = 1e-4, path: str = "trace", limit: int = 20,
                      coin_tosses: frozenset[int] = frozenset()) -> list[str]:
    """Where `got` differs from `want`: exact for ids, kinds, counts, strings and decisions; floats within `tol`.

    `coin_tosses`: forwards at which the model itself sat on a near-tie (a mixture-of-experts router within a few
    1e-7 of another expert: tests/support/router_margins.py). A step that used one still has its ids, decisions and
    draws compared exactly; only its recorded floats are not, since another expert moves them arbitrarily far.
    """
    out: list[str] = []
    if coin_tosses and isinstance(want, dict) and isinstance(got, dict) and "steps" in want and "steps" in got:
        rest = {k: v for k, v in want.items() if k != "steps"}
        _diff(rest, {k: v for k, v in got.items() if k != "steps"}, tol, path, out, limit)
        if len(want["steps"]) != len(got["steps"]):
            out.append(f"{path}.steps: {len(want['steps'])} items vs {len(got['steps'])}")
        for i, (a, b) in enumerate(zip(want["steps"], got["steps"])):
            loose = not coin_tosses.isdisjoint(a.get("forwards") or ())
            _diff(a, b, math.inf if loose else tol, f"{path}.steps[{i}]", out, limit)
        return out
    _diff(want, got, tol, path, out, limit)
    return out


def _diff(a: Any, b: Any, tol: float, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            out.append(f"{path}: keys {sorted(set(a) ^ set(b))} on one side only")
        for k in a:
            if k in b and k not in IGNORED:
                _diff(a[k], b[k], tol, f"{path}.{k}", out, limit)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, tol, f"{path}[{i}]", out, limit)
    elif isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        if a != b or type(a) is not type(b):
            out.append(f"{path}: {a!r:.80} vs {b!r:.80}")
    elif isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=0, abs_tol=tol)):
            out.append(f"{path}: {a!r} vs {b!r}")
    elif a != b:
        out.append(f"{path}: {a!r} vs {b!r}")
