"""eval-task's progress bar and its length-limit count (s2d2/tasks/evaluate.py).

The bar used to stop one short of n (`zip` never resumed the decode generator after its last item, so the bar never
counted it) and batched mode had none; answers cut off by gen_length were scored 0 with nothing saying why. Fast
tests run `evaluate` / `evaluate_task` on a fake decode; one runs the CLI on the bundled tiny model, both modes.
"""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

import s2d2
from s2d2.tasks import arithmetic as A
from s2d2.tasks.evaluate import evaluate, evaluate_task, length_note

CFG = SimpleNamespace(gen_length=16)


def _result(seed: int, reason: str) -> SimpleNamespace:
    metrics = {"nfe": 4, "generated_tokens": 4, "finish_reason": reason}
    return SimpleNamespace(text=f"answer {seed}", metrics=metrics)


@pytest.fixture
def fake_decode(monkeypatch):
    """Replaces generate / generate_batch (the batch calls on_result per finished sequence, out of order, as the
    real engines may) with fakes; `reasons[i]` is problem i's finish reason. Returns the calls' log."""
    log: dict = {"reasons": [], "batch_calls": 0}

    def generate(model, prompt, cfg, seed=0, detailed=True, chat=None):
        return _result(seed, log["reasons"][seed])

    def generate_batch(model, prompts, cfg, seeds, *, detailed=True, batch_size=32, chat=None, on_result=None):
        log["batch_calls"] += 1
        results = [_result(s, log["reasons"][s]) for s in seeds]
        for i in reversed(range(len(results))):
            if on_result is not None:
                on_result(i, results[i])
        return results

    monkeypatch.setattr("s2d2.api.generate", generate)
    monkeypatch.setattr("s2d2.batched.generate_batch", generate_batch)
    return log


def _final_count(err: str) -> str:
    """The last `k/n` the eval bar drew on stderr."""
    counts = re.findall(r"eval:.*?(\d+/\d+)", err.replace("\r", "\n"))
    assert counts, err
    return counts[-1]


@pytest.mark.parametrize("n", [1, 3, 5])
@pytest.mark.parametrize("batch_size", [1, 2])
def test_the_bar_reaches_n_of_n_in_both_modes(fake_decode, capsys, n, batch_size):
    fake_decode["reasons"] = ["stop_token"] * n
    res = evaluate(None, CFG, A.heldout(n), progress=True, batch_size=batch_size)
    err = capsys.readouterr().err
    assert res["n"] == n and _final_count(err) == f"{n}/{n}"
    assert fake_decode["batch_calls"] == (batch_size > 1)
    assert res["hit_length_limit"] == 0 and "length limit" not in err


@pytest.mark.parametrize("batch_size", [1, 3])
def test_evaluate_task_bar_and_length_count(fake_decode, capsys, batch_size):
    fake_decode["reasons"] = ["length", "stop_token", "length", "stop_token"]
    items = [SimpleNamespace(id=str(i), prompt=f"q{i}", chat=None, gold="x") for i in range(4)]
    task = SimpleNamespace(name="fake", scorer="exact", items=items, score=lambda text, item: False)
    res = evaluate_task(None, CFG, task, progress=True, batch_size=batch_size)
    err = capsys.readouterr().err
    assert _final_count(err) == "4/4"
    assert res["hit_length_limit"] == 2 and res["n"] == 4 and res["task"] == "fake"
    assert "length limit" not in err  # (the command says it, after its result: see the CLI test)


def test_no_bar_and_no_line_without_progress(fake_decode, capsys):
    fake_decode["reasons"] = ["length"] * 2
    res = evaluate(None, CFG, A.heldout(2), progress=False)
    assert res["hit_length_limit"] == 2
    assert capsys.readouterr().err == ""


def test_length_note():
    assert length_note({"n": 3, "hit_length_limit": 0}, 32) is None
    assert length_note({"n": 3}, 32) is None
    assert length_note({"n": 3, "hit_length_limit": 3}, 32) == (
        "3 of 3 answers hit the length limit (gen_length 32): raise --gen-length")


def test_the_keys_readers_use_are_all_still_there(fake_decode):
    fake_decode["reasons"] = ["stop_token"]
    res = evaluate(None, CFG, A.heldout(1))
    for key in ("n", "correct", "accuracy", "nfe", "generated_tokens", "tokens_per_forward", "nfe_per_token",
                "mean_nfe", "num_drafts", "mean_acceptance_length", "edits", "edits_per_token", "wall_seconds",
                "texts", "hit_length_limit"):
        assert key in res


@pytest.mark.parametrize("batch_size", ["1", "2"])
def test_cli_on_the_bundled_model_counts_cut_off_answers(capsys, batch_size):
    from s2d2.__main__ import main

    assert main(["eval-task", "--model", "tiny", "--n", "2", "--gen-length", "4", "--device", "cpu",
                 "--threads", "1", "--batch-size", batch_size]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out[out.index("{"):])
    assert summary["n"] == 2 and summary["hit_length_limit"] == 2 and summary["generated_tokens"] == 8
    assert _final_count(err) == "2/2"
    assert err.rstrip().endswith("2 of 2 answers hit the length limit (gen_length 4): raise --gen-length")


def test_a_stopped_answer_is_not_counted():
    """The bundled model's answer to the first held-out problem ends with a stop token well inside 128 tokens."""
    model = s2d2.load_model("tiny", device="cpu")
    res = evaluate(model, s2d2.preset("ar", gen_length=128), A.heldout(1))
    assert res["hit_length_limit"] == 0 and res["generated_tokens"] < 128
