"""Every decision of a decode reads probabilities computed in float64, in Python (s2d2/decoding/sampling.py,
`token_distribution`) and in the page (s2d2_web/decoding/sampling.js), so which drafts commit does not depend on the
CPU kernels ATen dispatches to (ATEN_CPU_CAPABILITY: default, avx2, the machine's best) nor on which side decoded.

Why (issue 36): torch's float32 softmax differs by up to ~1e-6 near p = 1 between kernel sets, and the LLaDA2 editing
loop's drafts often sit 5e-7 apart at p ~ 0.9999, so under `default` the top-confidence pick went to another mask
than the page's. The rows below are built with near-ties 1e-10 apart, which float32 cannot resolve at all.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.support.node_runner import ROOT, run_module

CAPABILITIES = ("default", "avx2", "")  # "" = the machine's own best kernels
V, PAIRS, MASK = 512, 8, 7


def near_tie_logits() -> np.ndarray:
    """[2 * PAIRS, V] float32 logits, peaked (top probability ~0.9999); row 2k+1 is row 2k with its top logit one
    float32 step higher, so its top probability is larger by ~1e-10 (below float32's resolution near 1)."""
    rng = np.random.default_rng(36)
    rows = []
    for _ in range(PAIRS):
        row = rng.normal(0.0, 1.0, V).astype(np.float32)
        row[rng.integers(V)] = np.float32(12.0 + rng.random())
        up = row.copy()
        top = int(np.argmax(up))
        up[top] = np.nextafter(up[top], np.float32(np.inf))
        rows += [row, up]
    return np.stack(rows)


def exact_top_probabilities(logits: np.ndarray) -> list[float]:
    """The top probability of each row (mask token excluded) with an exactly rounded sum (math.fsum)."""
    out = []
    for row in logits.astype(np.float64):
        row = np.delete(row, MASK)
        m = row.max()
        out.append(1.0 / math.fsum(math.exp(x - m) for x in row))
    return out


def ranking(values: list[float]) -> list[int]:
    """Row indices by value, largest first (ties: lower index first, as the remasking rule's stable sort)."""
    return sorted(range(len(values)), key=lambda i: (-values[i], i))


PROBE = """
import json, sys, numpy as np, torch, s2d2
from s2d2.decoding.sampling import token_distribution
logits = torch.tensor(json.load(sys.stdin), dtype=torch.float32)
probs = token_distribution(logits, s2d2.DecodeConfig(), %d)
print(json.dumps({"p": probs.max(dim=-1).values.tolist(), "dtype": str(probs.dtype),
                  "capability": torch.backends.cpu.get_cpu_capability()}))
""" % MASK


def _python_p(capability: str, logits: np.ndarray) -> dict:
    """Python's top probabilities in a fresh process whose ATen uses the `capability` kernel set."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE], input=json.dumps(logits.tolist()), text=True,
                          capture_output=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_near_tie_rows_are_beyond_float32():
    """The fixture's pairs differ by less than a float32 step at their p, so a float32 softmax cannot rank them."""
    exact = exact_top_probabilities(near_tie_logits())
    gaps = [exact[2 * k + 1] - exact[2 * k] for k in range(PAIRS)]
    assert all(0 < g < np.spacing(np.float32(exact[2 * k])) for k, g in enumerate(gaps)), gaps


@pytest.mark.slow  # three fresh Python processes importing torch
def test_confidences_rank_alike_on_every_cpu_kernel_set():
    logits = near_tie_logits()
    want = ranking(exact_top_probabilities(logits))
    got = {c: _python_p(c, logits) for c in CAPABILITIES}
    for c, out in got.items():
        assert ranking(out["p"]) == want, f"ATEN_CPU_CAPABILITY={c!r} ({out['capability']})"
        assert out["dtype"] == "torch.float64", c
    base = got[""]["p"]
    for c, out in got.items():  # float64 paths differ in the last bits only (exp's last ulp, summation order)
        assert max(abs(a - b) for a, b in zip(out["p"], base)) < 1e-14, c


def test_the_page_computes_the_same_confidences_and_entropies_as_python():
    """tokenDistribution and entropy (sampling.js) against token_distribution and entropy (sampling.py), greedy and
    at temperature 0.7 with top-k 40 and top-p 0.9: equal to 1e-14, the near-tie pairs ranked as the exact sums."""
    import torch

    import s2d2
    from s2d2.decoding.sampling import entropy, token_distribution

    logits = near_tie_logits()
    for cfg in (s2d2.DecodeConfig(), s2d2.DecodeConfig(temperature=0.7, top_k=40, top_p=0.9)):
        probs = token_distribution(torch.from_numpy(logits.copy()), cfg, MASK)
        want = {"p": probs.max(dim=-1).values.tolist(), "h": entropy(probs).tolist()}
        got = run_module("decoding/sampling.js", """
const probs = m.tokenDistribution(input.rows.map((r) => Float32Array.from(r)), input.cfg, input.mask);
output = {p: probs.map((r) => m.argmax(r)[1]), h: m.entropy(probs)};""",
                         {"rows": logits.tolist(), "cfg": cfg.to_dict(), "mask": MASK})
        for key in ("p", "h"):
            assert max(abs(a - b) for a, b in zip(got[key], want[key])) < 1e-14, (cfg.temperature, key)
        if not cfg.do_sample:
            exact = ranking(exact_top_probabilities(logits))
            assert ranking(got["p"]) == exact and ranking(want["p"]) == exact


REPLAY = """
import json, sys, tempfile, pathlib, torch, s2d2
from tests.support.web_decoder import record_decode, replay_decode, trace_differences
model = s2d2.load_model("tiny-llada2", dtype=torch.float32)
cfg = s2d2.preset("llada2-static", gen_length=64, rng="counter", temperature=0.0)
prompt = "Zoe has 2 toys. She gets 3 bags with 7 toys in each bag. How many toys does Zoe have now?"
with tempfile.TemporaryDirectory() as folder:
    want = record_decode(model, prompt, cfg, 11, pathlib.Path(folder))
    got = replay_decode(pathlib.Path(folder), want)
print(json.dumps(got.get("error", "")[:300] or trace_differences(want, got)))
"""


@pytest.mark.slow  # a fresh process loads the model and decodes
def test_the_page_replays_the_editing_loop_under_atens_default_kernels():
    """The decode that parted ways before float64 decisions (the 5th forward: two masks at p = 0.99992, 5e-7 apart,
    picked in the other order by the float32 softmax of ATen's default kernels)."""
    from tests.support.node_runner import node

    node()
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", REPLAY], text=True, capture_output=True, env=env, timeout=600,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_pages_estimators_equal_pythons_in_float64():
    """estimators.js against s2d2/estimators.py on the same float64 distributions: every estimator's α and the
    normalized entropies to 1e-14 (they feed K̂, the score and UCB's bins, which the policies compare with τ)."""
    import torch

    import s2d2
    from s2d2.decoding.sampling import token_distribution
    from s2d2.config import ESTIMATORS as names
    from s2d2.estimators import acceptance_alphas, normalized_entropy

    logits = near_tie_logits()
    probs = token_distribution(torch.from_numpy(logits.copy()), s2d2.DecodeConfig(), MASK)
    p = probs.max(dim=-1).values
    want = {name: acceptance_alphas(s2d2.DecodeConfig(estimator=name), probs, p).tolist() for name in names}
    want["entropy"] = normalized_entropy(probs).tolist()
    got = run_module("estimators.js", """
const rows = input.rows.map((r) => Float64Array.from(r));
output = {entropy: m.normalizedEntropy(rows)};
for (const name of input.names) output[name] = m.acceptanceAlphas({...input.cfg, estimator: name}, rows, input.p);""",
                     {"rows": probs.tolist(), "p": p.tolist(), "names": list(names),
                      "cfg": s2d2.DecodeConfig().to_dict()})
    assert set(got) == set(want)
    for key in want:
        assert max(abs(a - b) for a, b in zip(got[key], want[key])) < 1e-14, key
