"""The guided tour: its material (the opening run, its partner and the shipped runs for the later stops) and its
stops in order (components/tour/stops.py: draft … skip; components/tour/later_stops.py: calibration … both runs)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from s2d2.trace import Trace

from components.files.examples import list_examples, load_pair
from components.views.exactness import load_result
from components.views.story import Story
from components.tour.later_stops import later_stops, whole_run
from components.tour.pipeline_stop import pipeline_material
from components.tour.stops import Stop, TourMaterial, core_stops
from components.files.traces import load_example


def tour_stops(material: TourMaterial | Trace, story: Optional[Story] = None,
               baseline: Optional[Trace] = None) -> list[Stop]:
    """The tour for this material (or for one trace, with its partner and headline when there is one)."""
    m = material if isinstance(material, TourMaterial) else TourMaterial(material, baseline=baseline, story=story)
    core = core_stops(m)
    return core + later_stops(m) if core else [whole_run(m)]


def numbered(stops: list[Stop]) -> list[str]:
    """Stop headings numbered by position: "1 · Draft", "2 · Span and routing", … (the walkthrough's circles show
    the same numbers)."""
    return [f"{i + 1} · {s.title}" for i, s in enumerate(stops)]


def load_material(trace: Trace, label: Optional[str] = None, baseline: Optional[Trace] = None,
                  story: Optional[Story] = None, directory: Optional[Path] = None) -> TourMaterial:
    """The opening run plus what the shipped examples directory holds for the later stops (each optional)."""
    m = TourMaterial(trace, label, baseline, story, exact_result=load_result())
    if directory is not None:
        m.lossless, m.ar = _tour_trace(directory / "tour" / "lossless-s2d2.json"), \
            _tour_trace(directory / "tour" / "lossless-ar.json")
        if m.lossless is not None and m.ar is not None and m.lossless.header.prompt_ids != m.ar.header.prompt_ids:
            m.lossless = m.ar = None
    if any(s.edits for s in trace.steps):
        m.edit, m.edit_label = trace, label
    elif directory is not None:
        m.edit_label, m.edit = _editing_example(directory)
    pipeline_material(m, directory)
    return m


def _tour_trace(path: Path) -> Optional[Trace]:
    try:
        return load_example(path) if path.is_file() else None
    except ValueError:
        return None


def _editing_example(directory: Path) -> tuple[Optional[str], Optional[Trace]]:
    """The first example that edits and verifies in one run, else the first that edits."""
    fallback: tuple[Optional[str], Optional[Trace]] = (None, None)
    for label, example in list_examples(directory).items():
        try:
            trace, _ = load_pair(example)
        except ValueError:
            continue
        if not any(s.edits for s in trace.steps):
            continue
        if any(s.verification is not None for s in trace.steps):
            return label, trace
        fallback = fallback if fallback[1] is not None else (label, trace)
    return fallback


