"""Sweeps: a grid of decoding configurations run over a task set, on one process or many (accuracy vs speed).

    bench.py         `python -m s2d2 bench`: the runner (arguments, the loop over work items, writing results)
    grid.py          what a cell is, the named grids, per-problem rows aggregated, Pareto frontiers, README tables
    shards.py        work items on disk: which (cell, problem) pairs are done and who runs the rest
    distributed.py   torch.distributed for a sweep: who this process is, its device, two collectives
    results_file.py  the schema of results.json, declared once
    stats.py         Wilson intervals and McNemar's exact paired test
    agreement.py     does a decode reproduce AR? the `equals_ar` rate of a cell

Pure except bench.py and distributed.py (torch): the app's Sweep tab reads grid, results_file, stats and agreement.
"""
