"""Checks of the benchmark scripts themselves (not of speed)."""
