"""bench/stages/intervals.py: the statistics of paired rounds: the pairing at a run's time, the machine's noise on
the baseline's own runs, the two pooled, and the baseline runs left out as disturbed, every edge a hair either side."""

import math

import pandas as pd
import pytest

from bench.stages import intervals

HAIR = 1e-4  # a ratio this far either side of an edge


def test_the_reference_is_interpolated_at_a_rows_time():
    """Between baseline runs of 100 (at 0 s) and 200 (at 20 s), a row at 10 s of 150 reads 150 / sqrt(100 * 200); a
    row after the last baseline reads against it alone."""
    rows = pd.DataFrame([
        dict(variant="baseline", repeat=1, samples_per_s=100.0, time_utc="2026-11-29T00:00:00", wall_s=0.0),
        dict(variant="x", repeat=1, samples_per_s=150.0, time_utc="2026-11-29T00:00:10", wall_s=0.0),
        dict(variant="baseline", repeat=1, samples_per_s=200.0, time_utc="2026-11-29T00:00:20", wall_s=0.0),
        dict(variant="y", repeat=1, samples_per_s=300.0, time_utc="2026-11-29T00:00:30", wall_s=0.0),
    ])  # fmt: skip
    ratios = intervals.paired(rows, "samples_per_s", "baseline")
    assert ratios["x"] == [pytest.approx(150 / math.sqrt(100 * 200))] and ratios["y"] == [pytest.approx(1.5)]
    assert ratios["baseline"] == [1.0]


def test_the_machines_noise_is_read_on_the_baseline_runs_between_two_others():
    """Baselines of 100, 110, 100, 110 at 0, 20, 40 and 60 s: the two between others read 110 / 100 and 100 / 110
    against them, a variance of log(1.1)^2 at half a degree of freedom each; one baseline a round measures none."""
    runs = [("baseline", 100.0, 0), ("x", 150.0, 10), ("baseline", 110.0, 20), ("baseline", 100.0, 40),
            ("y", 90.0, 50), ("baseline", 110.0, 60)]  # fmt: skip
    rows = pd.DataFrame(
        [
            dict(variant=v, repeat=1, samples_per_s=rate, wall_s=0.0, time_utc=f"2026-11-29T00:00:{t:02d}")
            for v, rate, t in runs
        ]  # fmt: skip
    )
    found = intervals.noise(rows, "samples_per_s", "baseline")
    assert found.variance == pytest.approx(math.log(1.1) ** 2) and found.df == 1.0
    once = rows.drop_duplicates("variant")
    assert intervals.noise(once, "samples_per_s", "baseline") is None
    assert intervals.interval([1.2, 1.3], noise=None) == intervals.interval([1.2, 1.3])  # no noise: the row's own t


def test_the_machines_noise_pools_with_a_rows_own_spread():
    """Two rounds (1 degree of freedom of its own) and the machine's noise at 4: t at 5 degrees, the variance of the
    two weighted 4 to 1; a row noisier than F(1, 4)'s 75th percentile explains keeps its own interval."""
    machine = intervals.Noise(0.05**2, 4.0)
    ratios = [1.10, 1.16]
    logs = [math.log(r) for r in ratios]
    own = (logs[0] - logs[1]) ** 2 / 2
    variance = (4 * 0.05**2 + own) / 5
    half = 2.570581835636314 * math.sqrt(variance / 2)  # Student's t, 5 degrees of freedom, 97.5th percentile
    estimate, low, high = intervals.interval(ratios, noise=machine)
    assert (low, high) == pytest.approx((estimate * math.exp(-half), estimate * math.exp(half)))
    assert intervals.degrees(ratios, machine) == 5.0 and intervals.degrees(ratios) == 1
    noisy = [1.0, 1.4]
    assert intervals.interval(noisy, noise=machine) == intervals.interval(noisy)
    assert intervals.degrees(noisy, machine) == 1


def test_a_baseline_run_its_neighbours_say_was_disturbed_is_not_read_against():
    """A round's baselines at about 100 but one at 40 (its steps slowed by something else on the machine): the row
    beside it is read against the baselines around it (1.21, not 1.9), the machine's noise leaves the disturbed run
    out (and reads its neighbours again without it), and a round without it pairs alike; with fewer than USUAL draws
    to say what is usual, none is left out."""
    usual = [("baseline", 100.0 + (-1) ** k * k % 3) for k in range(10)]  # 100 to 102
    rates = [("baseline", 100.0), ("x", 120.0), ("baseline", 101.0), ("baseline", 99.0), ("row", 120.0),
             ("baseline", 40.0), ("baseline", 100.0), *usual]  # fmt: skip
    rows = pd.DataFrame(
        [
            dict(variant=v, repeat=1, samples_per_s=rate, wall_s=0.0, time_utc=f"2026-11-29T00:01:{3 * k:02d}")
            for k, (v, rate) in enumerate(rates)
        ]  # fmt: skip
    )
    ratios = intervals.paired(rows, "samples_per_s", "baseline")
    assert ratios["row"] == [pytest.approx(120 / (99.0 ** (2 / 3) * 100.0 ** (1 / 3)))]
    assert ratios["x"] == [pytest.approx(120 / math.sqrt(100.0 * 101.0))]
    found = intervals.noise(rows, "samples_per_s", "baseline")
    assert found.df == 6.0 and found.variance < 0.002  # 12 draws, the disturbed one out, its neighbours drawn again
    quiet = rows[rows["samples_per_s"] != 40.0]
    assert intervals.paired(quiet, "samples_per_s", "baseline")["row"] == ratios["row"]
    assert intervals.noise(quiet, "samples_per_s", "baseline") == found
    few = rows.iloc[:9]  # 5 draws, 2 of them beside the disturbed run: too few say what is usual
    assert intervals.paired(few, "samples_per_s", "baseline")["row"][0] > 1.8


USUAL = [0.01, -0.01] * 4  # eight usual draws: median |draw| 0.01, a robust sd 0.01 / 0.6745


BOUND = 5 * 0.01 / 0.6745  # DISTURBED (5) robust sds: 0.0741


@pytest.mark.parametrize(
    "draw, usual, said",
    [
        (BOUND + HAIR, USUAL, True),
        (BOUND - HAIR, USUAL, False),
        (-(BOUND + HAIR), USUAL, True),  # a run disturbed faster as well as slower
        (-(BOUND - HAIR), USUAL, False),
        (1.0, USUAL[:7], False),  # seven draws cannot say what is usual: nothing is left out
        (BOUND + HAIR, USUAL[:8], True),  # eight can
    ],
)
def test_a_baseline_run_is_disturbed_just_beyond_five_robust_sds_of_its_usual_draws(draw, usual, said):
    assert intervals.off_its_neighbours(draw, usual) is said
