"""Every rule an answer rests on, tried just inside and just outside each of its edges: the rules as functions of
numbers (bench/stages/summarize.py, causes.py), no bench run. Each test is named by its rule in words; a threshold
moved, widened or dropped fails one of them (tools/faults.py holds such edits: `python tools/faults.py --only edge`).
The margin's own edges (decide, inside_margin, the deciding interval) are tested in test_summarize.py."""

import math

import pandas as pd
import pytest

from bench.stages import summarize

HAIR = 1e-4  # a ratio this far either side of an edge


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
    assert summarize.learns(low, high) == said


def test_the_rerun_band_holds_on_a_rows_own_rounds():
    """Final losses 5-7% above the baseline's in each of three rounds: wholly above 1.00x, within the band."""
    estimate, low, high, said = summarize.learning(pd.Series([1.05, 1.06, 1.07]))
    assert 1 < low < high < 1.1 and said is None
    assert summarize.learning(pd.Series([1.15, 1.16, 1.17]))[3] == "worse"
    assert summarize.learns(low, high, band=0.01) == "worse"  # a narrower band would call it worse


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
    assert summarize.off_its_neighbours(draw, usual) is said


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
    assert summarize.classify(low, high) == said


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
    assert summarize.precise(estimate, estimate / (1 + half), estimate * (1 + half)) is said


@pytest.mark.parametrize(
    "low, high, said",
    [
        (1 + HAIR, 1.2, "pays back"),
        (1 - HAIR, 1.2, "not settled"),
        (0.8, 1 - HAIR, "never"),
        (0.8, 1 + HAIR, "not settled"),
    ],
)
def test_a_compiled_row_pays_back_only_where_its_whole_interval_is_faster(low, high, said):
    row = dict(speedup=math.sqrt(low * high), speedup_low=low, speedup_high=high, compile_cold_s=10.0)
    base = dict(rate_median=1000.0, global_batch_size=100, first_step_s=0.0)  # a step of 100 ms
    assert summarize.payback(row, base)[0] == said


def test_compiles_steps_to_pay_back_are_its_compile_over_the_time_a_step_saves():
    """1.25x faster than a 100 ms step saves 20 ms a step: 10 s of compile less the eager first step's 1 s pays back
    after 450 steps; a hair more compile, 451."""
    row = dict(speedup=1.25, speedup_low=1.1, speedup_high=1.4, compile_cold_s=10.0, compile_warm_s=10.0 + 1e-3)
    base = dict(rate_median=1000.0, global_batch_size=100, first_step_s=1.0)
    assert summarize.payback(row, base) == ("pays back", 450, 451)
