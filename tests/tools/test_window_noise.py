"""tools/window_noise.py: the noise of a pair by window length, on made-up costs and on a machine's runs."""

import math
import random

import pandas as pd
import pytest
import window_noise

from helpers import run


def test_on_made_up_costs_each_kind_of_noise_favours_its_own_window():
    table = window_noise.made_up(overhead_s=5.0, step_s=0.17).set_index(["noise", "timed"])
    assert table.xs(25, level="timed")["pair_sd"].round(6).tolist() == [0.07, 0.07, 0.07]  # each 0.07 at the bench's
    after = table["sd_10min"]
    # a run's own noise: the shorter the window, the more pairs ten minutes hold at the same noise each
    assert list(after["the run's own"]) == sorted(after["the run's own"])
    # the steps' jitter: a minute of steps is a minute of steps, and a shorter window pays more starts
    assert list(after["the steps' jitter"]) == sorted(after["the steps' jitter"], reverse=True)
    # drift: neighbours nearer in time share more of it
    assert list(after["drift"]) == sorted(after["drift"])


def test_the_pairs_are_read_a_block_and_a_length_at_a_time():
    rng, rows = random.Random(0), []
    for block in range(6):
        for timed, noise in ((12, 0.2), (50, 0.02)):
            for arm in "AB":
                rows.append(dict(block=block, timed=timed, arm=arm, wall_s=5 + 0.2 * timed, window_s=0.2 * timed,
                                 samples_per_s=100 * math.exp(rng.gauss(0, noise))))  # fmt: skip
    runs = pd.DataFrame(rows)
    table = window_noise.read(runs).set_index("timed")
    pairs = runs.pivot_table(index=["block", "timed"], columns="arm", values="samples_per_s")
    by_hand = (pairs["A"] / pairs["B"]).map(math.log).groupby("timed").std()
    assert table["pairs"].tolist() == [6, 6]
    assert table["pair_sd"].tolist() == pytest.approx(by_hand.tolist())
    assert table.loc[12, "sd_10min"] == pytest.approx(by_hand[12] / math.sqrt(600 / (2 * 7.4)))
    assert table.loc[12, "pair_sd"] > table.loc[50, "pair_sd"]


def test_a_run_cut_short_leaves_its_pair_out():
    runs = pd.DataFrame([dict(block=0, timed=12, arm="A", wall_s=7.0, window_s=2.0, samples_per_s=100.0),
                         dict(block=0, timed=12, arm="B", wall_s=7.0, window_s=2.0, samples_per_s=110.0),
                         dict(block=1, timed=12, arm="A", wall_s=7.0, window_s=2.0, samples_per_s=100.0)])  # fmt: skip
    assert window_noise.read(runs)["pairs"].tolist() == [1]


def test_drift_is_read_from_a_benchs_baseline_runs_by_the_seconds_between_them():
    """Four baseline runs, two near in time and alike, two far from them and slower: near pairs differ by 0.01 in
    log, far ones by 0.2; a busy run and another row are left out."""
    rows = [("baseline", 0, 1.00, False), ("baseline-again", 10, 1.01, False), ("amp", 20, 2.0, False),
            ("baseline", 200, 1.2, False), ("baseline", 210, 1.21, False), ("baseline", 220, 5.0, True)]  # fmt: skip
    runs = pd.DataFrame(
        [dict(variant=v, kind="train", status="ok", busy=busy, samples_per_s=100 * math.exp(log),
              time_utc=f"2026-12-05T00:{t // 60:02d}:{t % 60:02d}+00:00") for v, t, log, busy in rows]
    )  # fmt: skip
    table = window_noise.by_lag(runs).set_index("lag_s")
    assert table["pairs"].to_dict() == {"[0.0, 30.0)": 2, "[120.0, 240.0)": 4}
    assert table.loc["[0.0, 30.0)", "pair_sd"] == pytest.approx(0.01)
    assert table.loc["[120.0, 240.0)", "pair_sd"] == pytest.approx(math.sqrt((0.2**2 * 2 + 0.19**2 + 0.21**2) / 4))


def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "taken.csv").write_text("block\n")
    for flags, words in [
        (["--timed", "a,b"], "not a list of step counts"),
        (["--timed", "12,1"], "at least 2 timed steps"),
        (["--blocks", "1"], "at least 2 blocks"),
        (["--blocks", "x"], "not a whole number"),
        (["--data", tmp_path / "nowhere"], "--data: no folder"),
        (["--data", tmp_path, "--out", tmp_path / "taken.csv"], "exists: give a new file"),
        (["--read", tmp_path / "none.csv"], "no file"),
        (["--lags", tmp_path / "none.csv"], "no file"),
        (["--made-up", "--overhead", "-1"], "--overhead is at least 0"),
    ]:
        result = run("tools/window_noise.py", *flags)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
