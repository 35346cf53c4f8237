"""Which sweep results files the Sweep tab offers, and reading one.

The rule: every `*.json` file in `assets/results/` and in the folders one level below it (so
`assets/results/sweep.json`, the SDAR-architecture `tiny` sweep, and e.g. `assets/results/tiny-llada2/sweep.json`)
that reads as a results file (s2d2/sweeps/results_file.py: version 1, a `cells` list). Each is offered by what it
measured, "<model> · <task> (n = N)" from its `meta`, followed by its path under assets/results; the file directly
in assets/results comes first, then the rest by path. A JSON object with no `cells` key is another kind of file
(the exactness check's assets/results/exactness.json lives there too) and is passed over without a word; a file
that has `cells` but does not read as a results file is left out and logged, so a broken sweep never breaks the
tab and never goes unnoticed. To ship another sweep, drop its results.json into a folder there.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from s2d2.sweeps.results_file import read_results

from components.files.traces import read_upload

RESULTS_BOX = "This box takes the results.json that `python -m s2d2 bench ... --out DIR` writes."
RESULTS_DIR = Path(__file__).resolve().parents[2] / "assets" / "results"
log = logging.getLogger(__name__)


def load_results_file(path: Optional[str | Path]) -> dict[str, Any]:
    """Read (size-bounded) and validate a results.json; ValueError with one readable message."""
    raw = read_upload(str(path) if path else None, "results.json written by `python -m s2d2 bench`")
    try:
        return read_results(raw)
    except ValueError as exc:
        if b'"header"' in raw[:4096] and b'"steps"' in raw:  # a trace dropped on the wrong box
            raise ValueError("This is a trace, not a sweep results file: open it with the Replay tab's ⬆ Upload a "
                             "trace. " + RESULTS_BOX) from None
        raise ValueError(f"Not a results file: {str(exc)[:300]}. {RESULTS_BOX}") from None


def sweep_label(data: dict[str, Any], path: Path, root: Path) -> str:
    m = data.get("meta", {})
    where = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    return f"{str(m.get('model', '?'))[:40]} · {str(m.get('task', '?'))[:40]} (n = {m.get('n', '?')}) — {where}"


def claims_cells(path: Path) -> bool:
    """Does the file look like a sweep at all (a JSON object with a `cells` key)? Size-bounded like an upload; a
    file too big or unreadable claims to be one, so its failure is logged rather than passed over."""
    try:
        data = json.loads(read_upload(str(path), "results.json"))
    except (ValueError, OSError):
        return True
    return not isinstance(data, dict) or "cells" in data


def shipped_sweeps(root: Path = RESULTS_DIR) -> dict[str, Path]:
    """{label: path} of the results files under `root` by the rule above, in the order the tab lists them."""
    if not root.is_dir():
        return {}
    paths = sorted(root.glob("*.json")) + sorted(root.glob("*/*.json"))
    out: dict[str, Path] = {}
    for path in paths:
        try:
            data = load_results_file(path)
        except (ValueError, OSError) as exc:
            if not claims_cells(path):  # another kind of results file (e.g. the exactness check's)
                continue
            log.warning("Sweep tab: %s is not a results file, left out (%s)", path, str(exc)[:200])
            continue
        out[sweep_label(data, path, root)] = path
    return out
