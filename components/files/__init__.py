"""Traces and examples on disk, share links and the one-file HTML replay (read traces.py first)."""
