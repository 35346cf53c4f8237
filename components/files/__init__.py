"""Traces and examples on disk and the one-file HTML replay (read traces.py first)."""
