"""The page decoder (s2d2_web/decoding/) against `s2d2.generate` on the bundled models (float32, CPU).

Two bindings, both over a grid of prompts x presets, greedy and sampled, with the shared counter stream (rng="counter"):

* replay: the JavaScript decoder is given exactly the logits the Python decoder's model gave, forward by forward
  (tests/support/replay_model.js refuses a forward that differs in ids, positions, mask, cache length or rows
  kept). The traces must agree everywhere: token ids, forward kinds, counts and cache lengths, every decision and
  reason line, every draw; recorded floats within 1e-12: both sides compute everything after the logits in float64
  (s2d2/decoding/sampling.py, s2d2_web/decoding/sampling.js), whatever ATen's CPU kernel set.
* ONNX: the JavaScript decoder on the exported model (assets/web/tiny) under onnxruntime-node, against the Python
  decoder on the torch model: the conformance of issue 36, reported as identical / total per preset.

Node runs both (tests skip, saying why, without node; the ONNX one also without `npm ci --prefix s2d2_web`).
"""
from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from typing import Any

import pytest
import torch

import s2d2
from s2d2.trace import Trace
from tests.support.node_runner import ROOT, WEB, node, run_module
from tests.support.random_configs import BLOCK, EDITING, PIPELINE, random_config
from tests.support.router_margins import RouterMargins, selection_margin
from tests.support.web_decoder import record_decode, replay_decode, trace_differences

TINY_PROMPTS = ("Once upon a time there was", "Tom has 3 apples. He buys 4 more. How many?")
LLADA2_PROMPTS = ("Zoe has 2 toys. She gets 3 bags with 7 toys in each bag. How many toys does Zoe have now?",
                  "Once upon a time there was")  # the first edits and verifies, the second resamples
# Every preset the page decodes for each bundled model: the block loop, AR and the D2F pipeline on `tiny` (not
# cost-aware, which routes with this machine's measured forward seconds), the editing loop and the pipeline on
# `tiny-llada2`. No preset routes with the UCB
# bandit, so two variants do (VARIANTS): one per block layout (whole blocks, sub-block windows) and entropy scope.
TINY = ("ar", "dynamic-baseline", "sdar-config-a", "sdar-config-b", "fastdllm-config-a", "fastdllm-config-b",
        "fastdllm-config-c", "sdar-config-b+reuse", "sdar-config-b+fused", "sdar-config-b+adaptive",
        "sdar-config-b+all", "sdar-config-b+trim", "sdar-config-b+reuse+fused+trim", "lossless",
        "sdar-config-a+ucb", "fastdllm-config-b+ucb", "d2f", "d2f-s2d2", "d2f-s2d2-dream",
        "d2f-s2d2+ucb+reference", "d2f+neg-entropy")
# A grid name that is no preset: (the preset it changes, the changes).
VARIANTS = {
    "sdar-config-a+ucb": ("sdar-config-a", {"policy": "contextual_bandit_ucb"}),
    "fastdllm-config-b+ucb": ("fastdllm-config-b", {"policy": "contextual_bandit_ucb", "ucb_entropy_scope": "masks",
                                                    "ucb_beta": 0.5, "ucb_span_bins": 3, "ucb_progress_bins": 3}),
    # The D2F pipeline's blocks are 32 long: 96 tokens keep up to three of them in flight.
    **{name: (name, {"gen_length": 96}) for name in ("d2f", "d2f-s2d2", "d2f-s2d2-dream")},
    # Blocks of 8 keep up to four in flight; the pipeline's other knobs, and UCB routing its steps.
    "d2f-s2d2+ucb+reference": ("d2f-s2d2", {"gen_length": 96, "block_length": 8, "policy": "contextual_bandit_ucb",
                                             "pipeline_fallback": "reference", "confidence_score": "margin",
                                             "verify_confidence_threshold": 0.2, "block_add_threshold": 0.25,
                                             "decoded_token_threshold": 0.5}),
    "d2f+neg-entropy": ("d2f", {"gen_length": 96, "block_length": 8, "confidence_score": "neg_entropy",
                                "block_add_threshold": 0.25, "confidence_threshold": 0.7}),
}
LLADA2 = ("llada2-static", "llada2-dynamic", "llada2-dynamic-edit", "llada2-conservative", "llada2-conservative-noedit",
          "llada2-quality", "llada2-quality-noedit", "d2f", "d2f-s2d2", "d2f-s2d2-dream")
GRID = {"tiny": (TINY, TINY_PROMPTS, 32), "tiny-llada2": (LLADA2, LLADA2_PROMPTS, 64)}
CASES = [(model, name) for model, (names, _, _) in GRID.items() for name in names]
GREEDY_ONLY = ("lossless",)  # greedy_exact acceptance: temperature 0 only
REPLAY_TOL = 1e-12  # same logits, float64 on both sides: measured within 1e-14 (summation order, exp's last ulp)
# A forward whose MoE router had two candidates nearer than this is a coin toss for the model itself: ATen's kernel
# sets put router scores up to ~4e-7 apart (measured on `tiny-llada2`), and a 1.4e-7 margin flipped an expert under
# `ATEN_CPU_CAPABILITY=default` (logits 0.16 apart). 8 of the grid's 1006 `tiny-llada2` forwards are under 1e-6.
ROUTER_TIE = 1e-6


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    return {name: s2d2.load_model(name, dtype=torch.float32) for name in GRID}


def _cfg(model: str, name: str, temperature: float) -> s2d2.DecodeConfig:
    base, changes = VARIANTS.get(name, (name, {}))
    settings = {"gen_length": GRID[model][2], "rng": "counter", "temperature": temperature, **changes}
    return s2d2.preset(base, **settings)


def _temperatures(name: str) -> tuple[float, ...]:
    return (0.0,) if name in GREEDY_ONLY else (0.0, 1.0)


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
@pytest.mark.parametrize("model,name", CASES)
def test_the_page_decoder_makes_every_decision_of_generate_given_the_same_logits(models, tmp_path, model, name,
                                                                                 temperature):
    if temperature not in _temperatures(name):
        pytest.skip("greedy_exact acceptance decodes at temperature 0 only")
    for i, prompt in enumerate(GRID[model][1]):
        folder = tmp_path / f"p{i}"
        want = record_decode(models[model], prompt, _cfg(model, name, temperature), 11 + i, folder)
        got = replay_decode(folder, want)
        assert "error" not in got, got.get("error")
        assert trace_differences(want, got, tol=REPLAY_TOL) == [], f"{model} {name}, prompt {i}"
        Trace.from_dict(got)  # the server reads it as it reads an upload: schema, bounds, cross-field rules


RANDOM_REPLAYS = 12
PAGE_LOOPS = {"tiny": [BLOCK, PIPELINE], "tiny-llada2": [EDITING, PIPELINE]}


def _random_page_case(rng: random.Random) -> tuple[str, s2d2.DecodeConfig]:
    """A bundled model and a random config of its loops (tests/support/random_configs.py) on the counter stream
    the page draws from, mostly sampled; cost-aware routing (server only) drawn again."""
    for _ in range(50):
        model = rng.choice(list(PAGE_LOOPS))
        cfg = random_config(rng, rng.choice(PAGE_LOOPS[model]))
        if cfg is not None and cfg.policy != "cost_aware":
            sampled = cfg.acceptance != "greedy_exact" and rng.random() < .6  # (the counter stream's draws, mostly)
            changes = dict(temperature=rng.choice([0.7, 1.0]), top_p=rng.choice([1.0, 0.9]),
                           top_k=rng.choice([0, 5])) if sampled else {}
            try:
                return model, cfg.replace(rng="counter", **changes).validate()
            except ValueError:
                continue
    raise AssertionError("no page config in 50 draws")


@pytest.mark.parametrize("number", range(RANDOM_REPLAYS))
def test_random_configs_replay_in_the_page_as_on_the_server(models, tmp_path, number):
    """Beyond the grid's presets, seeded random configs (policies, estimators, acceptance, sampling with top_k and
    top_p, the options, block sizes): the page decoder replaying generate's logits makes every decision and records
    every value generate does (this found the recorded candidates' order among equal probabilities)."""
    rng = random.Random(f"web-{number}")
    model, cfg = _random_page_case(rng)
    want = record_decode(models[model], rng.choice(GRID[model][1]), cfg, rng.randrange(100), tmp_path)
    got = replay_decode(tmp_path, want)
    assert "error" not in got, got.get("error")
    assert trace_differences(want, got, tol=REPLAY_TOL) == [], f"{model} {cfg}"


def test_the_grid_exercises_rejections_residual_draws_skips_the_remasking_rule_and_edits(models):
    """The replay grid is not vacuous: between them its decodes resample, accept, skip, fall back and edit."""
    hows, routes, edits = Counter(), Counter(), 0
    for model, name in (("tiny", "sdar-config-a"), ("tiny", "fastdllm-config-c"), ("tiny-llada2", "llada2-dynamic-edit")):
        for t in (0.0, 1.0):
            trace = s2d2.generate(models[model], GRID[model][1][0], _cfg(model, name, t), seed=11).trace
            hows.update(c.how for s in trace.steps for c in s.commits)
            routes.update(s.decision.verify for s in trace.steps if s.decision is not None)
            edits += sum(len(s.edits) for s in trace.steps)
    assert {"accepted", "resampled", "threshold", "fallback"} <= set(hows)
    assert routes[True] and routes[False] and edits


def test_the_pipeline_and_bandit_cases_are_not_vacuous(models):
    """Between them the d2f and UCB cases keep several blocks in flight, run every pipeline forward kind, event and
    commit kind, and the bandit both verifies and skips (on whole blocks, sub-block windows and the pipeline)."""
    kinds, hows, events, flight = Counter(), Counter(), Counter(), 0
    routes = {name: Counter() for name in ("sdar-config-a+ucb", "fastdllm-config-b+ucb", "d2f-s2d2+ucb+reference")}
    for name in ("d2f-s2d2", "d2f+neg-entropy", *routes):
        for t in (0.0, 1.0):
            trace = s2d2.generate(models["tiny"], TINY_PROMPTS[1], _cfg("tiny", name, t), seed=12).trace
            kinds.update(f.kind for f in trace.forwards)
            hows.update(c.how for s in trace.steps for c in s.commits)
            events.update(e.event for s in trace.steps for e in s.events)
            flight = max([flight, *(len(s.in_flight) for s in trace.steps)])
            if name in routes:
                routes[name].update(s.decision.verify for s in trace.steps)
    assert {"prefill+draft", "draft", "commit+draft", "verify_2l"} <= set(kinds)
    assert {"accepted", "resampled", "threshold", "fallback"} <= set(hows)
    assert set(events) == {"added", "complete", "finished", "cached"} and flight >= 3
    assert all(r[True] and r[False] for r in routes.values()), routes


def test_the_bandits_bins_and_the_pipelines_mask_equal_pythons():
    """policies/contextual_bandit_ucb.js ucbBin and models/masks.js segmentsPattern against their Python twins."""
    from s2d2.models.masks import segments_pattern
    from s2d2.policies.contextual_bandit_ucb import ucb_bin
    values = (-0.5, 0.0, 0.2, 0.5, 0.7499, 0.75, 1.0, 3.0, 7.0)
    bins = [(v, lo, hi, n) for v in values for lo, hi in ((0.0, 1.0), (1.0, 8.0), (2.0, 2.0)) for n in (1, 2, 3, 4)]
    got = run_module("policies/contextual_bandit_ucb.js", "output = input.map((a) => m.ucbBin(...a));", bins)
    assert got == [ucb_bin(*a) for a in bins]
    nan = run_module("policies/contextual_bandit_ucb.js", "output = m.ucbBin(NaN, 0, 1, 4);", None)
    assert nan == ucb_bin(float("nan"), 0.0, 1.0, 4) == 0
    segments = [[5], [7, 4], [4, 4, 4], [3, 8, 8, 8], [1, 1]]
    got = run_module("models/masks.js", "output = input.map((s) => Array.from(m.segmentsPattern(s).bits));", segments)
    assert got == [segments_pattern(tuple(s)).int().reshape(-1).tolist() for s in segments]


def test_a_complete_blocks_top1_is_the_first_of_equal_bests_in_both_decoders():
    """pipeline_rules.js top1 against its Python twin (`block_rules` on a complete block with no mask above the
    threshold), ties included: torch.topk, which the reference uses, picks another of 8 equal scores on some CPU
    kernels (so a tie could decode differently on the server and in the page)."""
    from s2d2.decoding.pipeline_rules import block_rules
    rows = [[0.5] * 8, [0.5] * 3, [0.1, 0.7, 0.7, 0.2], [0.3], [0.2, 0.9, 0.1, 0.9, 0.9] * 7, [-2.0, -1.0, -1.0]]
    got = run_module("decoding/pipeline_rules.js", "output = input.map((r) => m.top1(r));", rows)

    def python_top1(row: list[float]) -> list[bool]:
        scores, n = torch.tensor(row, dtype=torch.float64), len(row)
        chosen, took = block_rules(torch.zeros(n, dtype=torch.float64), scores, torch.zeros(n, dtype=torch.long),
                                   torch.arange(n), torch.ones(1, dtype=torch.bool), n, 0.5, False)
        assert took.tolist() == [True]
        return chosen.tolist()

    assert got == [python_top1(r) for r in rows]
    assert got[0].index(True) == 0 and got[4].index(True) == 1


def test_the_recorded_candidates_take_equal_probabilities_in_token_order_in_both_decoders():
    """sampling.js topK against its Python twin (forwards.py `top_k`), ties included: with top_p or top_k most of a
    row is exactly 0, and torch.topk alone picked among those zeros by kernel (a random-config replay found the
    server and the page listing different zero-probability candidates)."""
    from s2d2.decoding.forwards import top_k
    rows = [[0.5, 0, 0, 0.5, 0, 0, 0], [0.1, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1], [0.0] * 9 + [1.0], [0.25] * 12,
            [0.3, 0.7], [0.0] * 40 + [0.6, 0.4]]
    got = run_module("decoding/sampling.js", "output = input.map((r) => m.topK(r));", rows)
    for row, js in zip(rows, got):
        py = top_k(torch.tensor(row, dtype=torch.float64))
        assert [c["token"] for c in js] == py["top_ids"].tolist(), row
        assert [c["prob"] for c in js] == py["top_probs"].tolist(), row
    assert [c["token"] for c in got[0]] == [0, 3, 1, 2, 4] and [c["token"] for c in got[3]] == [0, 1, 2, 3, 4]


def test_the_trace_comparison_sees_a_changed_token_decision_or_float():
    base = {"steps": [{"commits": [{"token": 5}], "decision": {"verify": True, "reason": "s = 1.00"}, "p": 0.5}],
            "forwards": [{"wall_s": 0.1}]}
    assert trace_differences(base, json.loads(json.dumps(base))) == []
    for path, value in ((("commits", 0, "token"), 6), (("decision", "verify"), False), (("decision", "reason"), "s"),
                        (("p",), 0.5002)):
        other = json.loads(json.dumps(base))
        at = other["steps"][0]
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = value
        assert len(trace_differences(base, other)) == 1, path
    timed = json.loads(json.dumps(base))
    timed["forwards"][0]["wall_s"] = 9.0
    assert trace_differences(base, timed) == []  # wall times are measured, never compared


def test_a_router_coin_toss_frees_only_its_own_steps_floats():
    base = {"steps": [{"forwards": [0], "commits": [{"token": 5}], "p": 0.5},
                      {"forwards": [1], "commits": [{"token": 7}], "p": 0.25}], "forwards": [{}, {}]}
    moved = json.loads(json.dumps(base))
    moved["steps"][0]["p"] = 0.9  # the expert the other side ran moved this step's floats
    assert trace_differences(base, moved) != []
    assert trace_differences(base, moved, coin_tosses=frozenset({0})) == []
    assert trace_differences(base, moved, coin_tosses=frozenset({1})) != []  # another step's toss frees nothing here
    moved["steps"][0]["commits"][0]["token"] = 6
    assert trace_differences(base, moved, coin_tosses=frozenset({0})) == ["trace.steps[0].commits[0].token: 5 vs 6"]


def test_the_router_margin_is_the_gap_at_the_boundary_of_the_routers_choice(models):
    """On the bundled MoE model's own router: moving any one expert's score by less than the measured margin keeps
    every token's experts; some move just past it changes a choice."""
    router = next(m for m in models["tiny-llada2"].model.modules() if hasattr(m, "e_score_correction_bias"))
    hidden = torch.randn(6, router.hidden_dim, generator=torch.Generator().manual_seed(0))
    bias = router.e_score_correction_bias
    saved = bias.clone()

    def choice() -> list[list[int]]:
        return router(hidden)[2].sort(-1)[0].tolist()

    with torch.no_grad():
        before, margin = choice(), selection_margin(router(hidden)[0], router)
        assert 0 < margin < 1
        moved = False
        try:
            for expert in range(len(bias)):
                for sign in (1, -1):
                    bias.copy_(saved)
                    bias[expert] += sign * 0.99 * margin
                    assert choice() == before, (expert, sign)
                    bias.copy_(saved)
                    bias[expert] += sign * 1.01 * margin
                    moved |= choice() != before
        finally:
            bias.copy_(saved)
    assert moved


def test_a_configuration_the_page_cannot_decode_gets_one_readable_reason():
    cases = [s2d2.preset("sdar-config-b").to_dict(), s2d2.preset("sdar-config-b+cost-aware").to_dict(),
             s2d2.preset("d2f").to_dict(), s2d2.preset("dynamic-baseline").to_dict(),
             _cfg("tiny", "sdar-config-b", 1.0).to_dict(), _cfg("tiny-llada2", "llada2-quality", 0.0).to_dict(),
             {**_cfg("tiny", "sdar-config-b", 0.0).to_dict(), "acceptance": "maybe"},
             s2d2.preset("sdar-config-b", policy="contextual_bandit_ucb", rng="counter").to_dict(),
             {**_cfg("tiny", "d2f-s2d2", 1.0).to_dict(), "confidence_score": "best"}]
    spec = {"alignment": "aligned"}
    got = run_module("decoding/api.js", "output = input.map((c) => m.unsupported(c, {spec: %s}));" % json.dumps(spec),
                     cases)
    assert got == ["this configuration draws random numbers: the page needs rng='counter'",
                   'policy "cost_aware" is decoded on the server only', None, None, None, None,
                   "acceptance: one of paper, sampled, greedy_exact", None,
                   "confidence_score: one of probability, margin, neg_entropy"]


def test_a_pipeline_with_no_whole_block_is_refused_as_the_server_refuses_it():
    cfg = {**s2d2.preset("d2f", gen_length=32).to_dict(), "gen_length": 20}
    with pytest.raises(ValueError) as server:
        s2d2.DecodeConfig.from_dict(cfg)
    got = run_module("decoding/api.js", "output = m.outOfBounds(input, 5, {});", cfg)
    assert got == str(server.value)


@pytest.mark.parametrize("model", list(GRID))
def test_token_texts_from_tokenizer_json_equal_the_tokenizers_decode(models, model):
    texts = run_module("tokens.js", "output = m.tokenTexts(input, 2048);",
                       json.loads((ROOT / "assets" / "web" / model / "tokenizer.json").read_text()))
    tok = models[model].tokenizer
    assert texts == [tok.decode([i]) for i in range(models[model].spec.vocab_size)]


def _onnx_runtime() -> None:
    node()
    if not (WEB / "node_modules" / "onnxruntime-node").is_dir():
        pytest.skip("onnxruntime-node is not installed: run `npm ci --prefix s2d2_web` (README, 'Set up')")


@pytest.mark.slow  # ~30-70 s per model on one core: a long decode grid in a Node subprocess
@pytest.mark.parametrize("model", list(GRID))
def test_the_page_decoder_on_the_exported_model_matches_generate_on_the_torch_model(models, model, capsys):
    """Issue 36's conformance: ids, forward kinds and counts, cache lengths and every decision identical; floats
    within 1e-4, except at a step whose forward was a coin toss for the model's MoE router (ROUTER_TIE), where
    only the floats are left uncompared. The counts per preset are printed (run with -s to see them)."""
    _onnx_runtime()
    names, prompts, _ = GRID[model]
    cases, wants, tosses = [], [], []
    with RouterMargins(models[model]) as router:
        for name in names:
            for t in _temperatures(name):
                for i, prompt in enumerate(prompts):
                    cases.append(f"{name} ({'sampled' if t else 'greedy'})")
                    router.clear()
                    wants.append(s2d2.generate(models[model], prompt, _cfg(model, name, t), seed=11 + i).trace.to_dict())
                    tosses.append(router.near_ties(wants[-1], below=ROUTER_TIE))
    jobs = [{"config": w["header"]["config"], "prompt_ids": w["header"]["prompt_ids"], "seed": w["header"]["seed"],
             "prompt_text": w["header"]["prompt_text"]} for w in wants]
    done = subprocess.run([node(), str(ROOT / "tests" / "support" / "onnx_decode.mjs"),
                           str(ROOT / "assets" / "web" / model)], input=json.dumps(jobs), text=True,
                          capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    same, total, diffs = Counter(), Counter(), []
    for key, want, got, coin_tosses in zip(cases, wants, json.loads(done.stdout), tosses):
        assert "error" not in got, got.get("error")
        assert got["header"]["model"]["attn_implementation"] == "onnxruntime"
        got["header"]["model"] = want["header"]["model"]  # where it ran (the page's runtime) is meant to differ
        found = trace_differences(want, got, coin_tosses=coin_tosses)
        total[key] += 1
        same[key] += not found
        diffs += [f"{key}: {d}" for d in found[:3]]
    with capsys.disabled():
        print(f"\nconformance, {model} (identical / total):", ", ".join(f"{k} {same[k]}/{total[k]}" for k in total))
        print(f"forwards at a router near-tie (floats of their steps not compared): {sum(map(len, tosses))} of "
              f"{sum(len(w['forwards']) for w in wants)}")
    assert diffs == []


JOB = """
import { createRequire } from "node:module";
const require = createRequire(%s);
const ort = require("onnxruntime-node");
const posts = [];
for (const request of input) await m.decodeJob(request, (message) => posts.push(message), ort);
output = posts;
"""


def test_the_workers_job_streams_each_blocks_tokens_then_the_trace_or_one_error(models):
    """decode_job.js (what worker.js runs): a token list after every block, each the final output's prefix so far,
    then the trace, equal to generate's; a request the page cannot decode gets one readable error and nothing else."""
    _onnx_runtime()
    folder = ROOT / "assets" / "web" / "tiny"
    manifest = json.loads((folder / "manifest.json").read_text())
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    want = s2d2.generate(models["tiny"], TINY_PROMPTS[0], _cfg("tiny", "sdar-config-b", 0.0), seed=5).trace.to_dict()
    h = want["header"]
    base = {"manifest": manifest, "modelUrl": str(folder / "model.onnx"), "tokenizer": tokenizer,
            "promptIds": h["prompt_ids"], "promptText": h["prompt_text"], "seed": 5}
    bad = s2d2.preset("sdar-config-b+cost-aware", rng="counter").to_dict()
    posts = run_module("decode_job.js", JOB % json.dumps((WEB / "package.json").as_uri()),
                       [{**base, "config": h["config"]}, {**base, "config": bad},
                        {**base, "config": {**h["config"], "gen_length": 100000}}])
    streamed = len(want["blocks"]) - (want["footer"]["finish_reason"] == "stop_token")  # no post after a stop
    assert [p["type"] for p in posts] == ["block"] * streamed + ["done", "error", "error"]
    final = want["footer"]["output_ids"]
    mask = manifest["decoding"]["mask_id"]
    for p in posts[:-3]:
        decoded = [t for t in p["tokens"] if t != mask]
        assert decoded == p["tokens"][: len(decoded)] and final[: len(decoded)] == decoded[: len(final)]
    counts = [len([t for t in p["tokens"] if t != mask]) for p in posts[:-3]]
    assert counts == sorted(set(counts)) and counts[0] > 0  # every block adds tokens
    assert [t for t in posts[-4]["tokens"] if t != mask][: len(final)] == final
    got = posts[-3]["trace"]
    got["header"]["model"] = want["header"]["model"]
    assert trace_differences(want, got) == []
    assert posts[-2]["message"] == 'browser decode: policy "cost_aware" is decoded on the server only'
    assert posts[-1]["message"] == "browser decode: gen_length: must be an integer in [1, 4096]"


def test_reason_line_numbers_are_formatted_as_python_formats_them():
    """policies/base.js fmt / num, the page's f"{x:.2f}" and f"{x:g}": exact binary ties round to even."""
    values = [0.125, 0.165, 0.135, 1.005, -0.001, 2.675, 0.375, -0.125, 0.625, 1.875, 1e-05, 0.5, 1234567.0, -0.0,
              3.0, 2.0 / 3.0, 0.0049999999, 12.345, -7.5, 100.125]
    got = run_module("policies/base.js", "output = input.map((x) => [m.fmt(x), m.num(x)]);", values)
    assert got == [[f"{x:.2f}", f"{x:g}"] for x in values]
