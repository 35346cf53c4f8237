"""The batch's own forwards: what a batched decode cost, against the sum of what its sequences recorded.

A sequence's trace counts the forwards it took part in, exactly as at batch 1 (its NFE, query tokens and per-forward
records); a `BatchForward` is one forward the machine ran, naming the sequences that shared it, their query and
cache lengths, and the padded shape it ran at (every row padded to the longest query, every cache to the longest
cache). So the ledger can say how many forwards the batch ran for how many sequence-forwards, and how much of its
work was padding. A forward that raised is kept (`error`): it counts among the forwards run and their wall time,
never among the sequence-forwards, query rows or sequence walls it served (a failed shared forward's members are
served by their lone retries, recorded after it).

Host reads are counted too, on the packed path (an accelerator; batch.py): `reads` is the transfers the batch made
(one per batch-wide shared read, one per read a sequence made alone, a failed shared transfer and its lone retries
included), `sequence_reads` the packed fetches they served, which is what the sequences' own `transfers` counts add
up to (each sequence still counts its own, as at batch 1). On the plain CPU path nothing is handed off: both stay 0.

How full the forwards were, against what they could have carried: a sequence is live from its first forward in the
ledger to its last, so `live_rows` gives each forward how many sequences were live when it ran, and `live_share` is
the sequences the forwards served over the live sequences they could have served (1.0: every forward carried every
live sequence, the batch-first engine's aim on an accelerator, issue 37; on the CPU its grouping splits a step into
a forward per phase, so there a forward carries about 1 / (forwards per step) of them).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class BatchForward:
    index: int
    sequences: list[int]  # the batch positions (prompt indices) of the sequences that took part
    seq_forwards: list[int]  # each one's forward index in its own trace
    queries: list[int]  # each one's query tokens
    cache_lens: list[int]  # each one's cached positions before the forward
    wall_s: float
    error: str = ""  # set when this forward raised: a shared one is then retried per member (batch.py), not served

    @property
    def padded_queries(self) -> int:
        """Query rows the forward ran: every sequence padded to the longest query."""
        return len(self.queries) * max(self.queries)

    @property
    def padding(self) -> int:
        return self.padded_queries - sum(self.queries)


@dataclass
class BatchLedger:
    batch_size: int
    forwards: list[BatchForward] = field(default_factory=list)
    wall_s: float = 0.0
    reads: int = 0  # device-to-host transfers the batch made for its sequences' packed reads
    sequence_reads: int = 0  # the sequences' packed fetches those transfers served
    failed_reads: int = 0  # shared transfers that raised (each reader then read alone)

    def add(self, record: BatchForward) -> None:
        self.forwards.append(record)

    def live_rows(self) -> list[int]:
        """Per forward (ledger order, failed ones too), the sequences live when it ran: those whose first forward
        in the ledger is at or before it and whose last is at or after it."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for i, f in enumerate(self.forwards):
            for s in f.sequences:
                first.setdefault(s, i)
                last[s] = i
        change = [0] * (len(self.forwards) + 1)
        for s, i in first.items():
            change[i] += 1
            change[last[s] + 1] -= 1
        live, out = 0, []
        for d in change[:-1]:
            live += d
            out.append(live)
        return out

    def summary(self) -> dict[str, Any]:
        """Forwards run vs sequence-forwards served, query rows (useful and padded), and wall time."""
        served = [f for f in self.forwards if not f.error]
        seq_forwards = sum(len(f.sequences) for f in served)
        useful = sum(sum(f.queries) for f in served)
        padded = sum(f.padded_queries for f in served)
        live = sum(n for f, n in zip(self.forwards, self.live_rows()) if not f.error)
        return {
            "batch_size": self.batch_size,
            "forwards": len(self.forwards),  # every forward the machine ran, a failed one too
            "failed_forwards": len(self.forwards) - len(served),
            "sequence_forwards": seq_forwards,
            "mean_sharing": seq_forwards / len(served) if served else 0.0,
            "mean_live": live / len(served) if served else 0.0,  # sequences live per forward (`live_rows`)
            "live_share": seq_forwards / live if live else 0.0,  # of those, the share the forwards carried
            "query_tokens": useful,
            "padded_query_tokens": padded,
            "padding_share": (padded - useful) / padded if padded else 0.0,
            "forward_wall_s": sum(f.wall_s for f in self.forwards),
            # what the sequences' own traces add up to (each forward record carries its batch forward's wall)
            "sequences_forward_wall_s": sum(f.wall_s * len(f.sequences) for f in served),
            "reads": self.reads,  # host transfers for the sequences' reads (packed path only)
            "sequence_reads": self.sequence_reads,  # the reads the sequences asked for (their own counts' sum)
            "failed_reads": self.failed_reads,
            "wall_s": self.wall_s,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "forwards": [asdict(f) for f in self.forwards]}
