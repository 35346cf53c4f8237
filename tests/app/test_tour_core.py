"""Issue 38 rows 2-4 on the opening example's tour: a short core pass with the rest marked as going deeper; words
before symbols (the symbols one tap away, in a closed <details>), with the three things a learner asked said in
words; and every stop's words naming, first, the picture that stands first under them."""
from __future__ import annotations

import re

import pytest

from components.tour import material as tour
from components.tour.stops import CORE, KINDS
from components.views import residual
from fixtures import trace_factory as tf

# Reading pace the "about five minutes" rests on: 150 words a minute leaves a third of the time for the pictures
# (a learner read 12 stops of about 1,500 words, formulas first, in about 15 minutes).
WORDS_IN_FIVE_MINUTES = 700
SYMBOLS = ("K̂", "Σ", "Π", "α", "2L", "MASK")


@pytest.fixture(scope="module")
def stops(material):
    return tour.tour_stops(material)


def words_shown(text: str) -> str:
    """What a stop shows before a tap: its Markdown without the closed <details> blocks."""
    return re.sub(r"<details.*?</details>", "", text, flags=re.S)


def test_the_core_pass_is_short_and_the_rest_says_it_goes_deeper(stops):
    core = [s for s in stops if not s.deeper]
    assert [s.key for s in core] == list(CORE) and stops[:len(core)] == core  # the core first, all of it here
    head = tour.header(stops)
    assert f"core story in {len(core)} stops, about five minutes" in head
    assert f"Stops {len(core) + 1}–{len(stops)} go deeper" in head
    words = sum(len(words_shown(s.text).split()) for s in core)
    assert words <= WORDS_IN_FIVE_MINUTES, words
    titles = tour.numbered(stops)
    assert all(("Going deeper" in t) == s.deeper for s, t in zip(stops, titles))
    closing = [i for i in range(len(stops)) if tour.core_end(stops, i)]
    assert closing == [len(core) - 1] and "That is the core story" in tour.core_end(stops, len(core) - 1)


def test_routing_and_verifying_speak_words_before_symbols(stops):
    by_key = {s.key: s for s in stops}
    for key in ("route", "verify"):
        text = by_key[key].text
        shown = words_shown(text)
        assert not [sym for sym in SYMBOLS if sym in shown], (key, shown)  # no formula before the tap
        assert '<details class="symbols">' in text and "<details open" not in text
    assert "K̂ = Σₖ Πᵢ≤ₖ αᵢ" in by_key["route"].text and "2L" in by_key["verify"].text
    # what τ_score and τ_conf each decide, and why drafts that passed after the rejection are thrown away
    assert "τ_score** is the bar that score must clear" in by_key["route"].text
    assert "τ_score decides *whether* a step checks; τ_conf decides *what*" in by_key["skip"].text
    reject = by_key["reject"].text
    assert "even drafts that passed their own test" in reject and "with the rejected token in front of it" in reject


def test_the_residual_panel_says_what_greedy_drafts_change_without_jargon():
    t = tf.reject_at_zero()
    step = next(s.index + 1 for s in t.steps if s.verification and s.verification.first_reject is not None)
    page = residual.residual_html(t, step)
    assert "drafts greedily" in page and "sampler of q" not in page
    assert "does not follow q's odds exactly" in page


def test_each_stops_words_name_first_the_picture_standing_first_under_them(stops):
    for stop in stops:
        order = [KINDS.index(k) for k in stop.kinds]
        assert order == sorted(order), stop.key  # declared in the order they stand on the screen
        named = [p for p in stop.pictures if p.names]
        if len(stop.pictures) == 1 and not named:
            continue  # a lone picture: nothing else it could point at
        text = words_shown(stop.text)
        assert named and named[0] is stop.pictures[0], stop.key  # the first picture is the one named
        at = [text.find(p.names) for p in named]
        assert all(i >= 0 for i in at), (stop.key, [p.names for p in named])
        assert at[0] == min(at), stop.key  # and it is named before any other
