"""bench/stages/statistics/rules.py: the rules each row's answers follow, as functions of numbers: the margin and its
edges, faster and slower, the stop rule, learning's rerun band, the narrow band, precision, stalls; and over thousands
of made-up benches, how often the margin rule errs."""

import math
import random

import numpy as np
import pandas as pd
import pytest

from bench import catalogue
from bench.schema import SummaryRow, num
from bench.stages.statistics import intervals, rules

HAIR = 1e-4  # a ratio this far either side of an edge


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


def row(**fields):
    """A summary's row of made-up fields, as the rules read one (a pandas Series)."""
    return pd.Series(fields, dtype=object)


def test_a_rows_numbers_are_read_as_floats_and_nan_where_none():
    assert num(3) == 3.0 and num("2.5") == 2.5
    assert all(math.isnan(num(value)) for value in (None, float("nan"), pd.NA))
    assert math.isnan(num(SummaryRow.of(row(speedup=None)).speedup_low))  # a field the row does not hold: None


def test_a_misspelt_field_fails_where_the_rules_read_it():
    """A rule reading a field the schema does not define fails (AttributeError), not as a rule that never fires."""

    def misspelt(row):
        row = SummaryRow.of(row)
        return num(row.speed_answr)

    with pytest.raises(AttributeError, match="speed_answr"):
        misspelt(row(speed_answer="faster"))


def test_torch_is_blind_to_dalis_batches_on_a_gpu_alone():
    assert rules.torch_blind(row(loader="dali", device="cuda"))
    assert not rules.torch_blind(row(loader="dali", device="cpu"))
    assert not rules.torch_blind(row(loader="torchvision", device="cuda")) and not rules.torch_blind(row())


@pytest.mark.parametrize(
    "low, high, standing",
    [(100 + HAIR, 120, "above"), (100, 120, "at"), (90, 100, "at"), (90, 100 - HAIR, "below"), (None, None, "one")],
)
def test_a_row_stands_above_its_ceiling_only_where_its_interval_is_wholly_above_100pc(low, high, standing):
    found = rules.against_ceiling(row(ceiling_pct=101.0, ceiling_low_pct=low, ceiling_high_pct=high))
    assert found[0] == standing and found[1] == 101.0
    assert found[2:] == ((low, high) if low is not None else found[2:]) and (low is not None or math.isnan(found[2]))


def test_a_row_without_a_ceiling_has_no_standing():
    standing, pct, low, high = rules.against_ceiling(row(ceiling_low_pct=90.0, ceiling_high_pct=110.0))
    assert standing is None and math.isnan(pct) and (low, high) == (90.0, 110.0)


def test_bf16_is_emulated_where_the_device_says_it_is_not_native():
    for native in (False, "False", "false"):
        assert rules.emulated_bf16(row(amp_dtype="bf16", bf16_native=native))
    assert not rules.emulated_bf16(row(amp_dtype="bf16", bf16_native=True))
    assert not rules.emulated_bf16(row(amp_dtype="bf16")) and not rules.emulated_bf16(row(amp_dtype="fp16"))
    assert not rules.emulated_bf16(row(amp_dtype="fp16", bf16_native=False))


def test_a_step_is_the_global_batch_at_the_measured_rate_and_compute_is_it_less_the_wait():
    """step_ms: 1,000 x global batch / rate (NaN without a positive rate); compute_ms: the step less its share waiting
    (the whole step where the wait is not known); the wait a GPU's own (starved) where it has one, else the host's."""
    assert rules.step_ms(row(global_batch_size=256, rate_median=512.0)) == 500.0
    for rate in (0.0, -1.0, None):
        assert math.isnan(rules.step_ms(row(global_batch_size=256, rate_median=rate)))
    gpu = row(
        global_batch_size=256, rate_median=512.0, device="cuda", starved_steady_frac=0.2, data_wait_steady_frac=0.5
    )
    assert rules.waited(gpu) == 0.2 and rules.compute_ms(gpu) == pytest.approx(400.0)
    assert rules.waited(row(device="cuda", data_wait_steady_frac=0.5)) == 0.5
    cpu = row(
        global_batch_size=256, rate_median=512.0, device="cpu", starved_steady_frac=0.2, data_wait_steady_frac=0.5
    )
    assert rules.waited(cpu) == 0.5 and rules.compute_ms(cpu) == pytest.approx(250.0)
    assert rules.compute_ms(row(global_batch_size=256, rate_median=512.0, device="cpu")) == 500.0


@pytest.mark.parametrize(
    "warmup, median, needed",
    [
        ([300, 110, 105, 500], 100, 2),  # 110 is 1.1x the median: steady after the first; the last step left out
        ([300, 110 + HAIR, 105, 500], 100, 3),  # a hair over 1.1x: steady only after the second
        ([105, 100, 90, 500], 100, 1),  # steady from the first
        ([300, 200, 500], 100, None),  # none before the last steady
        ([], 100, None),
        ([300, 100], 0, None),
        ([300, 100], -5, None),
        ([300, 100], None, None),
    ],
)
def test_a_runs_warmup_needed_the_steps_before_it_held_within_1_1x_of_its_median(warmup, median, needed):
    assert rules.steady_after(warmup, median) == needed


def test_degrees_of_freedom_are_the_intervals_else_its_rounds_less_one():
    assert rules.degrees_of(row(speedup_df=7.5, rounds_paired=3)) == 7.5
    assert rules.degrees_of(row(rounds_paired=3)) == 2


def test_a_ratios_answer_is_the_narrow_rules_and_memorys_is_said_in_its_words():
    def answer(low=None, high=None, memory=False):
        ratios = row(memory_vs_peer_low=low, memory_vs_peer_high=high)
        return (
            rules.ratio_answer(ratios, "memory_vs_peer", memory=True)
            if memory
            else rules.ratio_answer(ratios, "memory_vs_peer")
        )  # speed's words by default

    assert answer(1.05, 1.2) == "faster" and answer(1.05, 1.2, memory=True) == "more"
    assert answer(0.8, 0.9, memory=True) == "less" and answer(0.99, 1.01, memory=True) == "same"
    assert answer(0.9, 1.1) == "unsettled"
    assert answer(high=1.1) is None and answer(memory=True) is None


def test_the_margins_and_the_deciding_intervals_are_the_speed_ups_read_at_90_and_98pc():
    one = row(speedup_low=1.0, speedup_high=1.44, speedup_df=4.0)
    assert rules.within_interval(one) == intervals.narrower(1.0, 1.44, 4.0, rules.EQUIVALENCE)
    assert rules.deciding_interval(one) == intervals.narrower(1.0, 1.44, 4.0, rules.DECIDING)
    older = row(speedup_low=1.0, speedup_high=1.44, rounds_paired=5)  # a summary from before speedup_df
    assert rules.within_interval(older) == intervals.narrower(1.0, 1.44, 4, rules.EQUIVALENCE)
    low, high = rules.deciding_interval(one)
    assert low < 1.0 and high > 1.44  # 98% is wider than 95%, 90% narrower
    assert all(math.isnan(x) for x in rules.within_interval(row(rounds_paired=1)))


@pytest.mark.parametrize(
    "variant, answer, said",
    [
        (catalogue.SELF, "faster", "fails"),
        (catalogue.SELF, "slower", "fails"),
        (catalogue.SELF, "same", "holds"),
        (catalogue.SELF, "unsettled", "holds"),
        (catalogue.SELF, None, None),
        ("amp", "faster", None),
    ],
)
def test_the_baseline_against_itself_fails_the_rule_only_where_faster_or_slower(variant, answer, said):
    assert rules.self_check(row(variant=variant, speed_answer=answer)) == said


def test_rounds_to_settle_need_an_interval_and_two_rounds():
    assert math.isnan(rules.rounds_to_settle(row(speedup=1.1, speedup_high=1.2, rounds_paired=3)))
    assert math.isnan(rules.rounds_to_settle(row(speedup=1.1, speedup_low=1.0, speedup_high=1.2, rounds_paired=1)))
    assert rules.rounds_to_settle(row(speedup=1.1, speedup_low=1.1, speedup_high=1.1, rounds_paired=3)) == math.inf
    assert rules.rounds_to_settle(row(speedup=1.1, speedup_low=1.0, speedup_high=1.2, rounds_paired=2)) >= 2


def test_each_rows_answers_are_fields_of_their_declared_types_on_a_copy():
    """answered: every DERIVED column, floats as floats (NaN where none), booleans as booleans, the rest objects;
    the summary given is left as it was."""
    summary = pd.DataFrame(
        [
            dict(variant="amp", global_batch_size=256, rate_median=512.0, device="cuda", loader="dali",
                 amp_dtype="bf16", bf16_native=False, speedup=1.2, speedup_low=1.1, speedup_high=1.3,
                 rounds_paired=3, speed_answer="faster"),
            dict(variant=catalogue.SELF, global_batch_size=256, rate_median=None, device="cpu", loader="torchvision",
                 speed_answer="same"),
        ]
    )  # fmt: skip
    summary.index = [5, 9]  # a summary's rows keep their labels
    before = summary.copy()
    found = rules.derived(summary)
    pd.testing.assert_frame_equal(summary, before)
    assert [a.column for a in rules.DERIVED] == list(found.columns[len(summary.columns) :])
    assert found["step_ms"].dtype == float and found.at[5, "step_ms"] == 500.0 and math.isnan(found.at[9, "step_ms"])
    assert list(found["torch_blind"]) == [True, False] and list(found["bf16_emulated"]) == [True, False]
    assert found["torch_blind"].dtype == object and type(found.at[9, "torch_blind"]) is bool
    assert list(found["self_check"]) == [None, "holds"] and found["within_low"].dtype == float
    assert found.at[5, "ceiling_standing"] is None and math.isnan(found.at[5, "stall_p90_ms"])


def test_an_open_row_stops_where_its_interval_is_precise_whatever_its_interval_alone_would_decide():
    """needs_rounds reads the row's own answer (a busy round may keep a decided interval open): an open row whose
    interval is within +-5% gets no more rounds ("precise"), one of no answer yet is decided by its interval."""
    narrow = row(speedup=1.55, speedup_low=1.5, speedup_high=1.6, rounds_paired=5, speedup_df=20.0)
    assert rules.needs_rounds(row(**narrow, speed_answer="unsettled")) == (False, "precise")
    assert rules.needs_rounds(narrow) == (False, "decided")
    assert rules.needs_rounds(row(speedup=1.0, speedup_low=0.97, speedup_high=1.03, rounds_paired=3,
                                  speed_answer="unsettled")) == (False, "precise")  # fmt: skip


@pytest.mark.parametrize("df, said", [(2.0, (False, "below the noise")), (2.0 - HAIR, (True, "open"))])
def test_a_row_is_given_up_below_the_noise_only_from_two_degrees_of_freedom(df, said):
    wide = row(speedup=1.0, speedup_low=0.5, speedup_high=2.0, rounds_paired=rules.GIVE_UP, speedup_df=df,
               speed_answer="unsettled")  # fmt: skip
    assert rules.needs_rounds(wide) == said


def test_the_narrow_rule_at_its_exact_edges():
    """classify: an interval touching 1.00x from above or below is open, not faster or slower; a missing end is
    open whatever the other says; inside_margin holds its edges themselves."""
    assert rules.classify(1.0, 1.2) == "unsettled" and rules.classify(0.8, 1.0) == "unsettled"
    assert rules.classify(math.nan, 0.5) == "unsettled" and rules.classify(1.5, math.nan) == "unsettled"
    assert rules.inside_margin(1 / (1 + 0.1), 1.0, 0.1) and rules.inside_margin(1.0, 1 + 0.1, 0.1)


def test_a_warmup_step_of_exactly_the_steady_bound_counts_as_steady():
    assert rules.steady_after([300, 150, 105, 500], 100, steady=1.5) == 2
    assert rules.steady_after([300, 1, 500], 1, steady=1.5) == 2  # a median of a millisecond is read too


def test_a_large_effects_interval_is_precise_within_a_quarter_of_it_and_needs_no_more_rounds():
    """0.2x with an interval of +-17%: wider than +-5%, within a quarter of its distance from 1.00x (log scale)."""
    slow = row(speedup=0.2, speedup_low=0.17, speedup_high=0.235, rounds_paired=3, speed_answer="unsettled")
    assert rules.needs_rounds(slow) == (False, "precise")


def test_the_rounds_to_settle_are_the_fewest_that_decide_up_to_most():
    """rounds_to_settle(row, most): n where n rounds would decide the row and n - 1 would not, so asked for at most n
    it says n and at most n - 1 it says none (inf); past 100 rounds it steps by a tenth."""
    open_row = row(speedup=1.05, speedup_low=0.95, speedup_high=1.16, rounds_paired=3)
    n = rules.rounds_to_settle(open_row)
    assert 3 < n < 100 and rules.rounds_to_settle(open_row, most=n) == n
    assert rules.rounds_to_settle(open_row, most=n - 1) == math.inf
    slow = row(speedup=1.01, speedup_low=0.7, speedup_high=1.49, rounds_paired=3, margin=0.02)
    far = rules.rounds_to_settle(slow)
    assert far > 100 and rules.rounds_to_settle(slow, most=far) == far and rules.rounds_to_settle(slow, far - 1) > far
    steps = [100]
    while steps[-1] < far:
        steps.append(int(steps[-1] * 1.1))
    assert far == steps[-1]  # 100, 110, 121, 133, ...


def test_steps_and_stalls_under_a_millisecond_or_a_sample_a_second_are_read_as_any_other():
    """A rate under one sample a second and steps under a millisecond are numbers like any other; a median of 0 ms
    (no step recorded) says nothing of stalls."""
    assert rules.step_ms(row(global_batch_size=1, rate_median=0.5)) == 2000.0
    assert rules.stalls(row(step_time_p90_ms=1.0, step_time_median_ms=0.5)) == (1.0, 0.5)
    assert rules.stalls(row(step_time_p90_ms=1.0, step_time_median_ms=0.0)) is None
    assert rules.steady_after([300, 300, 100, 100, 500], 100) == 3  # two slow steps, then steady


@pytest.mark.parametrize("high, rounds, said", [(1.29, 10, (True, "open")), (1.30, 11, (False, "below the noise"))])
def test_a_row_is_given_up_only_where_more_than_max_rounds_would_decide_it(high, rounds, said):
    """needs_rounds at MAX_ROUNDS (10) rounds to settle and one more: a row 10 rounds would decide keeps its rounds."""
    wide = row(speedup=1.0, speedup_low=1 / high, speedup_high=high, rounds_paired=4, speedup_df=3.0,
               speed_answer="unsettled")  # fmt: skip
    assert rules.MAX_ROUNDS == 10 and rules.rounds_to_settle(wide) == rounds and rules.needs_rounds(wide) == said


def test_the_rounds_to_settle_count_the_machines_degrees_of_freedom_in_every_t():
    """A row of 3 rounds whose interval pooled the machine's noise at 4 degrees of freedom (speedup_df 6): its spread
    is read back with t at 6, and n rounds would decide it where t(0.99, 4 + n - 1) x sd / sqrt(n) < its effect (the
    docstring's rule, worked out here from the spread the row was made with)."""
    from scipy import stats

    sd, rounds, machine, estimate = 0.1, 3, 4, 1.08
    half = stats.t.ppf(0.975, machine + rounds - 1) * sd / math.sqrt(rounds)
    made = row(speedup=estimate, speedup_low=estimate * math.exp(-half), speedup_high=estimate * math.exp(half),
               rounds_paired=rounds, speedup_df=float(machine + rounds - 1), margin=0.01)  # fmt: skip
    effect = math.log(estimate)
    n = rounds
    while not stats.t.ppf(0.5 + rules.DECIDING / 2, machine + n - 1) * sd / math.sqrt(n) < effect:
        n += 1
    assert rules.rounds_to_settle(made) == n
