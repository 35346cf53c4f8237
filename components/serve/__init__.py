"""Who may spend what on the public Space: identity, the front door, per-client limits, the GPU slot, disk and state budgets, the model pool (read front_door.py first)."""
