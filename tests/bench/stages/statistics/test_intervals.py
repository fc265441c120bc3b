"""bench/stages/statistics/intervals.py: the statistics of paired rounds: the pairing at a run's time, the machine's
noise on the baseline's own runs, the two pooled, and the baseline runs left out as disturbed, every edge a hair either
side."""

import math

import pandas as pd
import pytest

from bench.stages.statistics import intervals

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
    assert ratios["baseline"] == [1.0]  # the reference against itself: 1 exactly
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


def test_a_narrower_interval_scales_its_half_width_by_the_two_t_quantiles_on_the_log_scale():
    """narrower: the CONFIDENCE interval low..high at df degrees read at another confidence: its centre kept (log
    scale), its half-width times t(0.5 + c/2, df) / t(0.975, df); the point where low == high; NaN without an
    interval, a low at or below 0, or no degrees of freedom."""
    from scipy import stats

    scale = stats.t.ppf(0.95, 4) / stats.t.ppf(0.975, 4)
    low, high = intervals.narrower(1.0, 1.44, 4, 0.90)
    assert (low, high) == pytest.approx((1.2 * math.exp(-math.log(1.2) * scale), 1.2 * math.exp(math.log(1.2) * scale)))
    assert intervals.narrower(1.0, 1.44, 4, intervals.CONFIDENCE) == pytest.approx((1.0, 1.44))
    assert intervals.narrower(1.1, 1.1, 0, 0.9) == (1.1, 1.1)
    for nothing in [(math.nan, 1.2, 4), (0.9, math.nan, 4), (0.0, 1.2, 4), (-0.5, 1.2, 4), (0.9, 1.2, 0),
                    (0.9, 1.2, math.nan)]:  # fmt: skip
        assert all(math.isnan(x) for x in intervals.narrower(*nothing, 0.9)), nothing
    assert not math.isnan(intervals.narrower(HAIR, 1.2, HAIR, 0.9)[0])  # just inside each edge: an interval


def test_the_half_width_is_a_share_of_the_estimate_on_the_log_scale():
    assert intervals.half_width(1.0, 0.8, 1.25) == pytest.approx(0.25)
    assert intervals.half_width(HAIR, 0.8, 1.25) == pytest.approx(0.25)
    for nothing in [(1.0, math.nan, 1.2), (1.0, 0.9, math.nan), (0.0, 0.9, 1.2), (-1.0, 0.9, 1.2)]:
        assert math.isnan(intervals.half_width(*nothing)), nothing


def test_busy_runs_and_the_rounds_they_disturb():
    """is_busy reads the runner's flag as written back (True, 'True', 'true'; anything else not busy; no column:
    none); busy_rounds: a row's rounds where it or the reference ran busy, only rounds the row ran."""
    flags = pd.DataFrame(dict(busy=[True, "True", "true", False, "False", None]))
    assert list(intervals.is_busy(flags)) == [True, True, True, False, False, False]
    bare = pd.DataFrame(dict(x=[1, 2]), index=[5, 7])
    assert list(intervals.is_busy(bare)) == [False, False] and list(intervals.is_busy(bare).index) == [5, 7]
    runs = pd.DataFrame(
        [dict(variant="baseline", repeat=r, busy=r == 2) for r in (1, 2, 3)]
        + [dict(variant="amp", repeat=r, busy=r == 3) for r in (1, 2, 3)]
        + [dict(variant="fused", repeat=1, busy=False), dict(variant="fused", repeat=4, busy=False)]
    )
    assert intervals.busy_rounds(runs, "baseline") == dict(baseline=[2], amp=[2, 3], fused=[])


def test_a_run_is_read_only_where_it_trained_the_references_steps_in_its_round():
    """at_reference_steps: a run whose --steps differ from the reference's in its round is left out (its loss is of
    another schedule); a round with no reference run keeps its runs; no commands: every run."""
    runs = pd.DataFrame(
        [
            dict(variant="baseline", repeat=1, command="python train.py --steps 100"),
            dict(variant="amp", repeat=1, command="python train_amp.py --steps 100"),
            dict(variant="baseline", repeat=2, command="python train.py --steps 100"),
            dict(variant="amp", repeat=2, command="python train_amp.py --steps 50"),
            dict(variant="compile", repeat=2, command="python train_compile.py"),
            dict(variant="amp", repeat=3, command="python train_amp.py --steps 70"),
        ]
    )
    kept = intervals.at_reference_steps(runs, "baseline")
    assert list(kept.index) == [0, 1, 2, 5]
    assert intervals.at_reference_steps(runs.drop(columns="command"), "baseline") is not None
    assert len(intervals.at_reference_steps(runs.drop(columns="command"), "baseline")) == 6
    assert len(intervals.at_reference_steps(runs.assign(command=None), "baseline")) == 6


def test_a_runs_time_is_its_start_and_half_its_wall_time_else_its_place():
    runs = pd.DataFrame(
        dict(time_utc=["1970-01-01T00:00:10", None, "1970-01-01T00:01:00"], wall_s=[4.0, 2.0, None]), index=[3, 4, 5]
    )
    assert list(intervals.run_times(runs)) == [12.0, 1.0, 60.0]
    assert list(intervals.run_times(runs.drop(columns="wall_s"))) == [10.0, 1.0, 60.0]
    assert list(intervals.run_times(runs.drop(columns="time_utc"))) == [0.0, 1.0, 2.0]
    assert list(intervals.run_times(runs.assign(time_utc=None))) == [0.0, 1.0, 2.0]


def test_a_pairing_reads_each_rows_last_run_of_a_round_with_a_reference_run_and_leaves_out_empty_rates():
    """paired: a rate of 0 or none is no run; a run tried again counts by its last; a round without a reference run
    gives no ratio; the reference's own are 1.0 a round, in the rounds' order."""
    rows = pd.DataFrame(
        [
            dict(variant="baseline", repeat=2, samples_per_s=100.0),
            dict(variant="amp", repeat=2, samples_per_s=120.0),
            dict(variant="amp", repeat=2, samples_per_s=150.0),
            dict(variant="baseline", repeat=1, samples_per_s=100.0),
            dict(variant="amp", repeat=1, samples_per_s=0.0),
            dict(variant="fused", repeat=1, samples_per_s=None),
            dict(variant="amp", repeat=3, samples_per_s=90.0),
            dict(variant="baseline", repeat=3, samples_per_s=0.0),
        ]
    )
    ratios = intervals.paired(rows, "samples_per_s", "baseline")
    assert ratios == dict(baseline=[1.0, 1.0], amp=[pytest.approx(1.5)])


def test_the_interval_is_scipys_t_interval_on_the_log_ratios():
    ratios = [1.1, 1.2, 1.15, 1.05]
    estimate, low, high = intervals.interval(ratios)
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    t = 3.182446305284263  # Student's t, 3 degrees of freedom, 97.5th percentile
    assert estimate == pytest.approx(math.exp(mean))
    assert (low, high) == pytest.approx((math.exp(mean - t * sd / 2), math.exp(mean + t * sd / 2)))
    assert intervals.interval([1.2, 1.2, 1.2]) == (pytest.approx(1.2), pytest.approx(1.2), pytest.approx(1.2))
    one = intervals.interval([1.2])  # one ratio: its estimate, no interval; none positive and finite: nothing
    assert one[0] == pytest.approx(1.2) and math.isnan(one[1]) and math.isnan(one[2])
    assert all(math.isnan(x) for x in intervals.interval([0.0, -1.0, math.inf, math.nan]))


def test_only_positive_finite_ratios_are_read_and_one_ratio_has_no_degrees_of_freedom():
    assert list(intervals.log_ratios([0.0, -1.0, math.inf, math.nan, 2.0])) == [math.log(2.0)]
    assert intervals.degrees([1.2]) == 0 and intervals.degrees([1.2, 1.3]) == 1


@pytest.mark.parametrize("df, pools", [(1.0, True), (0.0, False)])
def test_the_machines_noise_pools_from_a_degree_of_freedom_of_its_own(df, pools):
    logs = intervals.log_ratios([1.10, 1.12])
    found = intervals.pooled(logs, intervals.Noise(0.05**2, df))
    assert (found is not None) == pools and (not pools or found.df == df + 1)
    assert intervals.pooled(intervals.log_ratios([1.1]), intervals.Noise(0.05**2, 4.0)) is None


def test_a_row_no_noisier_than_a_silent_machine_pools_and_a_spread_row_does_not():
    """A machine of no measured variance: a row with no spread pools (0 / 0 is no evidence of more noise), a row
    with any spread keeps its own."""
    assert intervals.pooled(intervals.log_ratios([1.1, 1.1]), intervals.Noise(0.0, 4.0)) is not None
    assert intervals.pooled(intervals.log_ratios([1.1, 1.2]), intervals.Noise(0.0, 4.0)) is None


def test_a_narrower_interval_keeps_an_off_centre_intervals_centre():
    from scipy import stats

    scale = stats.t.ppf(0.95, 3) / stats.t.ppf(0.975, 3)
    centre, half = (math.log(0.9) + math.log(1.21)) / 2, (math.log(1.21) - math.log(0.9)) / 2
    expected = (math.exp(centre - half * scale), math.exp(centre + half * scale))
    assert intervals.narrower(0.9, 1.21, 3, 0.9) == pytest.approx(expected)


def test_a_pairing_reads_rates_below_one_and_rounds_after_one_without_a_reference():
    rows = pd.DataFrame(
        [
            dict(variant="amp", repeat=0, samples_per_s=0.9),
            dict(variant="baseline", repeat=1, samples_per_s=0.5),
            dict(variant="amp", repeat=1, samples_per_s=0.75),
        ]
    )
    assert intervals.paired(rows, "samples_per_s", "baseline") == dict(amp=[pytest.approx(1.5)], baseline=[1.0])


def test_the_reference_at_a_time_is_its_run_there_between_two_and_the_nearest_outside_them():
    points = [(20.0, 400.0), (0.0, 100.0), (10.0, 200.0)]  # (time, value), in any order
    assert intervals.interpolated(points, 10.0) == pytest.approx(200.0)  # at a run's own time: that run
    assert intervals.interpolated(points, 15.0) == pytest.approx(math.sqrt(200.0 * 400.0))  # log scale
    assert intervals.interpolated(points, -5.0) == 100.0 and intervals.interpolated(points, 25.0) == 400.0
    assert intervals.interpolated(points[:1] + points[2:], 0.0) == 200.0  # the first run left out


def test_the_machines_noise_reads_rates_below_one_and_leaves_out_runs_of_no_rate():
    """The same baselines as above at 1/200 of their rates (0.5 and 0.55 samples/s), a run of rate 0 and one of none
    between them: the same noise."""
    runs = [("baseline", 100.0, 0), ("x", 150.0, 10), ("baseline", 110.0, 20), ("baseline", 0.0, 30),
            ("baseline", 100.0, 40), ("baseline", None, 45), ("y", 90.0, 50), ("baseline", 110.0, 60)]  # fmt: skip
    rows = pd.DataFrame(
        [
            dict(variant=v, repeat=1, samples_per_s=None if rate is None else rate / 200, wall_s=0.0,
                 time_utc=f"2026-11-29T00:00:{t:02d}")
            for v, rate, t in runs
        ]
    )  # fmt: skip
    found = intervals.noise(rows, "samples_per_s", "baseline")
    assert found.variance == pytest.approx(math.log(1.1) ** 2) and found.df == 1.0


def test_a_time_that_is_not_one_is_read_as_the_runs_place():
    runs = pd.DataFrame(dict(time_utc=["not a time", "1970-01-01T00:00:10"]))
    assert list(intervals.run_times(runs)) == [0.0, 10.0]


def spiked(place, shuffle=False):
    """Baseline runs of one round, a second apart, whose draws (each run against the two beside it, log scale, in
    hundredths) are eight usual ones, 1, 1, 1, 1, 3, 3, 3, 3 (a median of 2: the bound 5 x 2 / 0.6745 = 14.8), and a
    spike of 18 at draw `place` with its two neighbours at -9 each (read against it); rows in time order, or shuffled
    so that their labels' order is not time's. Returns (runs, the spike's label)."""
    usual = [1, -1, 3, -3, 1, -1, 3, -3]
    draws = usual[:place - 1] + [-9, 18, -9] + usual[place - 1:]  # fmt: skip
    x = [0.0, 0.0]
    for d in draws:  # d = x[i] - (x[i-1] + x[i+1]) / 2
        x.append(2 * x[-1] - x[-2] - 2 * d)
    x = x[:len(draws) + 2]  # fmt: skip
    rows = pd.DataFrame(
        [dict(variant="baseline", repeat=1, samples_per_s=100 * math.exp(v / 100),
              time_utc=f"2026-11-29T00:00:{t:02d}", wall_s=0.0) for t, v in enumerate(x)]
    )  # fmt: skip
    spike = place + 1  # the run of draw `place` (draws start at the second run)
    if shuffle:  # labels 0, 5, 10, 2, 7, ...: in their order, no run is beside the one it is beside in time
        labels = [(5 * t) % len(rows) for t in range(len(rows))]
        rows, spike = rows.set_axis(labels), labels[spike]
    return rows, spike


@pytest.mark.parametrize("place", [1, 5])
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_spike_is_read_against_the_usual_draws_that_share_no_run_with_it(place, shuffle):
    """The spike and its two neighbours (in time, whatever the rows' order) are left out of what is usual: eight
    usual draws remain, their median 2, and 18 lies beyond 5 robust sds; with the neighbours read as usual the median
    would be 3 and the bound 22, and with one more left out too few (7) would remain to say what is usual."""
    rows, spike = spiked(place, shuffle)
    when = intervals.run_times(rows)
    found = intervals.draws(rows, "samples_per_s", "baseline", when)
    assert sorted(round(abs(d) * 100) for d in found.values()) == [1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 18]
    assert spike in intervals.disturbed(rows, "samples_per_s", "baseline", when)
