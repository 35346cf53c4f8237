"""Speed and load measurements, each run as `python -m benchmarks.NAME` (never asserted in tests)."""
