"""Every view shows LLaDA2.x edits: the canvas (old → new, struck through), the commit map and the per-block
forwards figure, the replay summary and metrics, Compare's metric rows, the sweep row, and the what-if."""
from __future__ import annotations

import pytest

import s2d2
from s2d2 import DecodeConfig
from tests.support.scripted_model import ScriptedModel


@pytest.fixture(scope="module")
def edited():
    """A decode in which position 4 is filled with 5 at step 1 and edited to 9 at step 2 (block 1)."""
    model = ScriptedModel({(4, 5): (9, 0.8)}, fill=lambda pos: 5 if pos == 4 else 1 + pos % 10, fill_p=0.6,
                          verify_script={6: (13, 0.99)})
    cfg = DecodeConfig(loop="editing", method="s2d2", policy="mask_span_length", min_span_length=3,
                       block_length=4, gen_length=9, editing_threshold=0.5)
    res = s2d2.generate(model, [1, 2, 3], cfg, seed=0)
    step = next(s for s in res.trace.steps if s.edits)
    return res.trace, step.index + 1  # scrubber value right after the edit


def test_canvas_marks_the_edit_old_to_new(edited):
    from components.views.canvas import legend_html, render_canvas

    trace, after = edited
    before = render_canvas(trace, after - 1)
    assert "st-edited" not in before
    html = render_canvas(trace, after)
    assert 'class="tok st-edited new"' in html and "<s>&lt;5&gt;</s> " in html  # the old token struck through
    assert "edited at step" in html and "→ &#x27;&lt;9&gt;&#x27;" in html  # tooltip: old → new with p
    assert "st-edited" in render_canvas(trace, len(trace.steps), show_future=True)
    assert "self-correction" in legend_html()


def test_figures_count_edits(edited):
    from components.views.figures import commit_map, nfe_by_block

    trace, _ = edited
    cm = commit_map(trace)
    edit_pts = [t for t in cm.data if t.name == "edit"]
    assert len(edit_pts) == 1 and list(edit_pts[0].y) == [4]
    nb = nfe_by_block(trace)
    marks = [t for t in nb.data if t.name and t.name.startswith("✎ edits per block")]
    assert len(marks) == 1 and list(marks[0].customdata) == [0, 1, 0]


def test_replay_summary_metrics_and_title(edited):
    from components.views.step_views import metrics_table, step_summary, trace_title

    trace, after = edited
    assert "1 edited ('<5>' → '<9>')" in step_summary(trace, after)
    rows = {label: (value, meaning) for label, value, meaning in metrics_table(trace)}
    assert rows["edits (self-correction)"][0] == "1" and "replaced" in rows["edits (self-correction)"][1]
    assert rows["edits per token"][0] == f"{1 / trace.footer.generated_length:.3f}"
    assert "editing τ_edit=0.5" in trace_title(trace)


def test_compare_and_sweep_report_edits_per_token(edited):
    from components.compare.lanes import metrics_table
    from s2d2.compare import compare_traces
    from s2d2.sweeps.grid import Cell, summarize

    trace, _ = edited
    comp = compare_traces({"a": trace, "b": trace})
    table = metrics_table(comp)
    row = next(r for r in table["data"] if r[0].startswith("edits per token"))
    n = trace.footer.generated_length
    assert row[1] == row[2] and float(row[1]) == pytest.approx(1 / n, abs=5e-3)  # printed to 2 decimals
    out = summarize(Cell("x", DecodeConfig.from_dict(trace.header.config)),
                    [{"i": 0, "correct": 1, "nfe": 5, "generated": 10, "wall_s": 1.0, "query_tokens": 5,
                      "num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0, "verify_steps": 0,
                      "decided_steps": 1, "edits": 2}])
    assert out["edits_per_token"] == pytest.approx(0.2)


def test_whatif_carries_editing_state(edited):
    from components.compare.whatif_panel import whatif_table
    from s2d2.whatif import what_if

    trace, _ = edited
    same = what_if(trace, min_span_length=2)  # no decision flips: the recorded edit stands
    assert same.first_flip is None and same.exact_edits == 1 and "the 1 edit(s) recorded" in same.summary
    assert same.config["loop"] == "editing" and same.config["editing_threshold"] == 0.5  # a re-run edits too
    assert "<th>edits</th>" in whatif_table(same) and "<td>1</td>" in whatif_table(same)
    flip = what_if(trace, min_span_length=1)  # verifies block 0's one-token span: the first step flips
    assert flip.first_flip == 0 and flip.exact_edits == 0 and "Editing state" not in flip.summary
