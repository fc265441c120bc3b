"""The margin rule (bench/stages/summarize.py decide): a row's speed-up is faster or slower (its 97.5% interval wholly
beyond 1), within the margin (its 90% interval wholly inside 1/(1+m) to 1+m: two one-sided tests) or open; each edge
tried just inside and just outside, and the rule's error rates over made-up benches that stop at a row's first answer,
as the bench does."""

import math

import numpy as np
import pytest

from bench import catalogue
from bench.stages import summarize


def symmetric(centre, half):
    """A 95% interval on the log scale: centre x/ exp(half)."""
    return centre * math.exp(-half), centre * math.exp(half)


def within_edges(margin, df):
    """(low, high) of a 95% interval whose 90% interval (at df) ends exactly on 1 + margin: the upper edge."""
    scale = summarize.t_quantile(0.5 + summarize.CONFIDENCE / 2, df) / summarize.t_quantile(
        0.5 + summarize.EQUIVALENCE / 2, df
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
    assert summarize.narrower(low, high, df)[1] == pytest.approx(1 + margin)
    assert summarize.decide(low * 0.999, high * 0.999, df, margin) == "same"
    assert summarize.decide(low * 1.001, high * 1.001, df, margin) == "unsettled"


@pytest.mark.parametrize("margin", [0.05, 0.10])
def test_the_lower_edge_is_one_over_one_plus_the_margin(margin):
    """The lower edge mirrors the upper on the log scale: 1/(1+m), not 1 - m."""
    df = 4.0
    low, high = within_edges(margin, df)
    low, high = 1 / high, 1 / low  # mirrored: its 90% interval begins on 1/(1+m)
    assert summarize.narrower(low, high, df)[0] == pytest.approx(1 / (1 + margin))
    assert summarize.decide(low * 1.001, high * 1.001, df, margin) == "same"
    assert summarize.decide(low * 0.999, high * 0.999, df, margin) == "unsettled"
    assert 1 / (1 + margin) > 1 - margin  # the rule is not 1 - m: that point would be read as within


def test_faster_and_slower_need_the_deciding_interval_beyond_1():
    """A 95% interval beyond 1 is not enough: the 97.5% one decides (the bench looks after every round). Just above
    1 is faster, just below is open; slower mirrors it."""
    df, half = 3.0, 0.2
    scale = summarize.t_quantile(0.5 + summarize.DECIDING / 2, df) / summarize.t_quantile(
        0.5 + summarize.CONFIDENCE / 2, df
    )
    centre = math.exp(half * scale)  # the 97.5% interval begins exactly on 1
    low, high = symmetric(centre, half)
    assert low > 1  # the 95% interval alone would call it faster
    assert summarize.decide(low * 1.001, high * 1.001, df) == "faster"
    assert summarize.decide(low * 0.999, high * 0.999, df) == "unsettled"
    assert summarize.decide(1 / (high * 1.001), 1 / (low * 1.001), df) == "slower"
    assert summarize.decide(1 / (high * 0.999), 1 / (low * 0.999), df) == "unsettled"


def test_within_the_margin_comes_first_even_wholly_above_1():
    """A row 1.05x faster for sure, inside +-10%: within the margin, not worth adopting for speed; at +-3%: faster."""
    low, high = 1.04, 1.06
    assert summarize.decide(low, high, 8.0, 0.10) == "same"
    assert summarize.decide(low, high, 8.0, 0.03) == "faster"


def test_no_interval_is_open_and_a_point_is_read_as_itself():
    assert summarize.decide(math.nan, math.nan, 1.0) == "unsettled"
    assert summarize.decide(1.02, 1.02, 0.0) == "same"  # identical ratios: no spread
    assert summarize.decide(1.2, 1.2, 0.0) == "faster"


def test_a_decided_row_gets_no_more_rounds_and_an_open_one_does():
    row = dict(speedup=1.0, speedup_low=0.97, speedup_high=1.03, rounds_paired=3, speedup_df=4.0, margin=0.1)
    assert summarize.needs_rounds(row) == (False, "decided")
    wide = dict(row, speedup_low=0.85, speedup_high=1.18)
    assert summarize.needs_rounds(wide) == (True, "open")
    assert summarize.needs_rounds(dict(wide, margin=0.5)) == (False, "decided")  # the margin is the row's


def test_rounds_to_decide_count_the_margin():
    """A row at 1.00x +-25% after 3 rounds: a few more decide it within +-10%; within +-1% none the bench runs would."""
    row = dict(speedup=1.0, speedup_low=0.8, speedup_high=1.25, rounds_paired=3, speedup_df=2.0, margin=0.1)
    assert 3 < summarize.rounds_to_settle(row) <= 6
    assert summarize.rounds_to_settle(dict(row, margin=0.01)) > summarize.MAX_ROUNDS


def test_the_baseline_against_itself_is_a_cpu_benchs_row_and_checks_the_rule():
    row = catalogue.BY_NAME[catalogue.SELF]
    assert row.script == "train.py" and row.flags == () and row.on_cpu and not row.on_gpu and row.by_default
    assert summarize.self_check(dict(variant=catalogue.SELF, speed_answer="same")) == "holds"
    assert summarize.self_check(dict(variant=catalogue.SELF, speed_answer="unsettled")) == "holds"
    assert summarize.self_check(dict(variant=catalogue.SELF, speed_answer="faster")) == "fails"
    assert summarize.self_check(dict(variant=catalogue.SELF, speed_answer="slower")) == "fails"
    assert summarize.self_check(dict(variant="amp", speed_answer="faster")) is None


def made_up_bench(rng, effect, sd, margin, draws_a_round=3):
    """One row of a made-up CPU bench as --repeats auto runs it: a paired log ratio a round, normal around the effect
    with sd `sd`, and the machine's noise measured beside it (draws_a_round baseline draws a round of the same sd, half
    a degree of freedom each: summarize.noise); a look after every round from MIN_ROUNDS, stopping where needs_rounds
    says, MAX_ROUNDS at most. Its answer when it stopped."""
    ratios, draws = [], []
    for r in range(1, summarize.MAX_ROUNDS + 1):
        ratios.append(math.exp(rng.normal(math.log(effect), sd)))
        draws += list(rng.normal(0, sd, draws_a_round))
        if r < summarize.MIN_ROUNDS:
            continue
        noise = summarize.Noise(float(np.mean(np.square(draws))), len(draws) / 2)
        estimate, low, high = summarize.interval(ratios, noise=noise)
        df = summarize.degrees(ratios, noise)
        row = dict(speedup=estimate, speedup_low=low, speedup_high=high, rounds_paired=r, speedup_df=df, margin=margin)
        if not summarize.needs_rounds(row)[0]:
            break
    return summarize.decide(low, high, df, margin)


BENCHES = 2000


@pytest.mark.slow
@pytest.mark.parametrize("sd", [0.03, 0.07, 0.10])
def test_over_thousands_of_made_up_benches_the_rule_errs_at_most_5pc_of_the_time(sd):
    """At the noise of a quiet machine (0.03 a draw) and of the 2-core EPYCs (0.07, 0.10), with the default margin:
    a row with no effect (the baseline against itself) is called faster or slower in at most 5% of benches, and a row
    1.5 margins away (1.15x, and 1/1.15x) is called within the margin in at most 5%. Measured (seed 0, 2,000 each,
    docs/bench.md): no effect 0.0%, 4.4%, 4.5% called faster or slower; 1.5 margins 0.05%, 0.5%, 0.75% within."""
    rng, margin = np.random.default_rng(0), summarize.MARGIN
    null = [made_up_bench(rng, 1.0, sd, margin) for _ in range(BENCHES)]
    wrong = sum(answer in ("faster", "slower") for answer in null) / BENCHES
    assert wrong <= 0.05
    for effect in 1 + 1.5 * margin, 1 / (1 + 1.5 * margin):
        real = [made_up_bench(rng, effect, sd, margin) for _ in range(BENCHES)]
        assert sum(answer == "same" for answer in real) / BENCHES <= 0.05
    if sd == 0.03:  # a quiet machine decides nearly every row: the rule is not right by saying nothing
        assert null.count("same") / BENCHES >= 0.95
