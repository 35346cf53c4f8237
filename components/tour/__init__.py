"""The Learn tab, a guided tour of one run: material, stops and pictures (read stops.py first)."""
