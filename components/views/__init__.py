"""Pure trace -> HTML / Plotly builders, no gradio (read step_views.py first: the registry of what one step shows)."""
