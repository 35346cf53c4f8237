"""The counter generator: random draws that Python and the page (s2d2_web/counter_rng.js) make bit for bit alike.

Torch's generator (the default, `DecodeConfig.rng == "torch"`) is a stateful stream JavaScript cannot reproduce.
This one is a pure function of a key, specified here completely so anyone can reimplement it
(docs/random-stream.md tells the story; the JS module mirrors every function below):

**64 random bits.** All arithmetic is on unsigned 64-bit words, modulo 2^64.

    mix(z)  = z ^= z >> 30;  z *= 0xBF58476D1CE4E5B9;  z ^= z >> 27;  z *= 0x94D049BB133111EB;  z ^= z >> 31
              (SplitMix64's finaliser: a bijection of 64-bit words)
    bits(seed, kind, call, index):
        h = 0
        for w in (seed, kind << 32 | call, index):   h = mix((h + 0x9E3779B97F4A7C15) ^ w)
        return h

`seed` is the decode's seed (0 <= seed < 2^64); `kind` says which draw site asks (KINDS: 1 draft, 2 acceptance,
3 residual, 4 AR token); `call` numbers the decode's draw calls 0, 1, 2, ... in the order the decode makes them
(whatever their kind); `index` is the row within the call (the i-th uniform, the i-th categorical row). kind and call
are below 2^32, index below 2^32. Each sequence of a batch has its own seed and its own call numbers, so its draws
never depend on what it is batched with, nor on when the host gets to it.

**A uniform in [0, 1).** u = (bits >> 11) * 2^-53: the top 53 bits as a float64; every value is exact, 1 never
occurs.

**A categorical draw** from weights w[0..n-1] (float64; a float32 probability is first widened to float64 exactly):
every weight finite and >= 0, else refused. Sum them in float64 strictly left to right, c[i] = c[i-1] + w[i]
(c[-1] = 0); total = c[n-1] must be > 0 and finite, else refused. target = u * total (one float64 product, rounded
to nearest). The draw is the FIRST index i with c[i] > target. A zero weight is never drawn (its c equals the one
before it, which would already have been picked). On ties in c the first index wins. If rounding leaves no c[i] >
target (target can round up to total), the draw is the LAST index with a positive weight. The weights need not sum
to 1: they are never normalised, so no division can round differently on the two sides.
"""
from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MUL1, MUL2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
WORD_MAX = (1 << 32) - 1  # kind, call and index each fit in 32 bits
SEED_LIMIT = 1 << 64  # seeds in [0, 2^64)
KINDS = {"draft": 1, "accept": 2, "residual": 3, "ar": 4}
_TWO_M53 = 2.0 ** -53

__all__ = ["mix", "bits", "uniform", "uniforms", "categorical", "categorical_rows", "check_key", "KINDS",
           "SEED_LIMIT", "WORD_MAX"]


def mix(z: int) -> int:
    """SplitMix64's finaliser on a 64-bit word (a bijection: distinct inputs give distinct outputs)."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * MUL1) & MASK64
    z = ((z ^ (z >> 27)) * MUL2) & MASK64
    return z ^ (z >> 31)


def check_key(seed: int, kind: int, call: int, index: int) -> None:
    """Raise one ValueError naming the first key word out of range (they must be ints; bools are refused)."""
    for name, value, top in (("seed", seed, SEED_LIMIT - 1), ("kind", kind, WORD_MAX), ("call", call, WORD_MAX),
                             ("index", index, WORD_MAX)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= int(value) <= top:
            raise ValueError(f"{name}: an integer in [0, {top}] for the counter generator, got {value!r:.40}")


def bits(seed: int, kind: int, call: int, index: int) -> int:
    """The 64 random bits at this key (the module docstring's `bits`)."""
    check_key(seed, kind, call, index)
    h = 0
    for word in (int(seed), int(kind) << 32 | int(call), int(index)):
        h = mix(((h + GOLDEN) & MASK64) ^ word)
    return h


def uniform(seed: int, kind: int, call: int, index: int) -> float:
    """The float64 uniform in [0, 1) at this key: the top 53 of its 64 bits, times 2^-53 (exact)."""
    return float(bits(seed, kind, call, index) >> 11) * _TWO_M53


def uniforms(seed: int, kind: int, call: int, n: int) -> np.ndarray:
    """n uniforms of one call (indices 0..n-1), float64."""
    return np.array([uniform(seed, kind, call, i) for i in range(n)], dtype=np.float64)


def categorical(weights: np.ndarray, u: float) -> int:
    """The index one uniform `u` draws from the weights (the module docstring's rule; float64 throughout)."""
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.size == 0:
        raise ValueError("categorical: no weights")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("categorical: every weight must be finite and >= 0")
    with np.errstate(over="ignore"):  # an overflowing sum is refused just below, by its total
        c = np.add.accumulate(w)  # strictly left to right in float64 (a running sum, not numpy's pairwise sum)
    total = float(c[-1])
    if not (total > 0.0 and np.isfinite(total)):
        raise ValueError(f"categorical: the weights must have a positive finite total, got {total!r}")
    target = float(u) * total
    i = int(np.searchsorted(c, target, side="right"))  # the first i with c[i] > target (c never decreases)
    if i < w.size:
        return i
    return int(np.flatnonzero(w > 0)[-1])


def categorical_rows(weights: np.ndarray, seed: int, kind: int, call: int) -> list[int]:
    """One categorical draw per row of a [n, V] weight matrix; row i uses the uniform at index i of the call."""
    rows = np.asarray(weights, dtype=np.float64)
    return [categorical(rows[i], uniform(seed, kind, call, i)) for i in range(rows.shape[0])]
