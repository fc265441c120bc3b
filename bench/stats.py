"""Paired comparisons: is a variant faster, slower, or no different from its reference, and how sure is that?

Each round of a bench runs every variant once and its reference (the baseline; loaders: loader.py) once,
close together in time, so the ratio of a variant's rate to the reference's in the same round cancels
the machine's drift (a slow minute slows both). Over the rounds these ratios give:

- the estimate: their geometric mean (the mean of their logarithms, exponentiated);
- a 95% confidence interval: Student's t interval on the logarithms (scipy.stats.ttest_1samp's
  confidence_interval), exponentiated. Ratios are compared on a log scale, so 2x faster and 2x slower
  are equally far from 1. We chose it over an exact interval for the median (order statistics), which
  needs 6 rounds before it can reach 95% at all (5 give at most 94%), and over a bootstrap, which
  resamples 3 to 5 values into a guess; the t interval is exact when the log ratios are normal and
  accounts for how little 2 or 3 rounds say about the noise (t with 1 degree of freedom is 12.7, not 1.96).

The answer (`classify`): no measurable difference when the interval lies wholly inside 1 +- BAND (even if
also wholly on one side of 1: a difference that small is none to act on); else faster or slower when it lies
wholly above or below 1; otherwise not settled. Rounds are added while an interval is wider than PRECISION
or a quarter of the effect's size (`precise`), never on whether it has crossed 1: stopping when a result
looks significant would manufacture findings.
"""

import math

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
BAND = 0.03  # an interval inside 0.97x..1.03x: no measurable difference
PRECISION = 0.05  # an interval within +-5% of its estimate needs no more rounds
EFFECT_SHARE = 0.25  # ... nor one within a quarter of the effect's size (log scale), for large effects
MIN_ROUNDS = 2  # --repeats auto: rounds before the first look (the first interval: 2 rounds, 1 degree of freedom)
MAX_ROUNDS = 10  # --repeats auto: rounds at most, whatever the budget
ANSWERS = ("faster", "slower", "same", "unsettled")  # what classify() says of a ratio of rates


def interval(ratios, confidence=CONFIDENCE):
    """(estimate, low, high) of paired ratios: geometric mean and its t interval; low and high are NaN
    with fewer than two ratios or none finite and positive."""
    logs = np.log(np.asarray([r for r in ratios if r > 0 and math.isfinite(r)], dtype=float))
    if len(logs) == 0:
        return math.nan, math.nan, math.nan
    estimate = math.exp(logs.mean())
    if len(logs) < 2:
        return estimate, math.nan, math.nan
    if np.ptp(logs) == 0:  # identical ratios: no spread, the interval is the point
        return estimate, estimate, estimate
    low, high = stats.ttest_1samp(logs, 0.0).confidence_interval(confidence)
    return estimate, math.exp(low), math.exp(high)


def classify(low, high, band=BAND):
    """faster, slower, same (no measurable difference) or unsettled, from the interval of a ratio of rates."""
    if math.isnan(low) or math.isnan(high):
        return "unsettled"
    if 1 - band <= low and high <= 1 + band:  # first: a difference smaller than the band is none worth acting on
        return "same"
    if low > 1:
        return "faster"
    if high < 1:
        return "slower"
    return "unsettled"


def half_width(estimate, low, high):
    """The interval's half-width as a share of its estimate, on the log scale (NaN without an interval)."""
    if math.isnan(low) or math.isnan(high) or estimate <= 0:
        return math.nan
    return math.exp((math.log(high) - math.log(low)) / 2) - 1


def precise(estimate, low, high, precision=PRECISION, share=EFFECT_SHARE):
    """The interval is narrow enough that more rounds would not change the answer: its half-width (log scale) is
    within +-precision, or within `share` of the effect's own size (a 0.2x row needs no +-5%: an interval a quarter
    of its distance from 1.00x wide lies 8 standard errors away from it, so stopping there calls no chance result
    a finding)."""
    width = half_width(estimate, low, high)
    if math.isnan(width):
        return False
    return math.log1p(width) <= max(math.log1p(precision), share * abs(math.log(estimate)))


def paired(runs, column, reference):
    """{variant: [its column / the reference's column, per round where both ran ok]}; runs: one workload and
    kind of runs.csv (ok rows only), reference: the variant the others are read against."""
    ok = runs[runs[column].notna() & (runs[column] > 0)]
    base = ok[ok["variant"] == reference].groupby("repeat")[column].last()
    ratios = {}
    for variant, group in ok.groupby("variant", sort=False):
        mine = group.groupby("repeat")[column].last()
        common = mine.index.intersection(base.index)
        ratios[variant] = list(mine[common] / base[common])
    return ratios
