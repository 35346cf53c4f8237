"""The Sweep tab: accuracy against cost from a bench results file (read panel.py first)."""
