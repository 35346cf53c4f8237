"""Mutations of a real trace file, shared by the upload fuzz test and benchmarks/hostile_uploads.py.

A mutation picks one place in the JSON tree and blows a number up, empties or nests a list, swaps a type, plants a
hostile string, drops a key or adds one. `render_everything` is what the app does with an accepted upload.
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "assets" / "traces").glob("*.json"))
HOSTILE_STRINGS = ["<script>alert(1)</script>", "[x](javascript:alert(1))", "`code` **b** # h", "\u202e\u200b\x00",
                   "x" * 5000, "inf", "nan", "-inf", "../../etc/passwd", "{{7*7}}", "${x}", "\n" * 50]
NUMBERS = [0, -1, 1, 2**31, 2**63, 10**30, -(10**30), 10**400, 1e308, -1e308, 0.5, 1e-300, "inf", "nan"]


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location in a JSON tree (lists sampled to their first three items, so paths stay few)."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:3]):
            out += paths(v, prefix + (i,))
    return out


def _get(node: Any, path: tuple) -> Any:
    for p in path:
        node = node[p]
    return node


def _set(root: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(root, path[:-1])[path[-1]] = value
    return root


MUTATIONS = ("number", "nudge", "nudge", "empty", "nest", "repeat", "swap", "string", "drop", "extra", "none")


def mutate(data: dict[str, Any], path: tuple, kind: str, pick: int) -> Any:
    """One mutation of a deep copy; `pick` chooses among the candidate values."""
    data = copy.deepcopy(data)
    old = _get(data, path)
    if kind == "number":
        new: Any = NUMBERS[pick % len(NUMBERS)]
    elif kind == "nudge" and isinstance(old, (int, float)) and not isinstance(old, bool):
        new = old + [-1, 1, -2, 3, 8, -8, 64, 0.5][pick % 8]  # stays plausible: reaches the cross-field rules
    elif kind == "empty":
        new = [] if isinstance(old, list) else ({} if isinstance(old, dict) else "")
    elif kind == "nest":
        new = [old] if pick % 2 else {"x": old}
    elif kind == "repeat":
        new = (old * (2 + pick % 300))[:5000] if isinstance(old, list) and old else [old] * (2 + pick % 300)
    elif kind == "swap":
        new = [str(old), 7, 1.5, True, None, [], {}][pick % 7]
    elif kind == "string":
        new = HOSTILE_STRINGS[pick % len(HOSTILE_STRINGS)]
    elif kind == "drop" and path:
        parent = _get(data, path[:-1])
        if isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, list):
            parent.pop(path[-1])
        return data
    elif kind == "extra" and isinstance(old, dict):
        old["__class__"] = "os.system"
        return data
    else:
        new = None
    return _set(data, path, new)


def random_case(rng: random.Random, base: dict[str, Any], n: int = 2) -> Any:
    data = base
    for _ in range(n):
        where = paths(data) if isinstance(data, (dict, list)) else [()]
        data = mutate(data, rng.choice(where), rng.choice(MUTATIONS), rng.randrange(1000))
    return data


def dumps(data: Any) -> bytes:
    return json.dumps(data).encode()


def render_everything(trace: Any, scrub: bool = True) -> int:
    """What the app builds for an accepted upload (and, with `scrub`, a scrub through the first, second, middle and
    last steps in every mask mode and canvas colouring, a token selected); returns the payload size in bytes."""
    import itertools

    import plotly.io as pio

    from components import canvas, handlers, mask_view, replay

    size = sum(_size(part, pio) for part in handlers.trace_views(trace).values())
    n = len(trace.steps)
    shown = [(s, w) for s in sorted({0, 1, n // 2, n}) for w in mask_view.WHICH] if scrub else [(n, "verify")]
    picked = len(trace.header.prompt_ids)  # the first generated position: its mask rows are outlined
    for (step, which), colour in zip(shown, itertools.cycle(canvas.COLOR_BY)):
        views = replay.render_step(trace, step, replay.StepOptions(which, colour, picked))
        size += sum(_size(part, pio) for part in views.values())
    return size


def _size(part: Any, pio: Any) -> int:
    if hasattr(part, "to_plotly_json"):
        return len(pio.to_json(part))
    if isinstance(part, str):
        return len(part)
    return len(json.dumps(part, default=str))


# -- the largest traces: a legitimate 512-token run, and the worst one the validator accepts -----------------------

def _step(lay: Any, i: int, block: int, start: int, masks: list[int], commit: list[int], heavy: bool,
          text: str, reason: str, fwd: list[int], light_drafts: int) -> Any:
    from s2d2.trace import (Candidate, Commit, MaskDraft, PolicyDecision, PolicyInputs, StepRecord, Verification,
                            VerifyPosition)

    tops = 64 if heavy else 5
    cands = [Candidate(10 + k, text, 0.01) for k in range(tops)]
    drafts = [MaskDraft(p, 11, text, 0.5, 0.2, 0.1, list(cands)) for p in (masks if heavy else masks[:light_drafts])]
    span = [masks[0], min(len(masks), 8 if heavy else light_drafts)]
    inputs = PolicyInputs(span[1], [0.9] * span[1], 3.0, 2, lay, 0.5, 0.2)
    details = {"tau_on": 0.5, "tau_off": -0.5, "state_before": bool(i % 2), "state_after": bool((i + 1) % 2),
               "band": text[:100]}
    decision = PolicyDecision("score_hysteresis", True, 1.0 if i % 3 else -1.0, reason, details)
    rows = [VerifyPosition(p, 11, text, 0.5, 0.4, 0.8, 0.3, True, 12, text, 0.6, list(cands)) for p in masks[:span[1]]]
    verification = Verification("2l", "paper", rows, len(rows) - 1 if rows else 0, len(rows) - 1 if rows else None,
                                0.3, False, 13, text)
    commits = [Commit(p, 14, text, "accepted") for p in commit]
    return StepRecord(i, block, i, [start, start + lay], fwd, masks, drafts, span, inputs, decision, verification, 0,
                      commits)


def big_trace(prompt: int, gen: int, block: int, steps_per_position: int, text: str, reason: str,
              heavy: bool = False, light_drafts: int = 64, forwards_per_step: int = 2) -> Any:
    """A valid S2D2 (hysteresis) trace: `steps_per_position` steps per decoded position (the extra steps commit
    nothing), every token string `text`, every reason `reason`, at most `light_drafts` drafts per step; with `heavy`,
    the first, middle and last steps draft every mask with 64 candidates per distribution."""
    from s2d2.config import preset
    from s2d2.trace import SCHEMA_VERSION, BlockRecord, Footer, ForwardRecord, Header, ModelInfo, Trace

    cfg = preset("sdar-config-b", block_length=block, policy="score_hysteresis", hysteresis_on=0.5,
                 hysteresis_off=-0.5, gen_length=gen)
    total = -(-(prompt + gen) // block) * block
    first = prompt // block
    forwards = [ForwardRecord(0, "prefill", -1, -1, 0, first * block, first * block, 1, 0.001)]
    blocks, steps = [], []

    def forward(kind: str, b: int, s: int, n: int) -> int:
        forwards.append(ForwardRecord(len(forwards), kind, b, s, b * block, n, n, len(forwards) + 1, 0.001))
        return len(forwards) - 1

    n_steps = steps_per_position * (total - prompt)
    heavy_at = {0, n_steps // 2, n_steps - 1} if heavy else set()
    for b in range(first, total // block):
        start = b * block
        blocks.append(BlockRecord(b, start, block, max(0, min(prompt - start, block))))
        open_ = [p for p in range(start, start + block) if p >= prompt]
        for p in list(open_):
            for rep in range(steps_per_position):
                i = len(steps)
                fwd = [forward("draft", b, i, block), forward("verify_2l", b, i, 2 * block)]
                fwd += [forward("draft", b, i, block) for _ in range(forwards_per_step - 2)]
                steps.append(_step(block, i, b, start, open_, [p] if rep == 0 else [], i in heavy_at, text, reason,
                                   fwd, light_drafts))
            open_.remove(p)
        forward("commit", b, -1, block)
    out = [14] * gen
    model = ModelInfo("worst-case", "aligned", "2l", 1, [2], 4096, "float32", "cpu", "sdpa")
    header = Header(SCHEMA_VERSION, "0.1.0", "synthetic", model, cfg.to_dict(), 0, text, [20] * prompt,
                    [text] * prompt, gen, total)
    footer = Footer(out, text, [text] * gen, gen, None, 1.0, 0.5)
    return Trace(header, blocks, forwards, steps, footer)


def legit_trace() -> Any:
    """The largest legitimate recording the app makes: longest prompt and generation, largest block, one step per
    token, every mask drafted with its top 5, ordinary strings (about 14 MB of JSON)."""
    from s2d2.limits import limits

    lim = limits()
    return big_trace(lim.max_prompt_tokens, lim.max_gen_tokens, lim.max_block_length, 1, " tok",
                     "ON: s = K̂ − c·N_hi = 2.31 − 1·2 = 0.31 ≥ τ_off -0.50 → verify (ON)")


def worst_trace(upload_bytes: int) -> Any:
    """The heaviest trace the validator accepts under the default limits that still fits an upload: the longest
    prompt and generation, the largest block, as many steps as positions, the longest strings, the heaviest steps
    where the scrubber lands first."""
    from s2d2.limits import limits

    lim = limits()
    for text_len in (256, 128, 64, 32, 16):
        trace = big_trace(lim.max_prompt_tokens, lim.max_gen_tokens, lim.max_block_length, 1, "<x>" * (text_len // 3),
                          "r" * 200, heavy=True, light_drafts=1, forwards_per_step=3)
        if len(trace.to_json()) <= upload_bytes:
            return trace
    raise AssertionError("no worst-case trace fits the upload limit")
