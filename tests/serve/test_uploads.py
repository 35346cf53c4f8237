"""Hostile uploads (issue 8, rows 1, 2, 7, 8): every number in a trace or sweep file that drives work is bounded and
cross-checked before anything is built; every refusal is one readable line naming the field and the bound; what is
accepted renders, within the payload of a legitimate 512-token trace."""
from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures import trace_factory as tf
from fixtures import upload_fuzz as uf

from components.sweep import panel as sw
from components.files import traces as traces_io
from components.views.attention_mask import mask_figure
from s2d2.limits import limits  # noqa: E402
from s2d2.trace import Trace, trace_json_schema  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BASE = json.loads((ROOT / "assets" / "traces" / "03-verify-when-it-pays--block-4.json").read_text())
BASES = [json.loads(p.read_text()) for p in uf.SHIPPED]


def refused(data) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    with pytest.raises(traces_io.TraceError) as exc:
        traces_io.parse_text(raw)
    message = str(exc.value)
    assert "\n" not in message and len(message) < 400, message
    return message


def edited(**paths):
    """A copy of the base trace with `a__b__0__c=value` edits."""
    data = json.loads(json.dumps(BASE))
    for path, value in paths.items():
        keys = [int(k) if k.isdigit() else k for k in path.split("__")]
        node = data
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return data


def test_committed_schema_is_the_declared_one():
    """docs/trace.schema.json is generated from the dataclasses; regenerate it with
    python -c "import json; from s2d2.trace import trace_json_schema as s; print(json.dumps(s(), indent=1, ensure_ascii=False))" > docs/trace.schema.json"""
    committed = json.loads((ROOT / "docs" / "trace.schema.json").read_text(encoding="utf-8"))
    assert committed == json.loads(json.dumps(trace_json_schema()))
    assert committed["properties"]["steps"]["maxItems"] > 0 and committed["additionalProperties"] is False


def test_every_shipped_and_synthetic_trace_still_loads():
    for data in BASES:
        assert Trace.from_dict(data).to_dict() == data
    for name, build in tf.SCENARIOS.items():
        trace = build()
        assert Trace.from_json(trace.to_json()).to_dict() == trace.to_dict(), name


def test_trace_module_does_not_import_metrics():
    """The trace <-> metrics circle is gone: metrics reads a trace; the trace package imports no metrics."""
    files = sorted((ROOT / "s2d2" / "trace").glob("*.py"))
    assert len(files) >= 4
    for path in files:
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not any(m and m.endswith("metrics") for m in imported), path.name


def test_issue_rows_are_refused_by_name():
    blocks = BASE["blocks"] + [{"index": 99, "start": 0, "length": 10_000_000, "prompt_tail": 0}]  # row 1
    assert "trace.blocks[6]: index 99, start 0, length 10000000: blocks must tile [28, 96)" in refused(
        edited(blocks=blocks))
    msg = refused(edited(steps=[], header__total_length=100_000))  # row 2
    assert "trace.header.total_length: 100000; must be prompt (29) + gen_length (64) padded to blocks of 4: 96" in msg
    assert "trace.header.seed: must be <= 9223372036854775807 (got a 250-digit number)" in refused(
        edited(header__seed=10**249))  # row 7
    assert "trace.steps[0].window: at least 2 items (got [5])" in refused(edited(steps__0__window=[5]))
    assert "trace.steps[0].span: at least 2 items (got [])" in refused(edited(steps__0__span=[]))
    assert "trace.steps[0].window: [24, 36] must be [start, end) inside block 7 = [28, 32)" in refused(
        edited(steps__0__window=[24, 36]))
    assert "trace.steps[0].forwards: [99] must be at most 3 indices below 19" in refused(
        edited(steps__0__forwards=[99]))
    assert "not valid JSON (recursion limit exceeded" in refused(b"[" * 100_000 + b"]" * 100_000)
    assert "trace.header.config: nested deeper than 6 levels" in refused(
        edited(header__config__extra=[[[[[[[1]]]]]]]))


def test_too_many_steps_and_forwards_are_refused():
    data = edited()
    steps = [dict(s, index=i) for i, s in enumerate(data["steps"] * 20)]
    assert "trace.steps: 120 steps; a run of 67 positions has at most 84" in refused(edited(steps=steps))
    forwards = [dict(data["forwards"][1], index=i, nfe_after=i + 1) for i in range(100)]
    assert "trace.forwards: 100 forwards for 6 steps and 6 blocks" in refused(edited(forwards=forwards))


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("S2D2_MAX_GEN_TOKENS", "32")
    assert "trace.header.gen_length: 64; must be 1 to 32 (S2D2_MAX_GEN_TOKENS)" in refused(BASE)
    monkeypatch.setenv("S2D2_MAX_GEN_TOKENS", "lots")
    with pytest.raises(ValueError, match="S2D2_MAX_GEN_TOKENS: expected a number"):
        limits()
    monkeypatch.delenv("S2D2_MAX_GEN_TOKENS")
    monkeypatch.setenv("S2D2_MAX_BLOCK_LENGTH", "2")
    assert "trace.header.config.block_length: 4; at most 2 (S2D2_MAX_BLOCK_LENGTH)" in refused(BASE)


def _mutated(data: st.DataObject) -> dict:
    doc = BASES[data.draw(st.integers(0, len(BASES) - 1), label="base")]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        path = data.draw(st.sampled_from(uf.paths(doc) if isinstance(doc, (dict, list)) else [()]), label="at")
        doc = uf.mutate(doc, path, data.draw(st.sampled_from(uf.MUTATIONS)), data.draw(st.integers(0, 999)))
    return doc


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
@pytest.mark.slow
def test_fuzzed_uploads_render_or_are_refused(data):
    """Mutations of the shipped traces (numbers blown up, lists emptied or nested, types swapped, hostile strings):
    each loads and renders, or is refused with a validation message; never any other exception."""
    raw = uf.dumps(_mutated(data))
    try:
        trace = traces_io.parse_text(raw)
    except traces_io.TraceError as exc:
        assert str(exc).startswith(("Invalid trace file: trace", "Not a trace", "File too large")), str(exc)
        return
    uf.render_everything(trace, scrub=False)


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**64 + 1, 1e308], ids=["1e400", "-1e400", "2^64+1", "1e308"])
@pytest.mark.slow
def test_numbers_beyond_a_float_in_free_form_values_render_or_are_refused(value):
    """Every number in a step's policy details and inputs set, one at a time, to an int too large for a float (the
    fuzzer found k_hat = 10**400 crashing the routing figure) or to the largest float: refused or rendered."""
    base = json.loads((ROOT / "assets" / "traces" / "01-verifier-catches-a-wrong-digit.json").read_text())
    spots = [p for p in uf.paths(base) if p[:1] == ("steps",) and len(p) > 3 and p[2] == "decision"
             and isinstance(uf._get(base, p), (int, float)) and not isinstance(uf._get(base, p), bool)]
    assert len(spots) >= 10
    accepted = 0
    for spot in spots:
        try:
            trace = traces_io.parse_text(uf.dumps(uf._set(copy.deepcopy(base), spot, value)))
        except traces_io.TraceError:
            continue
        uf.render_everything(trace, scrub=False)
        accepted += 1
    assert accepted  # details are free-form: such values are accepted, and must render


@pytest.mark.slow
def test_worst_accepted_trace_costs_what_a_legit_512_token_trace_costs():
    """The heaviest trace the validator accepts (longest prompt and generation, largest block, longest strings,
    64 candidates per distribution, as many steps and forwards as allowed) renders a payload within 1.6x that of
    the largest legitimate recording (same geometry, ordinary strings): long strings cost more characters, but
    nothing grows with what a file claims. Times are measured in benchmarks/hostile_uploads.py."""
    lim = limits()
    worst = uf.worst_trace(lim.max_upload_bytes)
    assert len(worst.to_json()) <= lim.max_upload_bytes
    accepted = traces_io.parse_text(worst.to_json())
    prefill = mask_figure(accepted, 0)  # a 2048-token prefill folds into the cache band: 128 rows shown
    assert len(prefill.data[0].y) == 128 and "(last 128 shown)" in prefill.layout.title.text
    shown = len(accepted.header.prompt_ids) - 1  # the last prompt row is shown (outlined); the first is folded
    assert "outlined: position" in mask_figure(accepted, 0, "auto", shown).layout.title.text
    assert not mask_figure(accepted, 0, "auto", 0).layout.shapes
    worst_size = uf.render_everything(accepted)
    legit_size = uf.render_everything(uf.legit_trace())  # built here, so not re-read (it exceeds an upload)
    assert worst_size <= 1.6 * legit_size, (worst_size, legit_size)


# -- sweep results files -----------------------------------------------------------------------------------------

def _sweep(tmp_path: Path, data) -> str:
    path = tmp_path / "results.json"
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return sw.sweep_views(path, "upload")[0]


def test_sweep_files_are_validated_and_escaped(tmp_path):
    good = json.loads((ROOT / "assets" / "results" / "sweep.json").read_text())
    assert f"{len(good['cells'])} cells" in _sweep(tmp_path, good)
    assert _sweep(tmp_path, b"[" * 100_000 + b"]" * 100_000).startswith("⚠ Not a results file: results: not valid JSON")
    assert _sweep(tmp_path, dict(good, meta="x")).startswith("⚠ Not a results file: results.meta: expected an object")
    cell = dict(good["cells"][0], accuracy=7)
    assert "results.cells\\[0\\].accuracy: must be &lt;= 1.0" in _sweep(tmp_path, dict(good, cells=[cell]))
    for key in ("nfe_per_token", "wall_per_token"):  # no decode takes 0 forwards (the probe found both crash)
        cell = dict(good["cells"][1], **{key: 0})
        shown = key.replace("_", "\\_")  # the status line is Markdown-escaped
        status = _sweep(tmp_path, dict(good, cells=[good["cells"][0], cell]))
        assert f"results.cells\\[1\\].{shown}: must be &gt; 0.0 \\(got 0\\)" in status
    hostile = "`x` [link](javascript:alert(1)) <img src=x>"
    cells = [dict(c, name=hostile) if c["method"] == "s2d2" else c for c in good["cells"]]
    status = _sweep(tmp_path, dict(good, cells=cells, meta=dict(good["meta"], task=hostile, device=hostile)))
    assert "<img" not in status and "`x`" not in status and "](" not in status
    assert "\\`x\\` \\[link\\]\\(javascript:alert\\(1\\)\\) &lt;img src=x&gt;" in status
    fig = sw.pareto_figure(sw.load_results_file(tmp_path / "results.json"))
    assert "<img" not in fig.layout.title.text and all("<img" not in t for tr in fig.data for t in (tr.text or []))


def test_a_sweep_file_with_huge_speeds_is_one_message_not_a_plot_overflow(tmp_path):
    """Every speed 1e308 (finite, so the validator took it) overflowed the log axes into a bare "Error"."""
    good = json.loads((ROOT / "assets" / "results" / "sweep.json").read_text())
    costs = ("nfe_per_token", "wall_per_token", "tokens_per_forward", "query_tokens_per_token", "speedup_nfe_vs_ar",
             "speedup_wall_vs_ar", "mean_acceptance_length", "speedup_nfe_vs_baseline", "speedup_wall_vs_baseline")
    cells = [{k: (1e308 if k in costs and isinstance(v, float) else v) for k, v in c.items()} for c in good["cells"]]
    status = _sweep(tmp_path, dict(good, cells=cells))
    assert status.startswith("⚠ Not a results file: results.cells\\[0\\].") and "must be &lt;= 1000000000.0" in status
    assert sw.sweep_views(tmp_path / "results.json", "upload")[1:] == (None, None, [])
    big = [dict(c, nfe_per_token=1e9, wall_per_token=1e9) for c in good["cells"]]  # at the bound: plotted
    status = _sweep(tmp_path, dict(good, cells=big))
    views = sw.sweep_views(tmp_path / "results.json", "upload")
    assert not status.startswith("⚠") and views[1] is not None and views[2] is not None


def test_lean_traces_load_as_written_and_their_accepted_prefix_stays_bounded(tmp_path):
    """A lean trace (`detailed=False`: verifications record no rows) of any loop loads back equal to itself: its
    accepted prefix is bounded by the step's region, not indexed into the rows it never recorded (every lean
    trace with a rejection was refused, found by a round trip of random configs), and a prefix past the region
    is still refused by name."""
    import random

    import s2d2
    from tests.support.random_configs import VOCAB, case_models, random_case

    models, verified = case_models(tmp_path), 0
    for family in VOCAB:
        for number in range(3):
            case = random_case(random.Random(f"lean-{family}-{number}"), family, VOCAB[family])
            for prompt, cfg, seed in zip(case.prompts, case.cfgs, case.seeds):
                trace = s2d2.generate(models[family], prompt, cfg, seed=seed, detailed=False).trace
                assert Trace.from_json(trace.to_json()).to_dict() == trace.to_dict(), (family, cfg)
                if any(s.verification is not None for s in trace.steps):
                    verified, last = verified + 1, trace
    assert verified > 10
    data = last.to_dict()
    step = next(s for s in data["steps"] if s.get("verification"))
    step["verification"]["accepted_len"] = 10_000
    assert "accepted_len 10000 and first_reject" in refused(json.dumps(data).encode())
