"""The shipped example traces (assets/traces), named for what they show, and example *pairs*.

A file `NN-some-name.json` is an example labelled "Some name" (`--` separates a suffix: `a-b--c` -> "A b · c"). A
file `NN-some-name.baseline.json` next to it is that example's partner: the diffusion baseline on the same prompt
and seed, which the Replay tab can toggle to. The numeric prefix only orders the list; the first example opens the
app. Parsing and validation are traces_io's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from s2d2.trace import Trace

from components.files.traces import ASSETS, load_example

BASELINE_SUFFIX = ".baseline"


@dataclass(frozen=True)
class Example:
    label: str
    path: Path
    baseline: Optional[Path] = None  # the same prompt and seed decoded by the diffusion baseline


def example_label(stem: str) -> str:
    """"01-verifier-catches-a-wrong-digit" -> "Verifier catches a wrong digit"; "02-always-verify--block-16" ->
    "Always verify · block 16"."""
    parts = re.sub(r"^\d+-", "", stem).split("--")
    words = [p.replace("-", " ").replace("_", " ").strip() for p in parts]
    words[0] = words[0][:1].upper() + words[0][1:]
    return " · ".join(w for w in words if w)


def list_examples(directory: Path = ASSETS) -> dict[str, Example]:
    """label -> Example, in file-name order; baseline partners are attached to their example, not listed."""
    if not directory.is_dir():
        return {}
    files = sorted(directory.glob("*.json"))
    partners = {p.name[: -len(BASELINE_SUFFIX + ".json")]: p for p in files
                if p.name.endswith(BASELINE_SUFFIX + ".json")}
    out: dict[str, Example] = {}
    for p in files:
        if p.name.endswith(BASELINE_SUFFIX + ".json"):
            continue
        label = example_label(p.stem)
        out[label] = Example(label, p, partners.get(p.stem))
    return out


def load_pair(example: Example) -> tuple[Trace, Optional[Trace]]:
    """(the example's trace, its baseline partner or None); TraceError if the main file is invalid. A broken
    partner file only loses the toggle."""
    main = load_example(example.path)
    partner = None
    if example.baseline is not None:
        try:
            partner = load_example(example.baseline)
        except ValueError:
            partner = None
    return main, partner


def examples_dir() -> Path:
    """Where the app reads its examples: assets/traces, or $S2D2_EXAMPLE_TRACES (tests point it elsewhere)."""
    import os

    return Path(os.environ.get("S2D2_EXAMPLE_TRACES", str(ASSETS)))


def first_example(directory: Optional[Path] = None) -> tuple[Optional[str], Optional[Trace]]:
    """(label, trace) of the first loadable example: the one the app opens with."""
    for label, example in list_examples(directory or examples_dir()).items():
        try:
            return label, load_example(example.path)
        except ValueError:
            continue
    return None, None
