"""What a batch forward's rows ask for and what they read (issue 37; s2d2/models/read_rows.py).

    python -m benchmarks.forward_reads                      # sdar-config-b and fastdllm-config-a, batch 32
    python -m benchmarks.forward_reads --presets sdar-config-b --batch 8

One `generate_batch` of the bundled model per preset (one thread, 32 held-out problems, gen 64, the batch-first
engine); every request of every shared forward is tallied by row kind: rows, query tokens, the rows whose logits
it reads (`read_index`) and the rows those need (`needed_rows`: read or kept, and everything they attend). Kinds
are told apart by the request's shape: kept rows (prefill, commit), a 2L verifier (reads among its second half),
a draft (the rest). The counts are properties of the requests, the same before and after the forward cuts.
"""
from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import torch

import s2d2
from s2d2.models.base import ForwardRequest
from s2d2.models.read_rows import needed_rows, query_pattern, read_index


def row_kind(req: ForwardRequest) -> str:
    """'store' (keeps rows: prefill, commit), 'verify' (a 2L verifier: reads among its second half) or 'draft'."""
    q = int(req.input_ids.shape[0])
    if req.keep > 0:
        return "store"
    return "verify" if req.rows is not None and req.last is not None and 2 * req.last == q else "draft"


def tally(counts: Counter, req: ForwardRequest) -> None:
    """Add one request's rows, query tokens, read rows and needed rows to `counts` under its kind."""
    q = int(req.input_ids.shape[0])
    cache_len = int(req.cache.get_seq_length())
    reads = read_index(q, req.last, req.rows, req.input_ids.device)
    reads = torch.arange(q) if reads is None else reads.cpu()
    pattern = query_pattern(req, cache_len)
    needed = q if pattern is None or req.keep >= q else int(needed_rows(pattern.cpu(), reads, req.keep).sum())
    kind = row_kind(req)
    for name, n in (("rows", 1), ("query", q), ("read", int(reads.shape[0])), ("needed", needed)):
        counts[kind, name] += n


def counted(model: Any, preset: str, batch: int, n: int, gen: int) -> Counter:
    """The tallies of one batch decode of `preset` (the model's own `forward_batch`, watched per call)."""
    from s2d2.tasks.arithmetic import heldout

    counts: Counter = Counter()
    shared = model.forward_batch

    def watched(requests: list[ForwardRequest]) -> list[torch.Tensor]:
        for req in requests:
            tally(counts, req)
        return shared(requests)

    model.forward_batch = watched
    try:
        prompts = [p.question for p in heldout(n)]
        s2d2.generate_batch(model, prompts, s2d2.preset(preset, gen_length=gen), list(range(n)), batch_size=batch,
                            detailed=False, engine="batch-first")
    finally:
        del model.forward_batch
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["sdar-config-b", "fastdllm-config-a"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--gen-length", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = s2d2.load_model("tiny", backend="dynamic", device="cpu", dtype=torch.float32)
    print(f"bundled model, batch {args.batch}, n {args.n}, gen {args.gen_length}: per row kind, over every shared "
          f"forward's requests")
    print(f"{'preset':<20} {'kind':<7} {'rows':>6} {'query':>7} {'read':>7} {'needed':>7}")
    for preset in args.presets:
        counts = counted(model, preset, args.batch, args.n, args.gen_length)
        for kind in ("draft", "verify", "store"):
            print(f"{preset:<20} {kind:<7} " + " ".join(f"{counts[kind, x]:>{w}}" for x, w in
                                                        (("rows", 6), ("query", 7), ("read", 7), ("needed", 7))))


if __name__ == "__main__":
    main()
