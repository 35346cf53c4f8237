"""One-off tools that write the shipped files (example traces, the opening question), each run as `python -m scripts.NAME`."""
