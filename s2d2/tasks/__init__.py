"""Tasks a decode is scored on: arithmetic, code, JSONL question sets and their scoring (read sets.py first)."""
