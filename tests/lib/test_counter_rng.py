"""The counter generator (s2d2/counter_rng.py) and its page-side twin (s2d2_web/counter_rng.js): known answers, the
categorical rule's edge cases, and Python and JavaScript drawing the same bits and the same indices; the page's
stream (s2d2_web/draws.js) numbering its calls as s2d2/decoding/draws.py's CounterStream does.

The JavaScript checks run the ES module under Node (marked slow: a subprocess); they skip where Node is absent."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from s2d2 import counter_rng as C
from s2d2.decoding.draws import CounterStream, categorical, uniform
from tests.support.node_runner import run_module

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "data" / "counter_rng_vectors.json").read_text())["vectors"]


def test_mix_is_splitmix64():
    # SplitMix64 seeded with 0 (Steele, Lea, Flood 2014; Vigna's splitmix64.c): its first five outputs are
    # mix(k * golden) for k = 1..5. Published values, not ours: they pin the finaliser's constants and shifts.
    want = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC, 0x1B39896A51A8749B]
    assert [C.mix(k * C.GOLDEN % 2**64) for k in range(1, 6)] == want


def test_known_answers():
    for v in VECTORS:
        key = (int(v["seed"]), v["kind"], v["call"], v["index"])
        assert C.bits(*key) == int(v["bits"]), key
        assert C.uniform(*key) == v["uniform"], key  # exact: 53 bits times a power of two


def test_uniforms_lie_in_the_unit_interval_and_every_key_word_matters():
    base = C.bits(5, 2, 3, 4)
    assert len({base, C.bits(6, 2, 3, 4), C.bits(5, 3, 3, 4), C.bits(5, 2, 4, 4), C.bits(5, 2, 3, 5)}) == 5
    u = C.uniforms(9, C.KINDS["accept"], 0, 2000)
    assert u.dtype == np.float64 and 0.0 <= u.min() and u.max() < 1.0
    assert 0.45 < u.mean() < 0.55  # 2000 draws: the mean is 0.5 +- 0.0065 (1 sd); a stuck bit moves it far more


@pytest.mark.parametrize("key, word", [((-1, 1, 0, 0), "seed"), ((2**64, 1, 0, 0), "seed"), ((0, 2**32, 0, 0), "kind"),
                                       ((0, 1, -1, 0), "call"), ((0, 1, 0, 2**32), "index"), ((True, 1, 0, 0), "seed"),
                                       ((0.5, 1, 0, 0), "seed")])
def test_keys_out_of_range_are_one_readable_error(key, word):
    with pytest.raises(ValueError, match=f"^{word}: an integer in"):
        C.bits(*key)


def test_the_categorical_rule():
    # the first index whose running sum exceeds u * total
    assert C.categorical(np.array([0.25, 0.25, 0.5]), 0.0) == 0
    assert C.categorical(np.array([0.25, 0.25, 0.5]), 0.5) == 2  # target == c[1] exactly: c[1] is not > target
    assert C.categorical(np.array([0.25, 0.25, 0.5]), 0.49) == 1
    assert C.categorical(np.array([0.0, 0.0, 3.0, 0.0]), 0.0) == 2  # zeros are never drawn, even at u = 0
    assert C.categorical(np.array([2.0, 2.0]), 0.5) == 1  # unnormalised weights: target = u * total
    assert C.categorical(np.array([0.5, 0.5, 0.0]), 1.0) == 1  # no c > target (u = 1): the last positive weight
    assert C.categorical(np.array([1.0]), 1 - 2**-53) == 0


@pytest.mark.parametrize("weights", [[], [0.0, 0.0], [0.5, -0.1], [0.5, float("nan")], [float("inf"), 1.0],
                                     [1e308, 1e308]])
def test_bad_weights_are_one_readable_error(weights):
    with pytest.raises(ValueError, match="^categorical: "):
        C.categorical(np.array(weights, dtype=np.float64), 0.5)


def categorical_cases(n_random: int = 240) -> list[dict]:
    """Weight vectors the two sides must agree on: float32 softmaxes widened to float64, zeros, near-ties,
    tiny and huge dynamic ranges, unnormalised rows; each with counter uniforms and edge uniforms."""
    gen = np.random.default_rng(7)
    rows: list[np.ndarray] = []
    for i in range(n_random):
        v = int(gen.integers(1, 3000))
        logits = gen.normal(0.0, float(gen.choice([0.1, 1.0, 5.0, 30.0])), v)
        p = np.exp(logits - logits.max()).astype(np.float32)
        p = (p / p.sum(dtype=np.float32)).astype(np.float32)  # a float32 softmax, as the decoder's probs
        if i % 3 == 0:
            p[gen.random(v) < 0.5] = 0.0  # zero-probability entries (top-k / top-p / the mask token)
        if i % 5 == 0 and v > 1:
            j = int(gen.integers(0, v - 1))
            p[j + 1] = np.nextafter(p[j], np.float32(1.0))  # a near-tie between neighbours
        if not p.any():
            p[0] = 1.0
        rows.append(p.astype(np.float64) * (1.0 if i % 7 else 3.7))  # some rows are not normalised
    rows += [np.array([1.0]), np.array([0.0, 1e-45, 0.0]), np.array([1e-300, 1.0, 1e-300]),
             np.array([0.25, 0.25, 0.5]), np.array([1 / 3] * 3), np.full(1000, 1e-3)]
    cases = []
    for i, w in enumerate(rows):
        us = [C.uniform(11, C.KINDS["draft"], i, k) for k in range(3)] + [0.0, 0.5, 1 - 2**-53, 1.0]
        c = np.add.accumulate(w)
        edge = float(c[int(gen.integers(0, len(w)))] / c[-1])  # u * total lands on (or one rounding off) a c[i]
        us += [min(x, 1 - 2**-53) for x in (np.nextafter(edge, 0.0), edge, np.nextafter(edge, 1.0))]
        cases.append({"w": w.tolist(), "u": us, "want": [C.categorical(w, u) for u in us]})
    return cases


@pytest.mark.slow
def test_javascript_gives_the_same_bits_and_uniforms():
    got = run_module("counter_rng.js", """
        output = input.map(v => [m.bits(BigInt(v.seed), v.kind, v.call, v.index).toString(),
                                 m.uniform(BigInt(v.seed), v.kind, v.call, v.index)]);""", VECTORS)
    assert got == [[v["bits"], v["uniform"]] for v in VECTORS]
    assert run_module("counter_rng.js", "output = m.KINDS;", None) == C.KINDS


@pytest.mark.slow
def test_javascript_draws_the_same_categorical_indices():
    cases = categorical_cases()
    assert sum(len(c["w"]) for c in cases) > 100_000
    got = run_module("counter_rng.js", """
        output = input.map(c => { const w = Float64Array.from(c.w); return c.u.map(u => m.categorical(w, u)); });""",
                     cases)
    assert got == [c["want"] for c in cases]
    rows = [[0.1, 0.2, 0.7], [0.0, 1.0], [0.5, 0.5]]  # categoricalRows: row i takes uniform index i of the call
    got_rows = run_module("counter_rng.js", "output = m.categoricalRows(input, 3n, 1, 9);", rows)
    assert got_rows == C.categorical_rows(np.array([r + [0.0] * (3 - len(r)) for r in rows]), 3, 1, 9)


@pytest.mark.slow
def test_javascript_refuses_what_python_refuses():
    got = run_module("counter_rng.js", """
        const tries = [() => m.bits(-1, 1, 0, 0), () => m.bits(0, 2 ** 32, 0, 0), () => m.bits(0, 1, 0.5, 0),
                       () => m.categorical([0, 0], 0.5), () => m.categorical([0.5, -0.1], 0.5),
                       () => m.categorical([], 0)];
        output = tries.map(f => { try { f(); return "no error"; } catch (e) { return e.message.split(":")[0]; } });""",
                     None)
    assert got == ["seed", "kind", "call", "categorical", "categorical", "categorical"]


@pytest.mark.slow
def test_the_page_stream_numbers_its_calls_as_the_python_stream():
    """The same sequence of calls (acceptance u, a draft row set, a residual, an AR token) on both streams."""
    rows = [[0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.5, 0.0], [0.7, 0.1, 0.1, 0.1]]
    py = CounterStream(2**40 + 17, "cpu")
    want = [uniform(py, 5, torch.device("cpu")).tolist(),
            categorical(py, torch.tensor(rows, dtype=torch.float64), "draft").tolist(),
            categorical(py, torch.tensor(rows[1], dtype=torch.float64), "residual").item(),
            uniform(py, 2, torch.device("cpu")).tolist(),
            categorical(py, torch.tensor(rows[:1], dtype=torch.float64), "ar").tolist()]
    got = run_module("draws.js", """
        const s = new m.CounterStream(2n ** 40n + 17n);
        output = [Array.from(s.uniforms(5)), s.categorical(input, "draft"), s.categorical([input[1]], "residual")[0],
                  Array.from(s.uniforms(2)), s.categorical([input[0]], "ar"), s.calls];""", rows)
    assert got == want + [py.calls]
