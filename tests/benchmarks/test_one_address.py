"""`benchmarks/load_test.py --classroom --one-address` is wired, bounded and says what it skips (no server here: the
run itself is stood in for; the figures are measured by running the benchmark)."""
from __future__ import annotations

import pytest

from benchmarks import class_runs, light_client, load_test, one_address


def test_the_option_reaches_the_one_address_run_with_its_settings(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(one_address, "run_one_address", lambda args: seen.append(args) or 0)
    assert load_test.main(["--classroom", "--one-address", "--visitors", "12", "--budget-s", "90",
                           "--phase-s", "20", "--figures", "bd"]) == 0
    (args,) = seen
    assert (args.visitors, args.budget_s, args.phase_s, args.figures, args.retry_s, args.step_every_s) == \
        (12, 90, 20, "bd", 5.0, 2.0)
    assert args.client == "light" and one_address.CLIENTS["light"][0] is light_client.light_page  # the default
    load_test.main(["--classroom", "--one-address", "--client", "gradio"])
    assert seen[-1].client == "gradio" and one_address.CLIENTS["gradio"][0] is class_runs.client
    seen.pop()
    ran = []
    monkeypatch.setattr("benchmarks.classroom.run_classroom", lambda args: ran.append(args) or 0)
    load_test.main(["--classroom"])  # without the option: the many-address classroom, as before
    assert len(ran) == 1 and len(seen) == 1


@pytest.mark.parametrize("argv, word", [(["--visitors", "500"], "--visitors"), (["--budget-s", "1"], "--budget-s"),
                                        (["--figures", "xyz"], "--figures"), (["--client", "curl"], "--client"),
                                        (["--flood-threads", "0"], "--flood-threads")])
def test_out_of_bounds_settings_are_one_line_and_exit_2(argv, word, monkeypatch, capsys) -> None:
    monkeypatch.setattr(one_address, "run_one_address", lambda args: pytest.fail("ran with a bad setting"))
    with pytest.raises(SystemExit) as stop:
        load_test.main(["--classroom", "--one-address", *argv])
    assert stop.value.code == 2 and word in capsys.readouterr().err.splitlines()[-1]


def test_every_student_shares_one_loopback_served_address() -> None:
    assert {class_runs.address_of(i, True) for i in range(30)} == {class_runs.CLASS_IP}
    assert len({class_runs.address_of(i, False) for i in range(30)}) == 30
    assert one_address.SERVER_ENV["S2D2_TRUSTED_PROXIES"] == "127.0.0.1"  # headers read from loopback only


def test_a_phase_that_no_longer_fits_the_budget_is_skipped_and_says_so(capsys) -> None:
    budget = one_address.Budget(30)
    assert budget.fits("(b) replay", 10) and not budget.fits("(d) eight flooding addresses", 200)
    assert "(d) eight flooding addresses: skipped" in capsys.readouterr().out


def test_figure_d_prints_where_the_honest_steps_time_went(monkeypatch, capsys) -> None:
    """(d) passes its measurement to the split (printed only with S2D2_BENCH_EVENT_SPLIT / _SHARE_LEDGER set),
    as (b) and (c) do; the floods and the round are stood in for."""
    seen, split, measured = [], [], {"window": (0.0, 1.0), "sessions": ["honest"]}
    monkeypatch.setattr(one_address, "run_one_address", lambda args: seen.append(args) or 0)
    load_test.main(["--classroom", "--one-address", "--figures", "d", "--phase-s", "5"])
    monkeypatch.setattr(one_address, "start_floods", lambda *a: lambda: {200: 1})
    monkeypatch.setattr(one_address, "step_round", lambda *a: measured)
    monkeypatch.setattr(one_address, "step_line", lambda label, m: label)
    monkeypatch.setattr(one_address, "print_split", lambda proc, m: split.append((proc, m)))
    one_address.phases("http://127.0.0.1:1", "server", {}, None, seen[0], one_address.Budget(600))
    assert split == [("server", measured)]
    assert "(d) honest visitor beside eight flooding addresses" in capsys.readouterr().out
