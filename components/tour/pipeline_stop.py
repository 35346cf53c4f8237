"""The tour's pipeline stop (D2F, `loop="pipeline"`): several blocks in flight at once, over the opening run when it
is a pipeline run, else over the first shipped pipeline example. Kept apart from the tour's own modules so it adds
one stop without reshaping them (components/tour/material.py loads its trace, tour_more.later_stops places it).
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Optional

from s2d2.trace import Trace

from components.views.canvas import visible_text
from components.files.examples import list_examples, load_pair
from components.views.pipeline_blocks import is_pipeline, lifecycles
from components.tour.stops import Pic, Stop, TourMaterial
from components.views.trace_index import fmt
from components.views.plural import plural


def pipeline_material(m: TourMaterial, directory: Optional[Path]) -> None:
    """Put the pipeline run the stop draws into m.extra ("pipeline", "pipeline_label"): the opening run if it is
    one, else the first shipped example that is."""
    if is_pipeline(m.trace):
        m.extra.update(pipeline=m.trace, pipeline_label=m.label)
        return
    if directory is None:
        return
    for label, example in list_examples(directory).items():
        try:
            trace, _ = load_pair(example)
        except ValueError:
            continue
        if is_pipeline(trace):
            m.extra.update(pipeline=trace, pipeline_label=label)
            return


def _percent(value: object) -> str:
    """A fraction of a block as the presets word it ("50 %"); "?" when the header lacks it."""
    return f"{float(value) * 100:g} %" if isinstance(value, (int, float)) else "?"


def pipeline_stop(m: TourMaterial) -> Optional[Stop]:
    """The first step with the most blocks in flight: the canvas outlining each block with its state, and every
    block's life over the run."""
    t: Optional[Trace] = m.extra.get("pipeline") or (m.trace if is_pipeline(m.trace) else None)
    if t is None or not t.steps:
        return None
    rec = max(t.steps, key=lambda s: (len(s.in_flight), -s.index))
    if len(rec.in_flight) < 2:
        return None
    k, cfg, first = rec.index + 1, t.header.config, t.blocks[0].index
    newest = rec.in_flight[-1].block
    joined = lifecycles(t)[newest].added or 0
    names = ", ".join(str(r.block - first + 1) for r in rec.in_flight)
    complete = sum(r.complete for r in rec.in_flight)
    text = (f"D2F (discrete diffusion forcing, a block-diffusion decoder of its own) decodes a **pipeline** of blocks: "
            f"a block starts before the one before it is finished. At step {k}, "
            f"blocks {names} are in flight (each outlined below), all drafted by one forward. Block "
            f"{newest - first + 1} joined at step "
            f"{joined + 1}, once the block before it was {_percent(cfg.get('block_add_threshold'))} decoded (this "
            f"run's setting). A block becomes **fully active** once its predecessor is "
            f"{_percent(cfg.get('decoded_token_threshold'))} decoded ({complete} of these {len(rec.in_flight)} are): "
            f"it then decodes at least its most confident mask every step; before that only drafts with p > "
            f"{fmt(cfg.get('confidence_threshold'), 2)} (outlined dashed). A "
            "finished block waits until every earlier block is finished; the next forward then caches it, so there "
            f"is no separate commit. Step {k} decoded {plural(len(rec.commits), 'token')} across those blocks; "
            "the chart shows every block's life over the run.")
    if t is not m.trace:
        start = html.escape(visible_text(t.header.prompt_text.strip(), 40))
        text = f"Another example run, on “{start}”, where the blocks overlap. " + text
    own = t is m.trace
    return Stop("pipeline", "Blocks in flight", text, k,
                (Pic("canvas", names="each outlined below"), Pic("lifecycle", names="the chart shows")),
                trace="main" if own else "pipeline", example=m.label if own else m.extra.get("pipeline_label"),
                own_story=own)
