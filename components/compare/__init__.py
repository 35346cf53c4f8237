"""The Compare tab: lanes on one prompt and seed, their metrics and the what-if panel (read lanes.py first)."""
