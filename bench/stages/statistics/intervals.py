"""The statistics of paired rounds: a row's interval against its reference, the machine's noise measured on the
reference's own runs, the two pooled, the pairing of each run with the reference runs beside it, and the runs left
out of it (disturbed, busy). Numbers only: what an interval means for a technique (faster, within the margin, open)
is bench/stages/statistics/summarize.py's.

Statistics. Each round of a bench runs every variant once and its reference (the baseline; loaders:
loader.py) once, close together in time, so the ratio of a variant's rate to the reference's in the same
round cancels the machine's drift (a slow minute slows both). Over the rounds these ratios give:

- the estimate: their geometric mean (the mean of their logarithms, exponentiated);
- a 95% confidence interval: Student's t interval on the logarithms (scipy.stats.ttest_1samp's
  confidence_interval), exponentiated. Ratios are compared on a log scale, so 2x faster and 2x slower
  are equally far from 1. We chose it over an exact interval for the median (order statistics), which
  needs 6 rounds before it can reach 95% at all (5 give at most 94%), and over a bootstrap, which
  resamples 3 to 5 values into a guess; the t interval is exact when the log ratios are normal and
  accounts for how little 2 or 3 rounds say about the noise (t with 1 degree of freedom is 12.7, not 1.96).
"""

import functools
import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from bench.stages.cost import command_flag


@functools.cache
def scipy_stats():
    """scipy.stats, imported when a statistic first needs it: a bench's start, its --help and a bad flag's one line do
    without its second."""
    from scipy import stats

    return stats


@functools.lru_cache(maxsize=4096)
def t_quantile(q, df):
    """Student's t quantile q at df degrees of freedom (scipy's, kept: the rounds' rules ask the same ones often)."""
    return float(scipy_stats().t.ppf(q, df))


CONFIDENCE = 0.95


class Noise(NamedTuple):
    """The machine's noise in a paired log ratio, measured on the reference's own runs (noise()): its variance and
    the degrees of freedom it counts for."""

    variance: float
    df: float


def interval(ratios, confidence=CONFIDENCE, noise=None):
    """(estimate, low, high) of paired ratios: geometric mean and its t interval; low and high are NaN
    with fewer than two ratios or none finite and positive. With the machine's noise (a Noise: measured on the
    baseline beside the rows), the spread is the row's own and the machine's pooled (pooled())."""
    logs = log_ratios(ratios)
    if len(logs) == 0:
        return math.nan, math.nan, math.nan
    estimate = math.exp(logs.mean())
    if len(logs) < 2:
        return estimate, math.nan, math.nan
    spread = pooled(logs, noise)
    if spread is not None:
        half = t_quantile(0.5 + confidence / 2, spread.df) * math.sqrt(spread.variance / len(logs))
        return estimate, math.exp(logs.mean() - half), math.exp(logs.mean() + half)
    if np.ptp(logs) == 0:  # identical ratios: no spread, the interval is the point
        return estimate, estimate, estimate
    low, high = scipy_stats().ttest_1samp(logs, 0.0).confidence_interval(confidence)
    return estimate, math.exp(low), math.exp(high)


def log_ratios(ratios):
    """The logs of the finite, positive ratios."""
    return np.log(np.asarray([r for r in ratios if r > 0 and math.isfinite(r)], dtype=float))


NOISIER = 0.75  # a row's spread above this quantile of F(its df, the machine's df) is its own: no pooling


def pooled(logs, noise):
    """The spread of a row's log ratios (a Noise: variance, degrees of freedom) pooled with the machine's, each by its
    degrees of freedom, with t counting both (an empirical-Bayes, or moderated, t: Smyth 2004): 2 rounds' interval is
    no longer 12.7 standard errors wide for want of a second degree of freedom. None (the row's own t interval)
    without the machine's noise, with fewer than two ratios, or where the row is noisier than the machine explains
    (its variance over the machine's above F's NOISIER quantile): a noisy row keeps its own width, and its interval
    covers what it should (tests/bench/stages/statistics/test_summarize.py: made-up benches, a row 3 times as noisy)."""
    own = len(logs) - 1
    if noise is None or noise.df <= 0 or own < 1:
        return None
    variance = float(logs.var(ddof=1))
    if variance > 0 and (
        noise.variance == 0 or variance / noise.variance > scipy_stats().f.ppf(NOISIER, own, noise.df)
    ):
        return None
    return Noise((noise.df * noise.variance + own * variance) / (noise.df + own), noise.df + own)


def degrees(ratios, noise=None):
    """The degrees of freedom of interval(ratios, noise=noise)'s t: the rounds less one, and the machine noise's
    where it was pooled."""
    logs = log_ratios(ratios)
    spread = pooled(logs, noise)
    return spread.df if spread is not None else max(len(logs) - 1, 0)


DISTURBED = 5.0  # a reference run this many robust standard deviations off its neighbours was disturbed


USUAL = 8  # ... of the draws that say what is usual, where there are this many


def draws(runs, column, reference, when, left_out=()):
    """{a reference run's index: its log ratio against the reference runs either side of it in its round (interpolated),
    0 on a machine without noise}, for every reference run with one on either side; runs: ok rows (paired's), when:
    their times (run_times); left_out: reference runs (indexes) read as if they had not run."""
    found, value, time = {}, runs[column].to_dict(), when.to_dict()
    refs_of = runs[(runs["variant"] == reference) & ~runs.index.isin(left_out)]
    for _, refs in refs_of.groupby("repeat", sort=True):
        order = sorted(refs.index, key=time.get)
        for before, mine, after in zip(order, order[1:], order[2:]):
            beside = interpolated([(time[before], value[before]), (time[after], value[after])], time[mine])
            found[mine] = math.log(value[mine] / beside)
    return found


def disturbed(runs, column, reference, when):
    """The reference runs (their indexes) that the runs either side of them say were disturbed, one at a time: the run
    whose draw (draws) lies furthest from 0, where it lies more than DISTURBED robust standard deviations (the median
    absolute draw / 0.6745) of the draws that do not share a run with it, USUAL or more of them; then the draws again
    without it. A baseline that ran at 91 samples/s between runs at 227 and 264 (the AVX2 EPYC, 2026-11-29: its steps
    3 times as slow, the machine busy elsewhere) measured the disturbance, not the machine's speed at the rows beside
    it: they are read against the baseline runs around it instead (paired), and the machine's noise (noise) leaves
    it out; its neighbours' draws, which read against it, are drawn again without it."""
    out = set()
    while True:
        found = draws(runs, column, reference, when, out)
        if not found:
            return out
        worst = max(found, key=lambda i: abs(found[i]))
        ordered = sorted(found, key=lambda i: when[i])
        place = ordered.index(worst)
        near = set(ordered[max(0, place - 1) : place + 2])
        usual = [abs(draw) for i, draw in found.items() if i not in near]
        if not off_its_neighbours(found[worst], usual):
            return out
        out.add(worst)


def off_its_neighbours(draw, usual, bound=DISTURBED):
    """The rule of disturbed(): a reference run's draw lies more than `bound` robust standard deviations (the median
    absolute draw / 0.6745) of the usual draws from 0, where USUAL or more of them say what is usual."""
    return len(usual) >= USUAL and abs(draw) > bound * float(np.median(np.abs(usual))) / 0.6745


def noise(runs, column, reference):
    """The machine's noise in a row's paired log ratio (a Noise), measured on the reference's own runs: where a round
    ran the reference three times or more (bench/stages/planning/plan.py round_runs: the baseline beside every other row
    on a CPU), each of its runs with one on either side is read against them as a row is read (draws), and its log
    ratio, 0 on a machine without noise, is one draw of the noise a row's ratio carries. The variance is the mean of
    their squares, the disturbed runs' left out (disturbed); a draw shares a run with the next (their correlation is
    about -2/3), so each counts half a degree of freedom. None where no round has such runs (one baseline a round: every
    bench before 2026-11-29, and a GPU's); runs as paired() takes them."""
    ok = runs[runs[column].notna() & (runs[column] > 0)].reset_index(drop=True)
    when = run_times(ok)
    kept = list(draws(ok, column, reference, when, disturbed(ok, column, reference, when)).values())
    if len(kept) < 2:
        return None
    return Noise(float(np.mean(np.square(kept))), len(kept) / 2)


def narrower(low, high, df, confidence):
    """(low, high) of the `confidence` interval with the centre (log scale) and the degrees of freedom of the
    CONFIDENCE t interval low..high: its half-width scaled by the ratio of the two t quantiles. The point itself
    where low == high (ratios without spread); NaNs without an interval or degrees of freedom."""
    if math.isnan(low) or math.isnan(high) or low <= 0:
        return math.nan, math.nan
    if low == high:
        return low, high
    if not df > 0:
        return math.nan, math.nan
    centre, half = (math.log(low) + math.log(high)) / 2, (math.log(high) - math.log(low)) / 2
    half *= t_quantile(0.5 + confidence / 2, df) / t_quantile(0.5 + CONFIDENCE / 2, df)
    return math.exp(centre - half), math.exp(centre + half)


def half_width(estimate, low, high):
    """The interval's half-width as a share of its estimate, on the log scale (NaN without an interval)."""
    if math.isnan(low) or math.isnan(high) or estimate <= 0:
        return math.nan
    return math.exp((math.log(high) - math.log(low)) / 2) - 1


def paired(runs, column, reference):
    """{variant: [its column / the reference's column beside it, per round where both ran ok]}; runs: one workload and
    kind of runs.csv (ok rows only), reference: the variant the others are read against. A run is read against the
    reference's runs of its own round, at its own time: interpolated on a log scale between the reference's run
    before it and the one after it (bench/stages/planning/plan.py round_runs puts a baseline beside every other row),
    the one alone where it has a reference run on one side only, so that the machine's drift within a round is taken out
    as the drift between rounds is. A round with one reference run (every bench before 2026-11-29) reads each run
    against it. A run's time: its start (time_utc) and half its wall time; its place in runs.csv where none is recorded.
    A reference run its neighbours say was disturbed (disturbed) is not read against."""
    ok = runs[runs[column].notna() & (runs[column] > 0)].reset_index(drop=True)
    when = run_times(ok)
    base = ok[(ok["variant"] == reference) & ~ok.index.isin(disturbed(ok, column, reference, when))]
    value, time = ok[column].to_dict(), when.to_dict()
    refs_of = {repeat: [(time[i], value[i]) for i in refs.index] for repeat, refs in base.groupby("repeat")}
    ratios = {}
    for variant, group in ok.groupby("variant", sort=False):
        mine = []
        for repeat, runs_of_round in group.groupby("repeat", sort=True):
            if repeat not in refs_of:
                continue
            run = runs_of_round.index[-1]  # a run tried again (--resume): its last
            mine.append(1.0 if variant == reference else value[run] / interpolated(refs_of[repeat], time[run]))
        ratios[variant] = mine
    return ratios


def is_busy(runs):
    """Each run's busy flag (the runner's: other processes' CPU, steal, another GPU process) as a boolean Series."""
    if "busy" not in runs:
        return pd.Series(False, index=runs.index)
    return runs["busy"].astype(str).str.lower().eq("true")


def busy_rounds(runs, reference):
    """{variant: the rounds (repeats) in which its run, or a reference run of the same round, was taken on a busy
    machine}: the rounds its paired ratio read a disturbed run in. runs: ok rows, as paired() takes them."""
    busy = is_busy(runs)
    reference_busy = set(runs.loc[busy & (runs["variant"] == reference), "repeat"])
    found = {}
    for variant, group in runs.groupby("variant", sort=False):
        rounds = set(group["repeat"])
        found[variant] = sorted((set(group.loc[busy[group.index], "repeat"]) | reference_busy) & rounds)
    return found


def at_reference_steps(runs, reference):
    """The runs that trained the steps the reference trained in their round (--steps in their command: the learning
    rate's schedule follows them): a later round's run of a slow row times fewer (bench/modes/speed.py sized), and a
    run of a bench from before 2026-11-29 may have cut its warm-up alone; their last loss is not of the baseline's
    run. All of them where the commands do not say."""
    if "command" not in runs or runs["command"].isna().all():
        return runs
    steps = runs["command"].map(lambda c: command_flag(c, "--steps", None))
    reference_steps = {}
    for repeat, found in steps[runs["variant"] == reference].groupby(runs["repeat"]):
        reference_steps[repeat] = set(found.dropna())
    keep = [s in reference_steps.get(r, {s}) for s, r in zip(steps, runs["repeat"])]
    return runs[keep]


def run_times(runs):
    """Each run's time (seconds): its start (time_utc) and half its wall time, else its place among the runs."""
    place = pd.Series(range(len(runs)), index=runs.index, dtype=float)
    if "time_utc" not in runs or runs["time_utc"].isna().all():
        return place
    start = pd.to_datetime(runs["time_utc"], utc=True, errors="coerce")
    seconds = (start - pd.Timestamp("1970-01-01", tz="UTC")).dt.total_seconds()
    half = runs["wall_s"].fillna(0) / 2 if "wall_s" in runs else 0.0
    return (seconds + half).where(seconds.notna(), place)


def interpolated(points, t):
    """The reference's value at time t from its runs' (time, value) points, in any order: on a log scale,
    interpolated between its runs just before and just after t, the nearest alone where t is outside them."""
    points = sorted(points, key=lambda point: point[0])
    before, after = [p for p in points if p[0] <= t], [p for p in points if p[0] > t]
    if not before or not after:
        return float(after[0][1] if not before else before[-1][1])
    (t0, v0), (t1, v1) = before[-1], after[0]
    v0, v1 = math.log(v0), math.log(v1)
    return math.exp(v0 + (v1 - v0) * (t - t0) / (t1 - t0))
