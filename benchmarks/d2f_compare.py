"""The decode half of benchmarks/d2f_reference.py: every case through the reference's generate function (in its
own process, d2f_reference_side.py) and through ours (`loop="pipeline"`), compared decision for decision.

A case is identical when the tokens, the NFE, the positions every step decoded (and how: threshold / top-1 for
D2F; accepted / resampled / fallback for S2D2, the reference's decoding-order markers) and every step's verify
decision agree. S2D2 cases run ours with `pipeline_fallback="reference"`, the reference's fallback; each is also
run with our default fallback and the script counts how many steps that changes (pipeline.py says why it
differs). Dream cases run the reference with its mask wired through to DreamModel (d2f_reference_side.py), and once
more as it is, to show what its unmasked Dream forwards change.
"""
from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

import torch

from fixtures import tiny_d2f as M
from benchmarks.d2f_reference_runner import run_reference, write_checkpoints

G, B = 24, 4
PROMPTS = ([5, 9, 17, 33, 2], [71, 3, 88, 14, 56, 21, 9], [40, 41, 42])


def decode_cases(folders: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """(family, D2F or S2D2, knobs) grid: defaults, every D2F knob, every S2D2-on-D2F knob, sampling, EOS."""
    d2f = [dict(), dict(skip_threshold=0.5), dict(block_add_threshold=0.1, decoded_token_threshold=0.5),
           dict(block_add_threshold=1.0, decoded_token_threshold=1.0), dict(block_add_threshold=0.0),
           dict(skip_threshold=0.5, margin_confidence=True), dict(skip_threshold=0.5, neg_entropy=True),
           dict(temperature=1.0, skip_threshold=0.5), dict(eos=True, skip_threshold=0.5)]
    ssd = [dict(), dict(skip_threshold=0.5), dict(min_ssd_span_length=3, skip_threshold=0.5),
           dict(min_ssd_span_length=99), dict(allow_resample=False), dict(allow_resample=False,
                                                                          ssd_threshold_draft_confidence=True,
                                                                          draft_confidence_threshold=0.5),
           dict(verify_confidence_threshold=0.05), dict(ssd_ratio_tempering_factor=0.5),
           dict(temperature=1.0), dict(temperature=1.0, skip_threshold=0.5, block_add_threshold=0.1),
           dict(margin_confidence=True, skip_threshold=0.3), dict(eos=True)]
    cases = []
    for fam in ("llada", "dream"):
        for spec, grid in ((False, d2f), (True, ssd)):
            for knobs in grid:
                for i, prompt in enumerate(PROMPTS):
                    cases.append(_case(fam, folders[fam], spec, dict(knobs), prompt, seed=i))
    return cases


EOS_TOKEN = {"llada": 113, "dream": 123}  # tokens these tiny models draft often: the EOS cases stop on them


def _case(fam: str, folder: dict[str, str], speculative: bool, knobs: dict[str, Any], prompt: list[int],
          seed: int) -> dict[str, Any]:
    eos = EOS_TOKEN[fam] if knobs.get("eos") else M.EOS_ID
    kwargs = {**dict(max_length=512, max_new_tokens=G, block_size=B, mask_token_id=M.MASK_ID, model_type=fam,
                     eos_token_id=eos, temperature=0.0, block_add_threshold=0.5, decoded_token_threshold=0.8,
                     skip_threshold=0.9), **{k: v for k, v in knobs.items() if k != "eos"}}
    name = f"{fam}/{'s2d2' if speculative else 'd2f'}/" + (",".join(f"{k}={v}" for k, v in knobs.items()) or
                                                           "defaults") + f"/p{seed}"
    return {"name": name, "family": fam, "folder": folder["folder"], "speculative": speculative, "prompt": prompt,
            "seed": seed, "mask_id": M.MASK_ID, "kwargs": kwargs, "wire_dream_mask": fam == "dream", "eos": eos}


def our_config(case: dict[str, Any], fallback: str = "reference") -> Any:
    import s2d2

    k = case["kwargs"]
    score = "margin" if k.get("margin_confidence") else "neg_entropy" if k.get("neg_entropy") else "probability"
    cfg = dict(loop="pipeline", block_length=k["block_size"], gen_length=k["max_new_tokens"],
               confidence_threshold=k["skip_threshold"], block_add_threshold=k["block_add_threshold"],
               decoded_token_threshold=k["decoded_token_threshold"], confidence_score=score,
               temperature=k["temperature"])
    if not case["speculative"]:
        return s2d2.DecodeConfig(method="diffusion", **cfg)
    draft = k.get("draft_confidence_threshold") if k.get("ssd_threshold_draft_confidence") else None
    return s2d2.DecodeConfig(
        method="s2d2", policy="mask_span_length", min_span_length=min(k.get("min_ssd_span_length", 1), 256),
        allow_resample=k.get("allow_resample", True), draft_confidence_threshold=draft,
        verify_confidence_threshold=k.get("verify_confidence_threshold"),
        ratio_gamma=k.get("ssd_ratio_tempering_factor", 1.0), pipeline_fallback=fallback, **cfg)


def our_run(models: dict[str, Any], case: dict[str, Any], fallback: str = "reference") -> dict[str, Any]:
    import s2d2

    model = models[case["family"]]
    model.spec = dataclasses.replace(model.spec, stop_ids=[case["eos"]])
    res = s2d2.generate(model, case["prompt"], our_config(case, fallback), seed=case["seed"])
    t = res.trace
    order, verify = [], []
    for s in t.steps:
        order.append([_marker(c.position, c.how, case["speculative"]) for c in s.commits])
        verify.append(s.verification is not None)
    return {"tokens": res.token_ids, "nfe": len(t.forwards), "order": order, "verify": verify}


def _marker(pos: int, how: str, speculative: bool) -> float:
    """Our commit in the reference's decoding-order notation (its forward_stats)."""
    if how == "resampled":
        return pos + 0.5
    if speculative:
        return float(pos) if how == "accepted" else -float(pos)
    return float(pos) if how == "threshold" else -float(pos)


def reference_view(out: dict[str, Any]) -> dict[str, Any]:
    verify, i = [], 0
    calls = out["forwards"]
    while i < len(calls):  # a step: one caching/draft forward (use_cache), then maybe a verify (no cache)
        i += 1
        v = i < len(calls) and not calls[i]["use_cache"]
        verify.append(v)
        i += int(v)
    tokens = out["tokens"][0] if out["tokens"] and isinstance(out["tokens"][0], list) else out["tokens"]
    return {"tokens": tokens, "nfe": out["total_forwards"],
            "order": [[float(p) for p in step] for step in out["decoding_order"]], "verify": verify}


def first_mismatch(ours: dict[str, Any], ref: dict[str, Any]) -> str:
    for key in ("tokens", "nfe", "verify", "order"):
        a, b = ours[key], ref[key]
        if key == "order":
            a, b = [sorted(s) for s in a], [sorted(s) for s in b]
        if a != b:
            if isinstance(a, list) and isinstance(b, list):
                at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                return f"{key} differ at {at}: ours {a[at:at + 1]} vs reference {b[at:at + 1]} (lengths {len(a)}/{len(b)})"
            return f"{key}: ours {a} vs reference {b}"
    return ""


def compare_all(env: dict[str, str]) -> None:
    import s2d2

    with tempfile.TemporaryDirectory() as d:
        folders = write_checkpoints(Path(d))
        cases = decode_cases(folders)
        unwired = [dict(c, name=c["name"] + "/as-is", wire_dream_mask=False) for c in cases
                   if c["family"] == "dream"]
        out = Path(d) / "ref.json"
        run_reference(env, {"kind": "decode", "cases": cases + unwired}, out)
        ref = {r["name"]: reference_view(r) for r in json.loads(out.read_text())}
        models = {fam: s2d2.load_model(folders[fam]["folder"], device="cpu", dtype=torch.float64)
                  for fam in ("llada", "dream")}
        same, lines, steps_changed, spec_steps = 0, [], 0, 0
        for case in cases:
            ours = our_run(models, case)
            diff = first_mismatch(ours, ref[case["name"]])
            same += not diff
            if diff:
                lines.append(f"  DIFFERENT {case['name']}: {diff}")
            if case["speculative"]:
                default = our_run(models, case, fallback="d2f")
                spec_steps += len(ours["order"])
                steps_changed += sum(a != b for a, b in zip(default["order"], ours["order"])) + abs(
                    len(default["order"]) - len(ours["order"]))
        as_is = sum(not first_mismatch(our_run(models, dict(c, name=c["name"][:-6])), ref[c["name"]])
                    for c in unwired)
    print(f"identical: {same}/{len(cases)} cases (tokens, NFE, decoded positions per step, verify decisions)")
    print("\n".join(lines) if lines else "  no differences")
    print(f"S2D2 with our default fallback ('d2f'): {steps_changed} of {spec_steps} steps decode differently from "
          "the reference's fallback (incomplete blocks run the D2F rule)")
    print(f"Dream reference as is (its mask never reaches DreamModel): {as_is}/{len(unwired)} cases identical to ours")
