"""Compare's one-sentence verdict on forwards: did S2D2's checks pay on this prompt?

A teacher's first Compare (the default lanes) showed S2D2 at block 4 spending 30 forwards where diffusion alone spent
21, and nothing on the page said so: the numbers were all there, the conclusion was left to the reader. The sentence
sets the best S2D2 lane against the best lane that never checks, by answer tokens per forward (the lanes' answers may
differ in length, so raw forward counts do not compare), and says which way it went. Pure text from the traces.
"""
from __future__ import annotations

from typing import Mapping

from s2d2.metrics import trace_metrics
from s2d2.trace import Trace

from components.views.lane_keys import CUSTOM, lane_short, split_key


def tokens_per_forward(trace: Trace) -> float:
    """The answer's tokens over the run's forwards (the Metrics tab's own figure)."""
    return trace_metrics(trace)["tokens_per_forward"]


def lane_name(key: str, trace: Trace) -> str:
    """"Lane 3 (sdar-config-a, block 4)" for the lane key "3·sdar-config-a" (a trailing * marks custom settings)."""
    number, preset, custom = split_key(key)
    block = trace.header.config.get("block_length")
    return f"{lane_short(key)} ({preset}{CUSTOM if custom else ''}, block {block})" if number else key


def forwards_verdict(traces: Mapping[str, Trace]) -> str:
    """The best S2D2 lane against the best lane that never checks, in answer tokens per forward, and which won (as
    printed, to two decimals); "" when the lanes hold no such pair."""
    checking = {k: t for k, t in traces.items() if t.header.config.get("method") == "s2d2"}
    plain = {k: t for k, t in traces.items() if t.header.config.get("method") != "s2d2"}
    if not checking or not plain:
        return ""
    s_key = max(checking, key=lambda k: tokens_per_forward(checking[k]))
    p_key = max(plain, key=lambda k: tokens_per_forward(plain[k]))
    ours, theirs = f"{tokens_per_forward(checking[s_key]):.2f}", f"{tokens_per_forward(plain[p_key]):.2f}"
    blocks = {checking[s_key].header.config.get("block_length"), plain[p_key].header.config.get("block_length")}
    caveat = (" The two use different block sizes, and a larger block writes more tokens per forward by itself: type "
              "the same block_length (e.g. block_length=16) into both lanes' Custom settings to see the checks alone."
              if len(blocks) > 1 else "")
    if float(ours) > float(theirs):
        outcome = "here its checks saved forwards"
    elif float(ours) < float(theirs):
        outcome = ("here its checks cost more forwards than they saved (each check is a forward of its own; it pays "
                   "when it accepts more tokens than a plain step would have written)")
    else:
        outcome = "a tie on this prompt"
    return (f"**Forwards:** S2D2's best lane, {lane_name(s_key, checking[s_key])}, wrote {ours} answer tokens per "
            f"forward; the best lane that never checks, {lane_name(p_key, plain[p_key])}, wrote {theirs}: "
            f"{outcome}.{caveat}")
