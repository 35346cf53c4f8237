"""The Replay tab and its Metrics & about neighbour: layout, share row, handlers (read layout.py first)."""
