"""A training log record as a person reads it on the console (the log file keeps the record whole, every digit)."""
from __future__ import annotations


def log_line(rec: dict) -> str:
    """`key value` for the run's counters, then the validation losses named as such (cross-entropy, nats per token)
    to 4 significant digits."""
    is_loss = {k: k.startswith("val_") and isinstance(v, float) for k, v in rec.items()}
    losses = ", ".join(f"{k} {v:.4g}" for k, v in rec.items() if is_loss[k])
    rest = ", ".join(f"{k} {v}" for k, v in rec.items() if not is_loss[k] and k != "final")
    return rest + (f"; validation loss (cross-entropy, nats per token): {losses}" if losses else "")
