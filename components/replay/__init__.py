"""The Replay tab and its Metrics & about neighbour: layout, handlers, the share-a-moment links (read layout.py first)."""
