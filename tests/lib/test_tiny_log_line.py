"""train-tiny's console line for a log record (s2d2/tiny/log_line.py): losses named and rounded, counters as is."""
from __future__ import annotations

from s2d2.tiny.log_line import log_line


def test_losses_are_named_and_rounded_and_counters_kept():
    rec = {"step": 3, "tokens": 12288, "elapsed_s": 19.7, "final": True, "val_arith": 7.191181182861328,
           "val_austen": 7.6311}
    assert log_line(rec) == ("step 3, tokens 12288, elapsed_s 19.7; validation loss (cross-entropy, nats per token): "
                             "val_arith 7.191, val_austen 7.631")


def test_a_record_without_losses_is_its_counters():
    assert log_line({"step": 40, "arith_acc": 0.5, "val_note": "n/a"}) == "step 40, arith_acc 0.5, val_note n/a"
