"""lm-evaluation-harness through the `s2d2` backend, offline, on the bundled model and the local task YAMLs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("lm_eval")

from lm_eval import simple_evaluate  # noqa: E402
from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # noqa: E402

from s2d2 import preset  # noqa: E402
from s2d2.harness.backend import S2D2LM  # noqa: E402
from s2d2.harness.loglik import log_probs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "assets" / "tasks" / "lm_eval"
SAMPLE = ROOT / "assets" / "tasks" / "gsm8k_style_sample.jsonl"
N, GEN = 6, 48

pytestmark = pytest.mark.slow  # runs lm-eval in subprocesses


@pytest.fixture(scope="module")
def model():
    from s2d2.models.loading import load_model

    return load_model("tiny")


def evaluate(lm, task: str, limit: int, chat: bool):
    manager = TaskManager(include_path=str(TASKS), include_defaults=False)
    return simple_evaluate(model=lm, tasks=[task], task_manager=manager, limit=limit, apply_chat_template=chat,
                           log_samples=True, bootstrap_iters=0)


@pytest.mark.parametrize("name", ["sdar-config-b", "dynamic-baseline"])
def test_lm_eval_metric_equals_bench_on_the_same_problems_and_seeds(model, tmp_path, name) -> None:
    from s2d2.sweeps.bench import run_grid
    from s2d2.sweeps.shards import read_all_rows
    from s2d2.sweeps.grid import Cell
    from s2d2.tasks.sets import load_task

    task = load_task(f"jsonl:{SAMPLE}", N, scorer="arithmetic")
    rows = run_grid(model, task, [Cell(name, preset(name))], tmp_path, seed=0, gen_length=GEN, progress=False)
    bench_rows = sorted(read_all_rows(tmp_path).values(), key=lambda r: r["i"])

    lm = S2D2LM.from_model(model, preset=name, gen_length=GEN, seed=0)
    results = evaluate(lm, "s2d2_gsm8k_sample", N, chat=True)
    metric = results["results"]["s2d2_gsm8k_sample"]["exact_match,strict-match"]
    assert 0 < metric < 1  # the sample has problems the tiny model solves and problems it cannot
    assert metric == pytest.approx(rows[0]["accuracy"])
    # The same decodes: request i used seed 0 + i and spent exactly bench's forwards on exactly its tokens.
    assert [(r["doc_id"], r["seed"]) for r in lm.records] == [(i, i) for i in range(N)]
    assert [r["nfe"] for r in lm.records] == [r["nfe"] for r in bench_rows]
    assert [r["generated_tokens"] for r in lm.records] == [r["generated"] for r in bench_rows]
    strict = [s for s in results["samples"]["s2d2_gsm8k_sample"] if s["filter"] == "strict-match"]
    assert [bool(s["exact_match"]) for s in strict] == [r["correct"] for r in bench_rows]
    summary = results["config"]["s2d2"]["summary"]["s2d2_gsm8k_sample"]
    assert summary["nfe_per_token"] == pytest.approx(sum(r["nfe"] for r in bench_rows) /
                                                     sum(r["generated"] for r in bench_rows))
    if name.startswith("sdar"):
        assert summary["mean_acceptance_length"] > 1 and 0 < summary["draft_acceptance_rate"] <= 1


@torch.no_grad()
def direct_logprob(model, context: list[int], cont: list[int]) -> float:
    """Sequential AR on the aligned tiny model: a MASK at each continuation position, one fresh forward each."""
    total = 0.0
    for i, token in enumerate(cont):
        ids = torch.tensor(context + cont[:i] + [model.spec.mask_id])
        logits = model.model(input_ids=ids[None], position_ids=torch.arange(len(ids))[None]).logits[0, -1:]
        total += float(log_probs(logits, model.spec.mask_id)[0, token])
    return total


def split_pair(tok, context: str, continuation: str) -> tuple[list[int], list[int]]:
    whole = tok.encode(context + continuation, add_special_tokens=False)
    ctx = tok.encode(context, add_special_tokens=False)
    return ctx, whole[len(ctx):]


def test_multiple_choice_scores_are_ar_mode_loglikelihoods(model) -> None:
    lm = S2D2LM.from_model(model, preset="ar")
    results = evaluate(lm, "s2d2_gsm8k_sample_choice", 5, chat=False)
    samples = results["samples"]["s2d2_gsm8k_sample_choice"]
    right = []
    for s in samples:
        context = s["arguments"][0][0]  # one (context, " choice") pair per choice
        choices = [pair[1] for pair in s["arguments"]]
        want = [direct_logprob(model, *split_pair(model.tokenizer, context, c)) for c in choices]
        got = [r[0][0] for r in s["resps"]]
        assert got == pytest.approx(want, abs=1e-4)
        right.append(max(range(len(want)), key=want.__getitem__) == s["doc"]["label"])
    assert results["results"]["s2d2_gsm8k_sample_choice"]["acc,none"] == pytest.approx(sum(right) / len(right))
    assert sum(right) >= 3  # the model knows its arithmetic: the gold number is usually the likeliest
    assert all(r["request"] == "loglikelihood" for r in lm.records) and len(lm.records) == 5 * 4
    # Four choices share one context: one prefill + one block-diagonal forward, split among them.
    assert sum(r["forwards"] for r in lm.records) == pytest.approx(5 * 2)


def test_rolling_loglikelihood_sums_the_windows(model) -> None:
    lm = S2D2LM.from_model(model, max_length=12)
    text = "Lucy has 14 marbles. She buys 9 more. How many marbles does Lucy have now?"
    got = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0, ("t", 0, 1))])
    tokens = model.tokenizer.encode(text, add_special_tokens=False)
    windows = [make_disjoint_window(w) for w in get_rolling_token_windows(tokens, lm.prefix_token_id, 12, 1)]
    assert len(windows) > 1
    assert got[0] == pytest.approx(sum(direct_logprob(model, list(c), list(t)) for c, t in windows), abs=1e-4)


def test_stop_sequences_end_the_decode_early_and_cut_the_text(model) -> None:
    from s2d2 import generate

    question = json.loads(SAMPLE.read_text().splitlines()[0])["question"]
    lm = S2D2LM.from_model(model, preset="sdar-config-a")
    context = lm.apply_chat_template([{"role": "user", "content": question}])
    full = generate(model, question, preset("sdar-config-a", gen_length=GEN), seed=0)
    assert "####" in full.text
    req = Instance("generate_until", {}, (context, {"until": ["####"], "max_gen_toks": GEN}), 0, ("t", 0, 1))
    (text,) = lm.generate_until([req])
    assert text == full.text.split("####")[0]
    rec = lm.records[-1]
    assert rec["finish_reason"] == "stop_sequence" and rec["nfe"] < full.metrics["nfe"]
    # max_gen_toks is the generation length (capped by a model_args gen_length)
    short = S2D2LM.from_model(model, preset="ar", gen_length=5)
    (text,) = short.generate_until([Instance("generate_until", {}, (context, {"max_gen_toks": 40}), 0, ("t", 0, 1))])
    assert short.records[-1]["generated_tokens"] == 5 and len(text) > 0


def run_cli(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "s2d2", "lm-eval", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_cli_writes_results_records_and_traces_beside_lm_evals(tmp_path) -> None:
    proc = run_cli("--include_path", str(TASKS), "--tasks", "s2d2_gsm8k_sample", "--apply_chat_template",
                   "--model_args", f"pretrained=tiny,preset=sdar-config-b,gen_length={GEN}", "--limit", "2",
                   "--output_path", str(tmp_path), "--trace", "--threads", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "exact_match,strict-match" in proc.stdout and "NFE/token" in proc.stdout
    folder = tmp_path / "tiny"
    results = json.loads(next(folder.glob("results_*.json")).read_text())
    records = [json.loads(line) for line in next(folder.glob("s2d2_requests_*.jsonl")).read_text().splitlines()]
    assert [r["doc_id"] for r in records] == [0, 1] and all(r["nfe"] > 0 for r in records)
    summary = json.loads(next(folder.glob("s2d2_summary_*.json")).read_text())
    assert summary["tasks"]["s2d2_gsm8k_sample"]["nfe"] == sum(r["nfe"] for r in records)
    assert results["config"]["s2d2"]["summary"]["s2d2_gsm8k_sample"]["nfe"] == sum(r["nfe"] for r in records)
    from s2d2 import Trace

    trace = Trace.from_json(Path(records[0]["trace"]).read_text())
    assert trace.footer.generated_length == records[0]["generated_tokens"] and trace.detailed


BLOCK_LM_EVAL = ("import sys; sys.modules['lm_eval'] = None; from s2d2.__main__ import main; "
                 "sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("args, message", [
    (["--tasks", "t", "--model_args", "preset=nope"], "preset"),
    (["--tasks", "t", "--model_args", "block_length=0"], "block_length"),
    (["--tasks", "t", "--model_args", "bogus=1"], "unknown key 'bogus'"),
    (["--tasks", "t", "--model_args", "seed=-1"], "seed"),
    (["--tasks", "t", "--limit", "0"], "--limit"),
    (["--tasks", "t", "--include_path", "/nonexistent/x"], "--include_path"),
    (["--tasks", "t", "--trace"], "--trace"),
    (["--tasks", "a b"], "--tasks"),
    (["--tasks", "t"], "lm-eval is not installed"),  # every argument is fine: only then is lm-eval imported
])
def test_cli_checks_every_argument_before_importing_lm_eval(args, message) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", BLOCK_LM_EVAL, "lm-eval", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_cli_unknown_task_is_one_line_before_the_model_loads(capsys, monkeypatch) -> None:
    from s2d2.__main__ import main

    monkeypatch.setattr(S2D2LM, "__init__", lambda *a, **k: pytest.fail("the model must not load"))
    assert main(["lm-eval", "--include_path", str(TASKS), "--tasks", "no_such_task_anywhere"]) == 2
    err = capsys.readouterr().err
    assert "unknown task 'no_such_task_anywhere'" in err and err.count("\n") == 1
