"""Issue 28 row 5: the tour shows only what it has explained. The first stop's key names only the states its canvas
shows; the routing picture before the calibration stop has no K̂-vs-K panel; the exactness stop says its settings
in words before their names; the calibration stop's button opens the step its text dwells on; the last stop's
button follows its moment slider."""
from __future__ import annotations

import re

import pytest

from components.tour import material as tour
from components.tour import pictures as tour_views
from components.tour.stops import KINDS
from components.tour.tau_control import recorded_tau
from components.views.calibration import calibration
from components.views.lockstep import moments

from tests.support.tour_material import OPENING


@pytest.fixture(scope="module")
def stops(material):
    return {s.key: (i, s) for i, s in enumerate(tour.tour_stops(material))}


def _views(material, stops, key, moment=None):
    i, _ = stops[key]
    listed = [s for _, s in sorted(stops.values(), key=lambda x: x[0])]
    return tour_views.stop_views(material, listed, i, recorded_tau(material.trace), moment)


def test_the_first_stop_keys_only_the_states_its_canvas_shows(material, stops):
    html = _views(material, stops, "draft")["tour_canvas"]["value"]
    canvas, legend = html.split('class="s2d2-legend', 1)
    shown = set(re.findall(r'class="tok st-([a-z_]+)', canvas))
    keyed = set(re.findall(r'class="tok st-([a-z_]+)"', legend))  # the states' own entries
    assert keyed == shown and "drafted" in keyed
    assert not {"accepted", "resampled", "discarded"} & keyed  # explained at stops 4-5, not yet
    assert ('class="sep"' in canvas) == ("│" in legend)  # the block separator keyed exactly when drawn
    tips = re.findall(r'title="([^"]*)"', canvas)  # the draft moment's details tell no future
    drafted = [t for t in tips if "drafted: the model" in t]
    assert drafted and not any(w in t for t in drafted for w in ("discard", "reject", "q=", "committed"))
    assert not any("discard" in t or "reject" in t for t in tips)


def test_no_k_hat_panel_before_the_calibration_stop(material, stops):
    for key in ("route", "skip"):
        fig = _views(material, stops, key)["tour_routing"]["value"]
        names = {t.name for t in fig.data}
        assert not {"K̂", "accepted K"} & names, (key, names)
        assert "xaxis2" not in fig.layout.to_plotly_json()


def test_the_exactness_stop_says_its_settings_in_words_first(material, stops):
    text = stops["exact"][1].text
    for name in ("greedy-exact acceptance", "AR-consistent cache", "KV reuse", "fused commits"):
        words, _, _ = text.partition(f"{name})")
        assert words != text and len(words.splitlines()[-1]) > len(name) + 20  # words come before the name
    assert "greedy_exact" not in text and "cache_ver" not in text and "argmax" not in text.split("Measured")[0]


def test_the_calibration_button_opens_the_step_its_text_names(material, stops):
    _, stop = stops["calibration"]
    c = calibration(material.trace)
    worst = c.step[c.worst()]
    assert f"largest miss is step {worst}" in stop.text and stop.step == worst
    assert _views(material, stops, "calibration")["tour_show"]["value"] == f"Show step {worst} in Replay"


def test_the_last_stops_button_follows_its_moment_slider(material, stops):
    i, run = stops["run"]
    ms = moments(tour_views.pair(material))
    listed = [s for _, s in sorted(stops.values(), key=lambda x: x[0])]
    seen = set()
    for k in (0, len(ms) // 2, len(ms) - 1):
        want = ms[k].at["S2D2"]
        assert _views(material, stops, "run", k)["tour_show"]["value"] == f"Show step {want} in Replay"
        moved = tour_views.lockstep_views(material, k, run)
        assert moved["tour_show"]["value"] == f"Show step {want} in Replay" and moved["tour_step"] == want
        assert tour_views.target(listed, i, moved["tour_step"]) == (run.example, want)
        seen.add(want)
    assert len(seen) > 1  # the slider really moves the step


def test_next_and_back_write_the_stop_index_and_its_pictures_with_the_selection():
    """A second press of Next right after the first moves on from the new stop: the press itself writes the index it
    selected (before, only the stop's select event did, and a quick second press re-selected the stop on screen).
    The same event draws the new stop's pictures (issue 38 row 4: drawn by the select event, the old stop's pictures
    stayed up under the new words for a round trip)."""
    import app

    cfg = app.demo.get_config_file()
    by_elem = {c.get("props", {}).get("elem_id"): c["id"] for c in cfg["components"]}
    tour = by_elem["tour"]
    pictures = {by_elem[f"tour-{kind}"] for kind in KINDS}
    for button in ("tour-next", "tour-back"):
        moves = [d for d in cfg["dependencies"] if any(t[0] == by_elem[button] for t in d["targets"])
                 and tour in d["outputs"]]
        assert len(moves) == 1, button
        assert pictures <= set(moves[0]["outputs"]), button  # every picture drawn (or hidden) with the words
        index = moves[0]["inputs"][0]
        assert index in moves[0]["outputs"]  # it reads the index it writes: the State holding the stop


def test_the_live_controls_views_are_drawn_from_their_value_after_the_stop_arrives():
    """The route stop's routing plot and the run stop's lockstep are drawn by an event chained after the stop's own,
    from the control's value then: a τ typed while the stop's event ran is not drawn over with the old one."""
    import app

    cfg = app.demo.get_config_file()
    by_elem = {c.get("props", {}).get("elem_id"): c["id"] for c in cfg["components"]}
    for key, control, view in (("route", "tour-tau", "tour-routing"), ("run", "tour-moment", "tour-lockstep")):
        if control not in by_elem:
            continue
        (step,) = [c["id"] for c in cfg["components"] if f"tour-{key}" in (c.get("props", {}).get("elem_classes")
                                                                            or [])]
        (select,) = [d for d in cfg["dependencies"] if any(t[0] == step for t in d["targets"])]
        chained = [d for d in cfg["dependencies"] if d.get("trigger_after") == select["id"]]
        # inputs: whether the select event drew the stop (a State: only then does it draw), then the control
        assert [(d["inputs"][1:], by_elem[view] in d["outputs"]) for d in chained] == [([by_elem[control]], True)], key
        assert len(chained[0]["inputs"]) == 2 and chained[0]["inputs"][0] in select["outputs"], key


def test_the_route_stop_says_its_bar_as_the_guess_other_screens_name(material, stops):
    """Stop 2 sets τ_score at 1.5; the last stop and Compare name the same run "Verify when it expects a gain
    (K̂ ≥ 2.5)": the route stop says both forms (the K̂ one behind its symbols' tap), so they read as one rule."""
    from components.views.describe import routing_words
    from s2d2.config import DecodeConfig

    cfg = material.trace.header.config
    need = cfg["score_threshold"] + cfg["penalty_coef"]
    text = stops["route"][1].text
    assert f"sets it at {cfg['score_threshold']:g})." in text  # in words; the K̂ form behind the symbols' tap
    assert f"With a fixed cost of {cfg['penalty_coef']:g}, τ_score = {cfg['score_threshold']:g} means a step checks " \
           f"when K̂ ≥ {need:g}" in text.split('<details class="symbols">')[1]
    assert f"(K̂ ≥ {need:g})" in routing_words(DecodeConfig.from_dict(cfg))
