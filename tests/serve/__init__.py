"""Tests of the public app: limits, budgets and attacks, mostly against a launched server."""
