"""bench/stages/rules.py: the rules each row's answers follow, as functions of numbers: the margin and its edges,
faster and slower, the stop rule, learning's rerun band, the narrow band, precision, stalls; and over thousands of
made-up benches, how often the margin rule errs."""

import math
import random

import numpy as np
import pandas as pd
import pytest

from bench import catalogue
from bench.stages import intervals, rules

HAIR = 1e-4  # a ratio this far either side of an edge


def test_the_interval_is_scipys_t_interval_on_the_log_ratios():
    ratios = [1.1, 1.2, 1.15, 1.05]
    estimate, low, high = intervals.interval(ratios)
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    t = 3.182446305284263  # Student's t, 3 degrees of freedom, 97.5th percentile
    assert estimate == pytest.approx(math.exp(mean))
    assert (low, high) == pytest.approx((math.exp(mean - t * sd / 2), math.exp(mean + t * sd / 2)))
    assert rules.classify(low, high) == "faster" and rules.classify(0.99, 1.02) == "same"
    assert rules.classify(0.5, 0.9) == "slower" and rules.classify(0.9, 1.1) == "unsettled"


def test_an_interval_is_precise_within_5_percent_or_a_quarter_of_a_large_effect():
    assert rules.precise(1.0, 0.96, 1.04) and not rules.precise(1.0, 0.9, 1.1)
    assert rules.precise(0.2, 0.16, 0.25) and not rules.precise(0.2, 0.1, 0.4)  # log: +-0.22 against 1.61 / 4
    assert not rules.precise(1.1, 0.95, 1.27) and not rules.precise(1.0, math.nan, math.nan)


@pytest.mark.parametrize(
    "low, high, answer",
    [
        (0.98, 1.08, "unsettled"),  # holds 1, above the band's low edge: not faster (a faster rule at 0.97 said so)
        (1.001, 1.08, "faster"),
        (0.93, 0.999, "slower"),
        (0.92, 1.02, "unsettled"),  # holds 1, below the band's low edge: not slower, not the same
        (0.97, 1.03, "same"),  # the band's edges themselves
        (0.969, 1.03, "unsettled"),
        (1.01, 1.03, "same"),  # wholly above 1 but inside the band: the band comes first, no difference
    ],
)
def test_an_answer_is_faster_or_slower_only_where_the_interval_leaves_1(low, high, answer):
    assert rules.classify(low, high) == answer


def test_the_rounds_that_would_settle_a_row_grow_with_its_noise():
    def needed(low, high, speedup=1.2):
        return rules.rounds_to_settle(
            pd.Series(dict(speedup=speedup, speedup_low=low, speedup_high=high, rounds_paired=3))
        )

    assert needed(1.0, 1.44) > needed(0.9, 1.6) / 4 and needed(0.8, 1.8) > needed(1.0, 1.44) > 3
    assert needed(0.99, 1.45) > 3 and needed(1.15, 1.25) <= 3  # already narrow enough: no more than it had
    # within the margin: already (0.95x to 1.05x after 3 rounds), or given rounds (fewer than answer.ROUNDS_AT_MOST,
    # past which the words give up)
    assert needed(0.95, 1.05, speedup=1.0) == 3 and 3 < needed(0.6, 1.67, speedup=1.0) < 50
    assert math.isnan(needed(math.nan, math.nan)) and needed(1.2, 1.2) == math.inf  # no interval; no noise to shrink


def drifting(effect, rounds, beside, drift=0.04, noise=0.01, seed=0):
    """Rows of runs.csv on a machine whose speed drifts within each round (a random walk, sd `drift` a run): the
    baseline beside every other row (beside=True: B X1 X2 B ...) or once a round, first (beside=False). Each run's
    time is its place: ten seconds apart."""
    rng, rows, t = random.Random(seed), [], 0
    speed = 1.0
    for r in range(1, rounds + 1):
        order = ["baseline", "x1", "x2", "baseline", "row", "x3", "baseline"] if beside else ["baseline", "x1", "x2",
                                                                                              "row", "x3"]  # fmt: skip
        for k, variant in enumerate(order):
            speed *= math.exp(rng.gauss(0, drift))
            rate = 100 * speed * (effect if variant == "row" else 1.0) * math.exp(rng.gauss(0, noise))
            rows.append(dict(variant=variant, kind="train", workload="small", repeat=r, run=f"{variant}-{r}.{k}",
                             status="ok", samples_per_s=rate, global_batch_size=64, dataset="generated", busy=False,
                             time_utc=f"2026-11-29T00:{t // 60:02d}:{t % 60:02d}", wall_s=0.0))  # fmt: skip
            t += 10
    return pd.DataFrame(rows)


def test_a_baseline_beside_each_row_takes_out_the_drift_within_a_round():
    """A machine whose speed wanders (a random walk, 4% a run of 10 s, as a round of 7 minutes moved the AVX2 EPYC's
    baseline 15%), a row 10% faster, 20 made-up benches of 4 rounds: read against the round's one baseline, four runs
    from it, the drift is in every ratio and fewer than half settle; read against the baseline interpolated between
    the runs beside it, nearly all do, their intervals less than half as wide."""
    settled, widths = {True: 0, False: 0}, {True: 0.0, False: 0.0}
    for seed in range(20):
        for beside in True, False:
            ratios = intervals.paired(drifting(1.1, 4, beside, seed=seed), "samples_per_s", "baseline")["row"]
            estimate, low, high = intervals.interval(ratios)
            settled[beside] += rules.classify(low, high) == "faster"
            widths[beside] += intervals.half_width(estimate, low, high) / 20
    assert settled[True] >= 18 and settled[False] <= 10, settled
    assert widths[True] < widths[False] / 2, widths


@pytest.mark.parametrize(
    "speedup,low,high,rounds,more,why",
    [
        (0.19, 0.17, 0.21, 2, False, "decided"),  # slower
        (1.19, 1.09, 1.30, 3, False, "decided"),  # faster: its 98% interval lies above 1 too
        (1.19, 1.02, 1.39, 3, True, "open"),  # its 95% interval above 1, its 98% not: a round more
        (1.00, 0.70, 1.43, 3, True, "open"),  # about 9 rounds would bring it within the margin
        (1.06, 0.89, 1.27, 3, True, "open"),  # about 11 rounds would decide it, read from 3: not given up yet
        (1.06, 0.89, 1.27, 4, False, "below the noise"),  # read from 4 (GIVE_UP): more than the bench runs
        (0.95, 0.84, 1.07, 6, False, "below the noise"),  # about 21 would
        (1.06, math.nan, math.nan, 1, True, "one round"),
    ],
)
def test_a_row_gets_another_round_only_while_it_is_still_open(speedup, low, high, rounds, more, why):
    row = dict(speedup=speedup, speedup_low=low, speedup_high=high, rounds_paired=rounds)
    assert rules.needs_rounds(row) == (more, why)


def test_a_row_below_the_machines_noise_is_given_up_after_four_rounds_of_its_own():
    """0.99x +-13%: on its own 1 degree of freedom its spread says little; with the machine's noise pooled (6 degrees of
    freedom) about 80 rounds would bring it within +-3%, more than the bench runs: given up as below the noise once 4
    rounds of its own (GIVE_UP) say so, not 3, whose estimate still moves with their noise; within +-10%, 3 rounds
    would."""
    row = dict(speedup=0.99, speedup_low=0.87, speedup_high=1.13, rounds_paired=2, margin=0.03)  # the narrow margin
    assert rules.needs_rounds(row) == (True, "open")
    assert rules.rounds_to_settle(dict(row, speedup_df=6.0)) > rules.MAX_ROUNDS
    assert rules.needs_rounds(dict(row, speedup_df=6.0, rounds_paired=rules.GIVE_UP - 1)) == (True, "open")
    assert rules.needs_rounds(dict(row, speedup_df=6.0, rounds_paired=rules.GIVE_UP)) == (
        False,
        "below the noise",
    )
    assert rules.rounds_to_settle(dict(row, speedup_df=6.0, margin=0.1)) == 3


def symmetric(centre, half):
    """A 95% interval on the log scale: centre x/ exp(half)."""
    return centre * math.exp(-half), centre * math.exp(half)


def within_edges(margin, df):
    """(low, high) of a 95% interval whose 90% interval (at df) ends exactly on 1 + margin: the upper edge."""
    scale = intervals.t_quantile(0.5 + intervals.CONFIDENCE / 2, df) / intervals.t_quantile(
        0.5 + rules.EQUIVALENCE / 2, df
    )
    half90 = math.log1p(margin) / 2  # a 90% interval from (1+m)^0 ... centred at sqrt(1+m), reaching 1+m
    centre = math.exp(half90)
    return symmetric(centre, half90 * scale)


@pytest.mark.parametrize("margin", [0.05, 0.10, 0.2])
def test_a_90pc_interval_just_inside_the_margin_is_within_it_and_just_outside_is_open(margin):
    """The upper edge: the 90% interval ending a hair below 1 + m is within the margin; a hair above, it is not (and
    its interval holds 1: open)."""
    df = 4.0
    low, high = within_edges(margin, df)
    assert intervals.narrower(low, high, df, rules.EQUIVALENCE)[1] == pytest.approx(1 + margin)
    assert rules.decide(low * 0.999, high * 0.999, df, margin) == "same"
    assert rules.decide(low * 1.001, high * 1.001, df, margin) == "unsettled"


@pytest.mark.parametrize("margin", [0.05, 0.10])
def test_the_lower_edge_is_one_over_one_plus_the_margin(margin):
    """The lower edge mirrors the upper on the log scale: 1/(1+m), not 1 - m."""
    df = 4.0
    low, high = within_edges(margin, df)
    low, high = 1 / high, 1 / low  # mirrored: its 90% interval begins on 1/(1+m)
    assert intervals.narrower(low, high, df, rules.EQUIVALENCE)[0] == pytest.approx(1 / (1 + margin))
    assert rules.decide(low * 1.001, high * 1.001, df, margin) == "same"
    assert rules.decide(low * 0.999, high * 0.999, df, margin) == "unsettled"
    assert 1 / (1 + margin) > 1 - margin  # the rule is not 1 - m: that point would be read as within


def test_faster_and_slower_need_the_deciding_interval_beyond_1():
    """A 95% interval beyond 1 is not enough: the 98% one decides (the bench looks after every round). Just above
    1 is faster, just below is open; slower mirrors it."""
    df, half = 3.0, 0.2
    scale = intervals.t_quantile(0.5 + rules.DECIDING / 2, df) / intervals.t_quantile(
        0.5 + intervals.CONFIDENCE / 2, df
    )
    centre = math.exp(half * scale)  # the 98% interval begins exactly on 1
    low, high = symmetric(centre, half)
    assert low > 1  # the 95% interval alone would call it faster
    assert rules.decide(low * 1.001, high * 1.001, df) == "faster"
    assert rules.decide(low * 0.999, high * 0.999, df) == "unsettled"
    assert rules.decide(1 / (high * 1.001), 1 / (low * 1.001), df) == "slower"
    assert rules.decide(1 / (high * 0.999), 1 / (low * 0.999), df) == "unsettled"


def test_within_the_margin_comes_first_even_wholly_above_1():
    """A row 1.05x faster for sure, inside +-10%: within the margin, not worth adopting for speed; at +-3%: faster."""
    low, high = 1.04, 1.06
    assert rules.decide(low, high, 8.0, 0.10) == "same"
    assert rules.decide(low, high, 8.0, 0.03) == "faster"


def test_no_interval_is_open_and_a_point_is_read_as_itself():
    assert rules.decide(math.nan, math.nan, 1.0) == "unsettled"
    assert rules.decide(1.02, 1.02, 0.0) == "same"  # identical ratios: no spread
    assert rules.decide(1.2, 1.2, 0.0) == "faster"


def test_a_decided_row_gets_no_more_rounds_and_an_open_one_does():
    row = dict(speedup=1.0, speedup_low=0.97, speedup_high=1.03, rounds_paired=3, speedup_df=4.0, margin=0.1)
    assert rules.needs_rounds(row) == (False, "decided")
    wide = dict(row, speedup_low=0.85, speedup_high=1.18)
    assert rules.needs_rounds(wide) == (True, "open")
    assert rules.needs_rounds(dict(wide, margin=0.5)) == (False, "decided")  # the margin is the row's


def test_rounds_to_decide_count_the_margin():
    """A row at 1.00x +-25% after 3 rounds: a few more decide it within +-10%; within +-1% none the bench runs would."""
    row = dict(speedup=1.0, speedup_low=0.8, speedup_high=1.25, rounds_paired=3, speedup_df=2.0, margin=0.1)
    assert 3 < rules.rounds_to_settle(row) <= 6
    assert rules.rounds_to_settle(dict(row, margin=0.01)) > rules.MAX_ROUNDS


def test_the_baseline_against_itself_is_a_cpu_benchs_row_and_checks_the_rule():
    row = catalogue.BY_NAME[catalogue.SELF]
    assert row.script == "train.py" and row.flags == () and row.on_cpu and not row.on_gpu and row.by_default
    assert rules.self_check(dict(variant=catalogue.SELF, speed_answer="same")) == "holds"
    assert rules.self_check(dict(variant=catalogue.SELF, speed_answer="unsettled")) == "holds"
    assert rules.self_check(dict(variant=catalogue.SELF, speed_answer="faster")) == "fails"
    assert rules.self_check(dict(variant=catalogue.SELF, speed_answer="slower")) == "fails"
    assert rules.self_check(dict(variant="amp", speed_answer="faster")) is None


def made_up_bench(rng, effect, sd, margin, draws_a_round=3):
    """One row of a made-up CPU bench as --repeats auto runs it: a paired log ratio a round, normal around the effect
    with sd `sd`, and the machine's noise measured beside it (draws_a_round baseline draws a round of the same sd, half
    a degree of freedom each: intervals.noise); a look after every round from MIN_ROUNDS, stopping where needs_rounds
    says, MAX_ROUNDS at most. Its answer when it stopped."""
    ratios, draws = [], []
    for r in range(1, rules.MAX_ROUNDS + 1):
        ratios.append(math.exp(rng.normal(math.log(effect), sd)))
        draws += list(rng.normal(0, sd, draws_a_round))
        if r < rules.MIN_ROUNDS:
            continue
        noise = intervals.Noise(float(np.mean(np.square(draws))), len(draws) / 2)
        estimate, low, high = intervals.interval(ratios, noise=noise)
        df = intervals.degrees(ratios, noise)
        row = dict(speedup=estimate, speedup_low=low, speedup_high=high, rounds_paired=r, speedup_df=df, margin=margin)
        if not rules.needs_rounds(row)[0]:
            break
    return rules.decide(low, high, df, margin)


BENCHES = 2000


@pytest.mark.slow
@pytest.mark.parametrize("sd", [0.03, 0.07, 0.10])
def test_over_thousands_of_made_up_benches_the_rule_errs_at_most_5pc_of_the_time(sd):
    """At the noise of a quiet machine (0.03 a draw) and of the 2-core EPYCs (0.07, 0.10), with the default margin:
    a row with no effect (the baseline against itself) is called faster or slower in at most 5% of benches, and a row
    1.5 margins away (1.15x, and 1/1.15x) is called within the margin in at most 5%. Measured (seed 0, 2,000 each,
    docs/bench.md): no effect 0.0%, 3.8%, 4.1% called faster or slower; 1.5 margins 0.0%, 0.5%, 0.95% within. At
    0.07, giving a row up as below the noise after 2 rounds (and deciding at 97.5%, the rule of 2026-12-05) left more
    rows with no effect open than GIVE_UP's 4 rounds do (18.2% against 9.8% measured)."""
    rng, margin = np.random.default_rng(0), rules.MARGIN
    null = [made_up_bench(rng, 1.0, sd, margin) for _ in range(BENCHES)]
    wrong = sum(answer in ("faster", "slower") for answer in null) / BENCHES
    assert wrong <= 0.05
    for effect in 1 + 1.5 * margin, 1 / (1 + 1.5 * margin):
        real = [made_up_bench(rng, effect, sd, margin) for _ in range(BENCHES)]
        assert sum(answer == "same" for answer in real) / BENCHES <= 0.05
    if sd == 0.03:  # a quiet machine decides nearly every row: the rule is not right by saying nothing
        assert null.count("same") / BENCHES >= 0.95
    if sd == 0.07:  # rows given up later are decided more often
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rules, "GIVE_UP", 0)
            patch.setattr(rules, "DECIDING", 0.975)
            again = np.random.default_rng(0)
            early = [made_up_bench(again, 1.0, sd, margin) for _ in range(BENCHES // 4)]
        assert early.count("unsettled") / len(early) > null.count("unsettled") / BENCHES


@pytest.mark.parametrize(
    "low, high, said",
    [
        (1.1 + HAIR, 1.3, "worse"),  # wholly above 1 + band (0.1)
        (1.1 - HAIR, 1.3, None),  # above 1, not above 1 + band: no more than reruns show
        (1.1, 1.3, None),  # on the edge: not beyond it
        (1.01, 1.05, None),  # wholly above 1, well inside the band
        (0.7, 1 / 1.1 - HAIR, "better"),  # wholly below 1 / (1 + band)
        (0.7, 1 / 1.1 + HAIR, None),
        (0.95, 0.99, None),  # wholly below 1, inside the band
        (math.nan, math.nan, None),  # one round: no interval
        (1.5, 1.5, None),  # rounds that replay the same numbers say nothing of the noise
    ],
)
def test_a_final_loss_learns_worse_or_better_only_beyond_what_reruns_show(low, high, said):
    assert rules.learns(low, high) == said


def test_the_rerun_band_holds_on_a_rows_own_rounds():
    """Final losses 5-7% above the baseline's in each of three rounds: wholly above 1.00x, within the band."""
    estimate, low, high, said = rules.learning(pd.Series([1.05, 1.06, 1.07]))
    assert 1 < low < high < 1.1 and said is None
    assert rules.learning(pd.Series([1.15, 1.16, 1.17]))[3] == "worse"
    assert rules.learns(low, high, band=0.01) == "worse"  # a narrower band would call it worse


@pytest.mark.parametrize(
    "low, high, said",
    [
        (0.98, 1.03, "same"),  # inside 0.97x..1.03x (BAND 3%)
        (0.98, 1.03 + HAIR, "unsettled"),  # its top a hair beyond the band, and it holds 1
        (1.01, 1.03 + HAIR, "faster"),  # wholly above 1, beyond the band's top
        (1.01, 1.03 - HAIR, "same"),
        (0.97, 1.02, "same"),
        (0.97 - HAIR, 1.02, "unsettled"),
        (0.97 - HAIR, 0.99, "slower"),
        (0.97 + HAIR, 0.99, "same"),
        (math.nan, math.nan, "unsettled"),
    ],
)
def test_no_difference_is_an_interval_inside_the_narrow_band_and_no_wider(low, high, said):
    assert rules.classify(low, high) == said


@pytest.mark.parametrize(
    "estimate, half, said",
    [
        (1.0, 0.05 - HAIR, True),  # within +-5% (PRECISION): no more rounds would change the answer
        (1.0, 0.05 + HAIR, False),
        (0.2, 5**0.25 - 1 - HAIR, True),  # a quarter of a 0.2x effect's size: log(1 + half) <= 0.25 * log(5)
        (0.2, 5**0.25 - 1 + HAIR, False),
    ],
)
def test_an_interval_is_precise_within_five_percent_or_a_quarter_of_the_effect(estimate, half, said):
    """half: the half-width on the log scale, as a share of the estimate: the interval estimate / (1 + half) to
    estimate * (1 + half)."""
    assert rules.precise(estimate, estimate / (1 + half), estimate * (1 + half)) is said


@pytest.mark.parametrize(
    "p90, said",
    [(125.0 + HAIR, (125.0 + HAIR, 100.0)), (125.0, (125.0, 100.0)), (125.0 - HAIR, None)],
)
def test_a_row_stalls_where_its_90th_percentile_step_is_a_quarter_over_its_median_or_more(p90, said):
    assert rules.stalls(dict(step_time_p90_ms=p90, step_time_median_ms=100.0)) == said
