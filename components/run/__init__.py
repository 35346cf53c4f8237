"""The Run tab: the knob table, config validation, the decode workers, the ZeroGPU entry points, handlers and
layout (read layout.py first)."""
