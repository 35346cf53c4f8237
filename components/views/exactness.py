"""The exactness stop: a lossless S2D2 run and greedy AR on the same question write the same tokens, S2D2 in fewer
forwards (docs/algorithm.md, 'Acceptance modes and AR-exactness'), and what a benchmark measured on many questions.

`exactness` compares two recorded traces token for token; `load_result` reads the benchmark's file
(benchmarks/exactness.py writes assets/results/exactness.json) with bounds, so an edited file cannot make the tour
print nonsense; `exactness_html` draws both outputs and both forward sequences. Pure, no model.
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from s2d2.trace import Trace

from components.views.canvas import visible_text
from components.views.ledger import strips_html
from components.views.plural import plural
from s2d2.compare import first_difference

RESULT = Path(__file__).resolve().parents[2] / "assets" / "results" / "exactness.json"
MAX_RESULT_BYTES = 1 << 20
MAX_SHOWN = 96  # output tokens drawn per run


@dataclass(frozen=True)
class Exactness:
    identical: bool
    first_difference: Optional[int]  # output index where they part (None when identical)
    tokens: int  # AR's output length
    ar_forwards: int
    s2d2_forwards: int
    conditions: list[str]  # the settings the theorem needs, as this trace recorded them

    @property
    def ratio(self) -> Optional[float]:
        return self.ar_forwards / self.s2d2_forwards if self.s2d2_forwards else None


def conditions(trace: Trace) -> list[str]:
    """The AR-exactness conditions (docs/algorithm.md, 'Acceptance modes and AR-exactness') the S2D2 trace meets, in
    words; missing ones are left out."""
    cfg = trace.header.config
    out = []
    if cfg.get("acceptance") == "greedy_exact":
        out.append("a draft passes only if it is the verifier's own first choice, and a rejected one is replaced by "
                   "that choice (greedy-exact acceptance)")
    if all(s.verification is not None for s in trace.steps if s.masks_before):
        out.append("a verifier forward at every step")
    if cfg.get("cache_ver"):
        out.append("the prompt and every finished block cached reading left to right only, exactly as AR caches "
                   "them (the AR-consistent cache)")
    beyond = [n for n, on in (("the verifier's cache of accepted drafts kept (KV reuse)", cfg.get("kv_reuse")),
                              ("each finished block cached by the next block's first draft forward instead of a "
                               "forward of its own (fused commits)", cfg.get("fused_commit"))) if on]
    if beyond:
        out.append(" and ".join(beyond) + ", two savings beyond the paper that change the forwards, not the tokens")
    return out


def exactness(s2d2: Trace, ar: Trace) -> Exactness:
    a = list(ar.footer.output_ids) if ar.footer else ar.replay()
    b = list(s2d2.footer.output_ids) if s2d2.footer else s2d2.replay()
    i = first_difference(a, b)
    return Exactness(i is None, i, len(a), len(ar.forwards), len(s2d2.forwards), conditions(s2d2))


def load_result(path: Path = RESULT) -> Optional[dict[str, Any]]:
    """The benchmark summary {n, identical, ar_nfe, s2d2_nfe, block_length, gen_length, kv_reuse, fused_commit},
    or None when the file is missing, too big or not what benchmarks/exactness.py writes."""
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        meta = data["meta"]
        out = {k: data[k] for k in ("n", "identical", "ar_nfe", "s2d2_nfe")}
        out.update(block_length=meta["block_length"], gen_length=meta["gen_length"],
                   kv_reuse=bool(meta.get("kv_reuse")), fused_commit=bool(meta.get("fused_commit")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ints = all(isinstance(out[k], int) and not isinstance(out[k], bool) and 0 <= out[k] < 10 ** 9
               for k in ("n", "identical", "ar_nfe", "s2d2_nfe", "block_length", "gen_length"))
    if not ints or out["identical"] > out["n"] or out["n"] == 0 or out["s2d2_nfe"] == 0:
        return None
    return out


def result_line(result: Optional[dict[str, Any]]) -> str:
    """One sentence quoting the benchmark, its settings in words (Markdown; how to rerun it is in the docs, not on
    the page: a student never sees a command or a repository path)."""
    if result is None:
        return ""
    options = " + ".join(n for n, on in (("KV reuse", result["kv_reuse"]), ("fused commits", result["fused_commit"]))
                         if on)
    setting = f"B = {result['block_length']}" + (f" + {options}" if options else "")
    return (f"Measured on {result['n']} held-out questions with the bundled tiny model ({setting}, answers of up to "
            f"{plural(result['gen_length'], 'token')}): **{result['identical']}/{result['n']} identical to AR**, with "
            f"{result['ar_nfe'] / result['s2d2_nfe']:.2f}× fewer forwards (AR {result['ar_nfe']}, S2D2 "
            f"{result['s2d2_nfe']}).")


def _tokens(trace: Trace, other: list[int], name: str) -> str:
    ids = list(trace.footer.output_ids) if trace.footer else trace.replay()
    texts = list(trace.footer.output_tokens) if trace.footer else [str(i) for i in ids]
    chips = []
    for i, (tok, text) in enumerate(zip(ids[:MAX_SHOWN], texts[:MAX_SHOWN])):
        same = i < len(other) and other[i] == tok
        chips.append(f'<span class="tok {"st-accepted" if same else "st-resampled"}" data-i="{i}">'
                     f"{html.escape(visible_text(text, 16))}</span>")
    more = f' <span class="more">… {len(ids) - MAX_SHOWN} more</span>' if len(ids) > MAX_SHOWN else ""
    return f'<div class="ex-row"><b>{html.escape(name)}</b> <span class="s2d2-canvas">{"".join(chips)}{more}</span></div>'


def exactness_html(s2d2: Trace, ar: Trace) -> str:
    """Both outputs token by token (green where they agree) and both runs' forwards as boxes."""
    a = list(ar.footer.output_ids) if ar.footer else ar.replay()
    b = list(s2d2.footer.output_ids) if s2d2.footer else s2d2.replay()
    return (f'<div class="s2d2-exact">{_tokens(ar, b, "AR")}{_tokens(s2d2, a, "S2D2 (lossless)")}'
            f'<div class="s2d2-ledger">{strips_html({"AR": ar, "S2D2 (lossless)": s2d2})}</div></div>')
