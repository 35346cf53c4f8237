"""Compare says whether S2D2's checks paid on the prompt (a teacher's first Compare showed S2D2 spending 30
forwards to diffusion alone's 21, and nothing said so)."""
from __future__ import annotations

from fixtures import trace_factory as tf

from components.compare.verdict import forwards_verdict


def test_the_verdict_names_the_best_lanes_and_which_way_it_went():
    cost = forwards_verdict({"1·ar": tf.ar_trace(), "2·dynamic-baseline": tf.diffusion_only(),
                            "3·sdar-config-b": tf.all_accepted()})  # 4/4 = 1.00 and 8/7 = 1.14 tokens per forward
    assert cost == ("**Forwards:** S2D2's best lane, Lane 3 (sdar-config-b, block 4), wrote 1.00 answer tokens per "
                   "forward; the best lane that never checks, Lane 2 (dynamic-baseline, block 4), wrote 1.14: here its "
                   "checks cost more forwards than they saved (each check is a forward of its own; it pays when it "
                   "accepts more tokens than a plain step would have written).")
    saved = forwards_verdict({"1·ar": tf.ar_trace(), "2·sdar-config-b": tf.all_accepted()})  # 1.00 vs 6/7 = 0.86
    assert saved.endswith("Lane 1 (ar, block 1), wrote 0.86: here its checks saved forwards. The two use different "
                         "block sizes, and a larger block writes more tokens per forward by itself: type the same "
                         "block_length (e.g. block_length=16) into both lanes' Custom settings to see the checks "
                         "alone.")


def test_no_verdict_without_a_lane_that_checks_and_one_that_never_does():
    assert forwards_verdict({"1·ar": tf.ar_trace(), "2·dynamic-baseline": tf.diffusion_only()}) == ""
    assert forwards_verdict({"1·a": tf.all_accepted(), "2·b": tf.mixed()}) == ""
