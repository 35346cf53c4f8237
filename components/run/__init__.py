"""The Run tab: the knob table, config validation, the decode workers, the shared batch of a class's Runs
(shared_batch.py), the ZeroGPU entry points, handlers and layout (read layout.py first)."""
