"""The Run tab: knobs, config validation, the decode workers and their layout (read layout.py first)."""
