"""Helpers shared by the tests: tiny models, scripted models, golden cases, the browser and lane set-ups (read tiny_models.py first)."""
