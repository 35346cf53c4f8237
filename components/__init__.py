"""The app's parts below app.py, by role: serve/ (who may spend what), views/ (pure trace -> HTML / Plotly), files/
(traces on disk, the HTML replay), one package per tab (replay, run, compare, tour, sweep), and the shared
escape.py (text made inert), ui.py (Gradio glue) and theme.py (the CSS and keys). Read views/step_views.py first,
then replay/layout.py."""
