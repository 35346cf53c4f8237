"""Batch > 1 with batch-1 answers (issue 24): `s2d2.generate_batch` against `s2d2.generate`, sequence by sequence.

Every golden case (tests/support/golden_cases.py: every policy and estimator, greedy and sampled, KV reuse / fused commit
/ adaptive blocks / trim, AR, the LLaDA2 editing loop, both families) and the D2F pipeline on both D2F families run
in float64 inside a batch of prompts of different lengths with mixed seeds, fewer slots than prompts (so finished
sequences are replaced from the queue); each sequence's trace must equal its own batch-1 trace apart from wall
times: ints, strings and bools exactly (tokens, NFE, every decision), floats within FLOAT64
(tests/support/trace_compare.py). Batched forwards differ from single ones by summation order only (~1e-16
relative in float64), so the bound has room to spare and still catches any real difference (a wrong row or a
dropped cache column moves logits by far more).
"""
from __future__ import annotations

import threading
from typing import Any, Optional

import pytest
import torch

from fixtures import tiny_d2f as M
import s2d2
from tests.support.tiny_models import tiny_qwen2, tiny_qwen3
from tests.support.batch_cases import assert_batch_equals_single, batch_prompts, model64
from tests.support.trace_compare import trace_mismatch
from tests.support.golden_cases import CASES, GEN_LENGTH, PROMPTS, bundled_available, config_for, stable
from s2d2.decoding.batch import Scheduler, group_requests
from s2d2.sweeps.agreement import same_output

EAGER_TOL = (1e-5, 1e-7)  # transformers' eager attention takes its softmax in float32 whatever the model's dtype


def test_the_comparison_can_fail():
    assert trace_mismatch({"p": [0.5, 1]}, {"p": [0.5 + 1e-15, 1]}) is None
    assert "p[0]" in trace_mismatch({"p": [0.5, 1]}, {"p": [0.5 + 1e-6, 1]})
    assert "p[1]" in trace_mismatch({"p": [0.5, 1]}, {"p": [0.5, 2]})


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c[1] == "llada2" else c for c in CASES],
                         ids=[c[0] for c in CASES])  # the LLaDA2 cases take seconds each: in the full suite only
def test_every_golden_case_decodes_in_a_batch_as_alone(case):
    name, model_name, key, seed, settings = case
    if model_name in ("bundled", "llada2") and not bundled_available(model_name):
        pytest.skip("a bundled model is not trained yet")
    prompts = batch_prompts(model_name, key)
    seeds = [seed, 7, seed + 11, 3, 12345]
    assert_batch_equals_single(model64(model_name), prompts, config_for(model_name, settings), seeds, batch_size=3)


@pytest.fixture(scope="module")
def d2f(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch-d2f")
    return {"llada": s2d2.load_model(M.write_llada(tmp / "llada"), device="cpu", dtype=torch.float64),
            "dream": s2d2.load_model(M.write_dream(tmp / "dream"), device="cpu", dtype=torch.float64)}


@pytest.mark.parametrize("fam", ["llada", "dream"])
@pytest.mark.parametrize("preset,changes", [
    ("d2f", {}),
    ("d2f-s2d2", dict(policy="always", temperature=1.0, acceptance="sampled")),
    ("d2f-s2d2", dict(policy="contextual_bandit_ucb")),
], ids=["d2f", "s2d2-always-sampled", "s2d2-ucb"])
def test_the_d2f_pipeline_decodes_in_a_batch_as_alone(d2f, fam, preset, changes):
    cfg = s2d2.preset(preset, block_length=4, gen_length=24, confidence_threshold=0.5, **changes)
    prompts = [[5, 9, 17, 33, 2, 71, 3], [4, 8], list(range(10, 40)), [5, 9, 17, 33, 2, 71, 3]]
    assert_batch_equals_single(d2f[fam], prompts, cfg, [0, 1, 2, 3], batch_size=4)


def test_lean_traces_and_mixed_configs_share_a_batch():
    """AR, a baseline and S2D2 (different forward shapes) in one batch, lean traces: each as alone."""
    model = model64("aligned")
    cfgs = [s2d2.DecodeConfig(gen_length=24, method="ar"),
            s2d2.DecodeConfig(gen_length=24, method="diffusion", block_length=4),
            s2d2.DecodeConfig(gen_length=24, method="s2d2", policy="always", temperature=1.0, block_length=8),
            s2d2.DecodeConfig(gen_length=24, method="s2d2", policy="always", trim_verify=True, block_length=8)]
    assert_batch_equals_single(model, [PROMPTS["a"], PROMPTS["b"], PROMPTS["c"], [1, 2]], cfgs, [0, 1, 2, 3],
                               batch_size=4, detailed=False)


@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_greedy_exact_always_verify_stays_ar_identical_per_sequence(family):
    model = tiny_qwen3(seed=2) if family == "aligned" else tiny_qwen2(seed=2)
    prompts = [[5, 6, 7, 8, 9, 10, 11], list(range(20, 52)), [3, 4], list(range(60, 75))]
    lossless = s2d2.generate_batch(model, prompts, s2d2.preset("lossless", gen_length=40), batch_size=4,
                                   detailed=False)
    always = s2d2.generate_batch(model, prompts, s2d2.DecodeConfig(
        gen_length=40, method="s2d2", policy="always", acceptance="greedy_exact", cache_ver=True, block_length=8),
        batch_size=4,
        detailed=False)
    for prompt, a, b in zip(prompts, lossless, always):
        ar = s2d2.generate(model, prompt, s2d2.preset("ar", gen_length=40), detailed=False)
        stopped = [r.trace.footer.stop_position is not None for r in (ar, a, b)]
        assert same_output(ar.token_ids, stopped[0], a.token_ids, stopped[1])
        assert same_output(ar.token_ids, stopped[0], b.token_ids, stopped[2])
        assert len(a.token_ids) >= 16 or stopped[1]  # a real comparison, not an empty prefix
        assert a.metrics["verify_rate"] == 1.0 == b.metrics["verify_rate"]


def test_the_ledger_accounts_for_every_forward():
    model = model64("aligned")
    prompts = [PROMPTS["a"], PROMPTS["b"], PROMPTS["c"], [1, 2, 3], [9] * 20]
    cfg = s2d2.DecodeConfig(gen_length=24, method="s2d2", policy="always", temperature=1.0, block_length=8)
    results = s2d2.generate_batch(model, prompts, cfg, batch_size=2)
    ledger = results[0].batch
    assert all(r.batch is ledger for r in results)
    served = {(s, f) for bf in ledger.forwards for s, f in zip(bf.sequences, bf.seq_forwards)}
    want = {(i, f.index) for i, r in enumerate(results) for f in r.trace.forwards}
    assert served == want  # every sequence-forward was served exactly once, by one batch forward
    summary = ledger.summary()
    assert summary["sequence_forwards"] == sum(r.metrics["nfe"] for r in results)
    assert summary["forwards"] < summary["sequence_forwards"]  # forwards were shared
    assert max(len(bf.sequences) for bf in ledger.forwards) <= 2  # never more live sequences than slots
    assert summary["query_tokens"] == sum(r.metrics["query_tokens"] for r in results)
    assert summary["padded_query_tokens"] >= summary["query_tokens"]
    assert summary["sequences_forward_wall_s"] == pytest.approx(sum(r.trace.footer.forward_wall_s for r in results),
                                                                rel=1e-9)
    assert summary["sequences_forward_wall_s"] > summary["forward_wall_s"]  # shared walls count once per batch
    for bf in ledger.forwards:  # a sequence's forward record carries the wall of the batch forward that served it
        for s, f in zip(bf.sequences, bf.seq_forwards):
            assert results[s].trace.forwards[f].wall_s == bf.wall_s
            assert results[s].trace.forwards[f].query_tokens == bf.queries[bf.sequences.index(s)]


def test_a_batch_of_one_is_generate_exactly():
    model = model64("shifted")
    cfg = s2d2.DecodeConfig(gen_length=24, method="s2d2", policy="contextual_bandit_ucb", temperature=1.0,
                            block_length=8)
    got = s2d2.generate_batch(model, [PROMPTS["a"]], cfg, [3], batch_size=1)[0]
    want = s2d2.generate(model, PROMPTS["a"], cfg, seed=3)
    assert stable(got.trace.to_dict()) == stable(want.trace.to_dict())  # exact: the same single forwards


def test_refusals_are_one_readable_message():
    model = tiny_qwen3(seed=0)
    cfg = s2d2.DecodeConfig(gen_length=8)
    cases = [
        (dict(prompts=[]), "prompts: empty"),
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=10**6), "batch_size"),
        (dict(seeds=[1]), "seeds: 1 given for 2 prompts"),
        (dict(seeds=[1, -1]), "seeds"),
        (dict(prompts=[[1, 2], [299]]), "prompts[1]: prompt: contains the mask token"),
        (dict(cfg=[cfg]), "cfg: one DecodeConfig, or a list of 2"),
    ]
    for changes, words in cases:
        args = dict(prompts=[[1, 2], [3]], cfg=cfg, seeds=None, batch_size=2)
        args.update(changes)
        with pytest.raises(ValueError) as e:
            s2d2.generate_batch(model, args.pop("prompts"), args.pop("cfg"), args.pop("seeds"), **args)
        assert words in str(e.value)


def test_a_batch_validates_each_distinct_config_once_not_once_per_prompt(monkeypatch):
    """Validation is a rule over the batch's configs, not its rows: eight prompts with one config validate it once,
    two configs twice; a bad one is still named by its first prompt's index."""
    model = tiny_qwen3(seed=0)
    calls: list[int] = []
    check = s2d2.DecodeConfig.validate
    monkeypatch.setattr(s2d2.DecodeConfig, "validate", lambda self: (calls.append(id(self)), check(self))[1])
    good, other = s2d2.DecodeConfig(gen_length=4), s2d2.DecodeConfig(gen_length=4, block_length=2)
    s2d2.generate_batch(model, [[1, 2], [3]] * 4, good, batch_size=8)
    assert calls == [id(good)]
    calls.clear()
    s2d2.generate_batch(model, [[1, 2], [3]] * 4, [good, other] * 4, batch_size=8)
    assert sorted(calls) == sorted([id(good), id(other)])
    bad = s2d2.DecodeConfig(gen_length=0)
    with pytest.raises(ValueError, match=r"^prompts\[1\]: gen_length"):
        s2d2.generate_batch(model, [[1, 2], [3], [4]], [good, bad, bad], batch_size=2)


def test_the_static_backend_batches_and_flash_attention_is_refused_above_batch_one():
    model = tiny_qwen3(seed=0)
    model.set_backend("static")  # a slot per live sequence (tests/lib/test_static_batch.py has the rest)
    cfg = s2d2.DecodeConfig(gen_length=8, block_length=4)
    assert_batch_equals_single(model, [[1, 2], [3]], cfg, [0, 1], batch_size=2)
    assert model.static.slots == 2 and model.static.stats.batched_forwards > 0
    flash = tiny_qwen3(seed=0)
    flash.attn_implementation = "flash_attention_2"  # cannot read the explicit per-row masks a batch needs
    with pytest.raises(ValueError, match="batch_size > 1: it needs attn_implementation 'sdpa' or 'eager'"):
        s2d2.generate_batch(flash, [[1, 2], [3]], cfg, batch_size=2)
    # Eager attention batches too (an additive mask), but transformers' eager softmax runs in float32 even in a
    # float64 model, so summing over more (masked, exactly zero) columns moves probabilities by ~1e-7: decisions
    # and tokens stay exact, floats are held to EAGER_TOL.
    eager = tiny_qwen3(seed=0, attn="eager")
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8, 9], [10]]
    assert_batch_equals_single(eager, prompts, s2d2.DecodeConfig(gen_length=12, method="s2d2", policy="always",
                                                                 block_length=4), [0, 1, 2], batch_size=3,
                               tol=EAGER_TOL)
    one = s2d2.generate_batch(model, [[1, 2]], cfg, batch_size=1)[0]
    assert one.token_ids == s2d2.generate(model, [1, 2], cfg).token_ids


class _Fake:
    """A model stub for the scheduler alone: its forward returns the query count as a one-element tensor."""

    device = torch.device("cpu")

    def forward(self, cache, input_ids, positions, attention, keep, last=None, rows=None):
        return torch.tensor([float(input_ids.shape[0])])


class _Cache:
    def get_seq_length(self) -> int:
        return 0


def test_an_error_in_one_sequence_stops_the_batch_and_releases_every_thread():
    before = threading.active_count()

    def ok(model):
        for q in range(1, 6):
            assert float(model.forward(_Cache(), torch.zeros(q), torch.zeros(q), "full", 0)[0]) == q
        return "done"

    def bad(model):
        model.forward(_Cache(), torch.zeros(2), torch.zeros(2), "full", 0)
        raise RuntimeError("sequence 1 broke")

    assert Scheduler(_Fake(), 3).run([ok, ok, ok, ok]) == ["done"] * 4  # no forward_batch: one by one
    with pytest.raises(RuntimeError, match="sequence 1 broke"):
        Scheduler(_Fake(), 3).run([ok, bad, ok, ok])
    assert threading.active_count() == before


def test_a_forward_shared_with_nobody_runs_on_the_sequences_own_thread():
    """A lone request is the batch-1 call on the sequence's thread (one pool of torch threads per lone decode);
    a shared one runs on the scheduler's. Both are in the ledger, a failing lone one with its error."""
    seen: list[tuple[str, int]] = []

    class Threads(_Fake):
        def forward(self, cache, input_ids, positions, attention, keep, last=None, rows=None):
            if int(input_ids.shape[0]) == 7:
                raise ValueError("seven is refused")
            seen.append((threading.current_thread().name, 1))
            return super().forward(cache, input_ids, positions, attention, keep)

        def forward_batch(self, requests):
            seen.append((threading.current_thread().name, len(requests)))
            return [torch.tensor([float(r.input_ids.shape[0])]) for r in requests]

    def job(queries):
        def run(model):
            for q in queries:
                try:
                    assert float(model.forward(_Cache(), torch.zeros(q), torch.zeros(q), "full", 0)[0]) == q
                except ValueError:
                    pass  # the sequence's own loop handles its forward's error, as at batch 1
            return "done"
        return run

    scheduler = Scheduler(Threads(), 2, fixed_tokens=10_000)
    assert scheduler.run([job([3, 3]), job([3, 3, 7])]) == ["done", "done"]
    shared = [name for name, n in seen if n == 2]
    lone = [name for name, n in seen if n == 1]
    assert shared and all(not name.startswith("s2d2-seq-") for name in shared)
    assert lone == []  # the 7-query forward (the only one alone) failed on its own thread
    assert [(len(f.sequences), f.error) for f in scheduler.ledger.forwards] == [
        (2, ""), (2, ""), (1, "ValueError: seven is refused")]
    seen.clear()
    assert Scheduler(Threads(), 1).run([job([2, 3])]) == ["done"]
    assert [name for name, _ in seen] == ["s2d2-seq-0", "s2d2-seq-0"]


def test_groups_have_the_least_modelled_cost():
    class W:
        def __init__(self, i, q):
            self.index, self.pending = i, type("R", (), {"input_ids": torch.zeros(q)})()

    ws = [W(0, 8), W(1, 4), W(2, 100), W(3, 5), W(4, 16), W(5, 90)]
    # cost = 32 per forward + members x longest query: [4 5 8 16] 96 + [90 100] 232 beats every other split
    assert [[w.index for w in g] for g in group_requests(ws, 32)] == [[1, 3, 0, 4], [5, 2]]
    assert [[w.index for w in g] for g in group_requests(ws, 1000)] == [[1, 3, 0, 4, 5, 2]]  # fixed cost rules
    assert [[w.index for w in g] for g in group_requests(ws, 0)] == [[1], [3], [0], [4], [5], [2]]  # no padding


def _science(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A results file's cells without what depends on timing."""
    timing = {"wall_per_token", "speedup_wall_vs_ar", "speedup_wall_vs_baseline"}
    return [{k: v for k, v in c.items() if k not in timing} for c in data["cells"]]


@pytest.mark.slow  # seconds: a subprocess or a whole CLI run (left out of the quick subset)
def test_bench_batch_size_gives_the_science_of_batch_one(tmp_path, capsys):
    """`python -m s2d2 bench --batch-size N` (float64, so exact): the same results file as --batch-size 1 but for
    wall times, and the rank file holds batch 1's rows (outputs, NFE, acceptance) item for item."""
    import json

    from s2d2.__main__ import main
    from s2d2.sweeps.shards import read_all_rows

    base = ["bench", "--model", "tiny", "--grid", "quick", "--problems", "5", "--gen-length", "24", "--dtype",
            "float64", "--device", "cpu", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "one"), "--batch-size", "1"]) == 0
    assert main([*base, "--out", str(tmp_path / "many"), "--batch-size", "7"]) == 0
    one, many = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "many"))
    assert (one["meta"]["batch_size"], many["meta"]["batch_size"]) == (1, 7)
    assert _science(one) == _science(many)
    rows = [sorted(({f: v for f, v in r.items() if f not in ("wall_s", "cell")} | {"name": k[0].rsplit("-", 1)[0]}
                    for k, r in read_all_rows(tmp_path / d).items()), key=lambda r: (r["name"], r["i"]))
            for d in ("one", "many")]
    assert rows[0] == rows[1] and len(rows[0]) == 6 * 5
    keys = [{k[0] for k in read_all_rows(tmp_path / d)} for d in ("one", "many")]
    assert not keys[0] & keys[1]  # batch-share walls never mix with batch-1 rows in one folder
    for bad in ("0", "x", "1000"):
        assert main([*base, "--out", str(tmp_path / "bad"), "--batch-size", bad]) == 2
        assert capsys.readouterr().err.strip().startswith("error: --batch-size")


def test_lm_eval_generate_until_batched_gives_the_answers_of_one_at_a_time():
    """The lm-eval backend's generate_until with batch_size 3 (float64): the texts, seeds, NFE and stop reasons
    of batch_size 1, request for request, stop strings included."""
    import json
    from pathlib import Path

    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from s2d2.harness.backend import S2D2LM

    sample = Path(__file__).resolve().parents[2] / "assets" / "tasks" / "gsm8k_style_sample.jsonl"
    questions = [json.loads(line)["question"] for line in sample.read_text().splitlines()[:5]]
    model = model64("bundled")

    def requests(lm):
        out = []
        for i, q in enumerate(questions):
            context = lm.apply_chat_template([{"role": "user", "content": q}])
            kwargs = {"until": ["####"] if i % 2 == 0 else [], "max_gen_toks": 40}
            out.append(Instance("generate_until", {}, (context, kwargs), i, ("t", i, 1)))
        return out

    runs = []
    for batch in (1, 3):
        lm = S2D2LM.from_model(model, preset="sdar-config-b", seed=4, batch_size=batch)
        assert lm.args.batch_size == batch
        texts = lm.generate_until(requests(lm), disable_tqdm=True)
        keep = ("doc_id", "seed", "nfe", "generated_tokens", "finish_reason")
        runs.append((texts, [{k: r[k] for k in keep} for r in lm.records]))
    assert runs[0] == runs[1]
    assert {r["finish_reason"] for r in runs[0][1]} >= {"stop_sequence"}  # the stop strings were exercised
    with pytest.raises(ValueError, match="batch_size"):
        S2D2LM.from_model(model, batch_size=0)
    static = model64("bundled")
    static.set_backend("static")  # batches too, a slot per sequence: the same answers
    lm = S2D2LM.from_model(static, preset="sdar-config-b", seed=4, batch_size=3, backend="static")
    texts = lm.generate_until(requests(lm), disable_tqdm=True)
    assert (texts, [{k: r[k] for k in keep} for r in lm.records]) == runs[0]
    assert static.static.slots >= 2 and static.static.stats.batched_forwards > 0


def test_lm_eval_says_so_when_a_chat_model_runs_without_its_template(caplog):
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from s2d2.harness.backend import S2D2LM

    lm = S2D2LM.from_model(model64("bundled"), preset="ar", gen_length=4)
    req = Instance("generate_until", {}, ("What is 2 + 2?", {"max_gen_toks": 4}), 0, ("t", 0, 1))
    with caplog.at_level("WARNING"):
        lm.generate_until([req], disable_tqdm=True)
    assert sum("--apply_chat_template" in r.getMessage() for r in caplog.records) == 1
    caplog.clear()
    lm.apply_chat_template([{"role": "user", "content": "x"}])
    fresh = S2D2LM.from_model(model64("bundled"), preset="ar", gen_length=4)
    fresh.apply_chat_template([{"role": "user", "content": "x"}])
    with caplog.at_level("WARNING"):
        fresh.generate_until([req], disable_tqdm=True)
    assert not any("--apply_chat_template" in r.getMessage() for r in caplog.records)


def test_eval_task_batch_size_gives_the_answers_of_one_at_a_time(tmp_path, capsys):
    import json

    from s2d2.__main__ import main

    base = ["eval-task", "--model", "tiny", "--preset", "sdar-config-b", "--n", "5", "--gen-length", "32",
            "--dtype", "float64", "--device", "cpu"]
    outs = []
    for batch in ("1", "4"):
        assert main([*base, "--batch-size", batch, "--out", str(tmp_path / f"{batch}.json")]) == 0
        data = json.loads((tmp_path / f"{batch}.json").read_text())
        outs.append({k: v for k, v in data.items() if k != "wall_seconds"})
    assert outs[0] == outs[1] and len(outs[0]["texts"]) == 5
    capsys.readouterr()
    assert main([*base, "--batch-size", "0"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --batch-size")


def test_cost_aware_routing_in_a_batch_routes_as_alone_with_the_same_table():
    """A cost-aware policy routes every sequence of a batch with one frozen table; given that table, batch 1 makes
    exactly the same decisions (a made-up table whose verify is dear, so the routing has decisions to make)."""
    from s2d2.trace import CostTable, ForwardCost
    from s2d2.trace.records import FORWARD_KINDS

    table = CostTable("measured", 0, [ForwardCost(k, 0.0022 if k.startswith("verify") else 0.002, 1e-4, 10)
                                      for k in FORWARD_KINDS])
    model = model64("aligned")
    cfg = s2d2.preset("sdar-config-b+cost-aware", gen_length=24, block_length=8, temperature=1.0,
                      cost_skip_value="all")
    prompts = [PROMPTS["a"], PROMPTS["c"], [4, 4, 4]]
    batch = s2d2.generate_batch(model, prompts, cfg, [0, 1, 2], batch_size=3, costs=table)
    routes = set()
    for i, got in enumerate(batch):
        want = s2d2.generate(model, prompts[i], cfg, seed=i, costs=table)
        assert trace_mismatch(got.trace, want.trace) is None
        assert got.trace.header.costs == table
        routes |= {s.decision.verify for s in got.trace.steps if s.decision is not None}
    assert routes == {True, False}  # both routes taken: the table matters


class _GrowCache:
    """A cache stub that counts its positions (what a forward appended) and can be cropped."""

    def __init__(self) -> None:
        self.n = 0

    def get_seq_length(self) -> int:
        return self.n

    def crop(self, length: int) -> None:
        self.n = length


class _Batched(_Fake):
    """A batching stub: each request's reply is its query count, and its `keep` positions are appended to its cache
    before the forward can fail (as a failure late in a real forward would leave them). `fails(requests)` says
    what the forward raises, or None."""

    def __init__(self, fails) -> None:
        self.fails = fails

    def forward_batch(self, requests):
        for r in requests:
            r.cache.n += r.keep
        problem = self.fails(requests)
        if problem is not None:
            raise problem
        return [torch.tensor([float(r.input_ids.shape[0])]) for r in requests]

    def forward(self, *request):  # a lone forward (the scheduler's call for a group of one) behaves the same
        from s2d2.models.base import ForwardRequest

        return self.forward_batch([ForwardRequest(*request)])[0]


def _poisoned(requests):
    return ValueError("request poisoned") if any(bool((r.input_ids < 0).any()) for r in requests) else None


def _decode(poison_at=None):
    """A job of three forwards (2 queries, keep 1) over its own cache; the forward at `poison_at` is bad."""
    def job(model):
        cache = _GrowCache()
        for i in range(3):
            ids = torch.full((2,), -1 if i == poison_at else 0)
            assert float(model.forward(cache, ids, torch.zeros(2), "full", 1)[0]) == 2
        return cache.n  # 3: a failed shared forward's appends were cropped before the lone retry

    return job


def _held(batch):
    """Hold a LiveBatch (a job waiting inside it) until the returned event is set, so jobs submitted meanwhile are
    admitted in one step."""
    release, holding = threading.Event(), threading.Event()
    batch.submit(lambda m: (holding.set(), release.wait(120))[1])
    assert holding.wait(120)
    return release


def test_a_failing_shared_forward_fails_only_the_sequence_whose_request_fails():
    from s2d2.decoding.live_batch import LiveBatch

    batch = LiveBatch(_Batched(_poisoned), max_batch=4, fixed_tokens=10_000)
    release = _held(batch)
    ledger = batch.ledger  # this busy period's ledger
    a, bad, b = batch.submit(_decode()), batch.submit(_decode(poison_at=1)), batch.submit(_decode())
    release.set()
    assert a.outcome(120) == 3 and b.outcome(120) == 3
    with pytest.raises(ValueError, match="request poisoned"):
        bad.outcome(120)
    shapes = [(len(f.sequences), bool(f.error)) for f in ledger.forwards]
    # the first forward shared by three, the second failed shared then retried alone, the third shared by two
    assert shapes == [(3, False), (3, True), (1, False), (1, True), (1, False), (2, False)]
    summary = ledger.summary()
    assert summary["forwards"] == 6 and summary["failed_forwards"] == 2
    assert summary["sequence_forwards"] == 3 + 1 + 1 + 2  # each sequence's forwards served, counted once
    batch.close()


@pytest.mark.parametrize("kind", ["oom", "broken"])
def test_a_shared_forward_that_fails_for_everyone(kind):
    """Out of memory at the shared shape: the lone retries fit, every sequence gets its answer. A broken model:
    every retry fails too, every sequence ends with the error, and the batch goes on serving."""
    from s2d2.decoding.live_batch import LiveBatch

    def fails(requests):
        if kind == "oom":
            return RuntimeError("out of memory") if len(requests) > 1 else None
        return RuntimeError("the weights are broken")

    batch = LiveBatch(_Batched(fails), max_batch=4, fixed_tokens=10_000)
    release = _held(batch)
    tickets = [batch.submit(_decode()) for _ in range(3)]
    release.set()
    for t in tickets:
        if kind == "oom":
            assert t.outcome(120) == 3
        else:
            with pytest.raises(RuntimeError, match="broken"):
                t.outcome(120)
    assert batch.submit(lambda m: "next").outcome(120) == "next"
    batch.close()
