"""Pipeline (D2F) traces in the views and tools: the canvas outlines every block in flight with its state, the mask
viewer draws D2F's block-causal mask, the lifecycle chart shows blocks overlapping, the tour gets a pipeline stop,
and Compare, the sweep and the CLI accept the loop."""
from __future__ import annotations

import re

import pytest
import torch

from fixtures import tiny_d2f as M
import s2d2
from components.views.canvas import legend_html, render_canvas
from components.tour.material import tour_stops
from components.views.attention_mask import mask_figure, pick_forward, pipeline_query_mask
from components.views.pipeline_blocks import in_flight_spans, lifecycle_figure, lifecycles, status_at
from s2d2.compare import compare
from s2d2.models.masks import segments_pattern


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return s2d2.load_model(M.write_llada(tmp_path_factory.mktemp("llada")), device="cpu", dtype=torch.float64)


@pytest.fixture(scope="module")
def trace(model):
    cfg = s2d2.preset("d2f-s2d2", block_length=4, gen_length=24, confidence_threshold=0.5, block_add_threshold=0.25)
    return s2d2.generate(model, [5, 9, 17, 33, 2, 71, 3], cfg, seed=0).trace


def test_the_canvas_outlines_every_block_in_flight(trace):
    step = 1 + max(range(len(trace.steps)), key=lambda i: len(trace.steps[i].in_flight))
    html = render_canvas(trace, step)
    blocks = [r.block for r in trace.steps[step - 1].in_flight]
    assert len(blocks) >= 2
    assert re.findall(r'data-block="(\d+)"', html) == [str(b) for b in blocks]
    assert html.count('class="blk-tag"') >= len(blocks) and "joined at step" in html
    incomplete = [r for r in trace.steps[step - 1].in_flight if not r.complete]
    assert html.count("blk cur incomplete") == len(incomplete)
    later = render_canvas(trace, len(trace.steps))
    assert "cached at step" in later  # blocks before the window carry their state too
    assert "blocks in flight" in legend_html(trace)


def test_lifecycle_states_and_chart(trace):
    lives = lifecycles(trace)
    assert set(lives) == {b.index for b in trace.blocks}
    first = lives[trace.blocks[0].index]
    assert status_at(first, 0) == "waiting to join"
    assert status_at(first, first.added + 1) in ("in flight", "fully active", "finished")
    assert status_at(first, len(trace.steps)) == "cached"
    fig = lifecycle_figure(trace, 3)
    names = [d.name for d in fig.data]
    assert names == ["in flight", "fully active", "finished", "cached", "tokens decoded"]
    assert sum(len(d.x) for d in fig.data if d.name == "fully active") >= len(trace.blocks) - 1
    dots = next(d for d in fig.data if d.name == "tokens decoded")
    assert len(dots.x) == sum(1 for s in trace.steps for r in s.in_flight if r.decoded)
    assert "up to" in fig.layout.title.text
    assert in_flight_spans(trace, 0) == []


def test_the_mask_viewer_draws_the_d2f_mask(trace):
    P, B = len(trace.header.prompt_ids), 4
    assert pipeline_query_mask(0, P + B, P, B) == segments_pattern((P, B)).int().tolist()
    assert pipeline_query_mask(P, 3 * B, P, B) == segments_pattern((B, B, B)).int().tolist()
    k = next(i for i, s in enumerate(trace.steps) if len(s.in_flight) >= 2) + 1
    f = pick_forward(trace, k, "draft")
    fig = mask_figure(trace, k, "draft")
    assert "D2F" in fig.layout.title.text and f.kind in ("draft", "commit+draft", "prefill+draft")
    z = fig.data[0].z[::-1]  # rows top to bottom; the cache band column first when there is a cache
    rows = [r[1:] for r in z] if f.cache_len else [list(r) for r in z]
    assert rows == pipeline_query_mask(f.cache_len, f.input_len, P, B)
    verify = mask_figure(trace, k, "verify")
    assert "2L" in verify.layout.title.text
    cached = {e.block for s in trace.steps for e in s.events if e.event == "cached"}
    step = next(s.index + 1 for s in trace.steps if s.block in cached)
    commit = pick_forward(trace, step, "commit")  # the forward that cached the step's block
    assert commit is not None and commit.kind == "commit+draft"


def test_the_tour_has_a_pipeline_stop(trace):
    stops = tour_stops(trace)
    stop = next(s for s in stops if s.key == "pipeline")
    assert stop.kinds == ("canvas", "lifecycle") and "in flight" in stop.text and "fully active" in stop.text
    assert [s.key for s in stops][-1] == "run"


def test_compare_accepts_pipeline_lanes(model):
    comp = compare(model, [5, 9, 17, 33, 2], {"ar": s2d2.preset("ar", gen_length=16),
                                              "d2f": s2d2.preset("d2f", block_length=4, gen_length=16),
                                              "s2d2": s2d2.preset("d2f-s2d2", block_length=4, gen_length=16)})
    lane = comp.lane("s2d2")
    assert lane.nfe > 0 and lane.mean_acceptance_length is not None and comp.grid == 4
    commits = [c for b in comp.blocks for c in b.lanes["d2f"].commits]
    assert sorted(p for p, *_ in commits) == list(range(5, 21))
    for b in comp.blocks:  # every commit lies in the grid block it is listed under
        assert all(b.start <= p < b.start + b.length for p, *_ in b.lanes["s2d2"].commits) or b.start < 0


def test_the_d2f_sweep_grid_runs(model, tmp_path):
    from s2d2.sweeps.bench import run_grid
    from s2d2.sweeps.grid import load_grid
    from s2d2.tasks.sets import load_task
    from tests.support.lanes import tiny_with_tokenizer

    cells = load_grid("d2f")
    assert sum(c.config.loop == "pipeline" for c in cells) == 8 and len({c.name for c in cells}) == len(cells)
    picked = [cells[0], cells[2], next(c for c in cells if c.name == "d2f-s2d2-b4")]
    rows = run_grid(tiny_with_tokenizer(), load_task("arithmetic", 2), picked, tmp_path, gen_length=8,
                    progress=False)
    assert [r["name"] for r in rows] == [c.name for c in picked] and all(r["nfe_per_token"] > 0 for r in rows)


def test_the_cli_runs_a_pipeline_preset(tmp_path, capsys):
    from s2d2.__main__ import main

    out = tmp_path / "t.json"
    main(["generate", "--model", "tiny", "--prompt", "Tom has 12 apples. He buys 7 more. How many apples does Tom "
          "have now?", "--preset", "d2f-s2d2", "--set", "block_length=4", "--set", "gen_length=16", "--trace",
          str(out)])
    trace = s2d2.Trace.from_json(out.read_text())
    assert trace.header.config["loop"] == "pipeline" and any(s.in_flight for s in trace.steps)


def test_the_shipped_pipeline_example_replays_with_blocks_in_flight():
    from components.files.examples import list_examples, load_pair

    example = list_examples()["Pipeline · blocks in flight · D2F"]
    trace, baseline = load_pair(example)
    assert trace.header.config["loop"] == "pipeline" and baseline.header.config["method"] == "diffusion"
    assert trace.header.model.name == "tiny" and trace.replay() == trace.footer.output_ids
    step = 1 + max(range(len(trace.steps)), key=lambda i: len(trace.steps[i].in_flight))
    assert len(trace.steps[step - 1].in_flight) >= 3
    assert len(re.findall(r'data-block="\d+"', render_canvas(trace, step))) >= 3
    assert any(s.verification.first_reject is not None for s in trace.steps)
    assert next(s for s in tour_stops(trace) if s.key == "pipeline").step == step


def test_the_app_tour_reaches_the_shipped_pipeline_example(trace):
    """The opening run is not a pipeline run: the tour's pipeline stop draws the shipped example instead."""
    from components.files.examples import examples_dir, first_example
    from components.tour.material import load_material
    from components.tour.pictures import stop_views

    label, opening = first_example()
    material = load_material(opening, label, directory=examples_dir())
    stops = tour_stops(material)
    i = next(i for i, s in enumerate(stops) if s.key == "pipeline")
    stop = stops[i]
    assert stop.trace == "pipeline" and stop.example == "Pipeline · blocks in flight · D2F"
    views = stop_views(material, stops, i)
    assert views["tour_lifecycle"]["visible"] and views["tour_canvas"]["visible"]
    assert "data-block" in views["tour_canvas"]["value"] and [s.key for s in stops][-1] == "run"
