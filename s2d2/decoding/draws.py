"""The one interface every random draw of a decode goes through: torch's generator or the counter generator.

`DecodeConfig.rng` picks the source for a whole decode (`make_generator`): "torch" (the default, faithful to the
reference code: `torch.rand`, `torch.multinomial`) or "counter" (s2d2/counter_rng.py: the draws the page's
JavaScript decoder makes too, bit for bit). The decode loops never call torch's random functions themselves; they
call `uniform` (the acceptance test's u) and `categorical` (a sampled draft, an AR token, the residual), which
dispatch on the source. So one config field switches every draw.

A `CounterStream` numbers its calls 0, 1, 2, ... in the order the decode makes them; a sequence in a batch has its
own stream (seeded with its own seed), so its draws equal its batch-1 draws. The counter path computes on the host in
float64: it reads the distribution back (one device-to-host copy per draw call) and writes the draws to the device.
"""
from __future__ import annotations

from typing import Union

import torch

from .. import counter_rng
from ..config import RNGS
from ..counter_rng import KINDS

__all__ = ["RNGS", "CounterStream", "Source", "make_generator", "uniform", "categorical"]


class CounterStream:
    """The counter generator's state for one decode: its seed, its device and the number of the next call.

    Invariant: `calls` only grows, by one per `uniform` or `categorical` call, and stays <= counter_rng.WORD_MAX.
    """

    def __init__(self, seed: int, device: torch.device | str) -> None:
        counter_rng.check_key(seed, 0, 0, 0)
        self.seed = int(seed)
        self.device = torch.device(device)
        self.calls = 0

    def next_call(self) -> int:
        call = self.calls
        if call > counter_rng.WORD_MAX:
            raise ValueError(f"rng: more than {counter_rng.WORD_MAX + 1} draw calls in one decode")
        self.calls += 1
        return call


Source = Union[torch.Generator, CounterStream]


def make_generator(rng: str, seed: int, device: torch.device | str) -> Source:
    """The decode's random source: a seeded torch.Generator on `device`, or a CounterStream keyed by `seed`."""
    if rng == "counter":
        if torch.device(device).type == "mps":
            raise ValueError("rng: 'counter' draws float64 uniforms, which MPS cannot hold; use rng='torch' there")
        return CounterStream(seed, device)
    if rng != "torch":
        raise ValueError(f"rng: one of {RNGS}, got {rng!r:.40}")
    return torch.Generator(device=device).manual_seed(int(seed))


def uniform(source: Source, n: int, device: torch.device) -> torch.Tensor:
    """n uniforms in [0, 1) on `device`: torch.rand's float32 (one call), or the counter's float64 at
    (kind "accept", the next call, indices 0..n-1)."""
    if isinstance(source, CounterStream):
        values = counter_rng.uniforms(source.seed, KINDS["accept"], source.next_call(), n)
        return torch.from_numpy(values).to(device)
    return torch.rand(n, generator=source, device=device)


def categorical(source: Source, probs: torch.Tensor, kind: str) -> torch.Tensor:
    """One draw per row of `probs` [n, V] (a long tensor [n] on its device; a single row [V] gives a 0-d tensor):
    torch.multinomial, or the counter's inverse-CDF rule over the float64 widening of each row at (kind, the next
    call, row index)."""
    if isinstance(source, CounterStream):
        rows = probs.detach().to("cpu", torch.float64).reshape(-1, probs.shape[-1]).numpy()
        drawn = counter_rng.categorical_rows(rows, source.seed, KINDS[kind], source.next_call())
        out = torch.tensor(drawn, dtype=torch.long).to(probs.device)
        return out.reshape(probs.shape[:-1])
    if probs.dim() == 1:
        return torch.multinomial(probs, 1, generator=source)[0]
    return torch.multinomial(probs, 1, generator=source).squeeze(-1)
