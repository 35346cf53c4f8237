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
    the same numbers); a stop past the core story says it goes deeper ("7 · Going deeper · Was K̂ right?")."""
    return [f"{i + 1} · {'Going deeper · ' if s.deeper else ''}{s.title}" for i, s in enumerate(stops)]


def header(stops: list[Stop]) -> str:
    """The tour's heading and the line under it: how long the core story is and where the deeper stops start.
    The time is what the core's words take to read and look at (tests/app/test_tour_core.py bounds their words)."""
    core = sum(1 for s in stops if not s.deeper)
    intro = ("A guided tour over the recorded example run that opens the app. The pictures below the text change as "
             "you go; **Show in Replay** opens the full panel at the moment a stop describes.")
    if core == len(stops) or core == 0:
        return f"## Learn S2D2 in {len(stops)} stops\n{intro}"
    return (f"## Learn S2D2: the core story in {core} stops, about five minutes\n{intro} Stops {core + 1}–"
            f"{len(stops)} go deeper (each says so in its heading): take them when you want more.")


def core_end(stops: list[Stop], i: int) -> str:
    """The line closing the last core stop: the core story is told, what follows goes deeper ("" elsewhere)."""
    if stops[i].deeper or i + 1 >= len(stops) or not stops[i + 1].deeper:
        return ""
    return (f"\n\n**That is the core story.** Stops {i + 2}–{len(stops)} go deeper: whether the guess was right, "
            "what it costs, when S2D2 writes exactly what step-by-step decoding writes, and more.")


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


