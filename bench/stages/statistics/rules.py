"""The rules each row's answers follow: numbers in, an answer out, no frame built here
(bench/stages/statistics/summarize.py builds the summary's rows and reads them through these).

A row's speed answer (`decide`), against a declared margin m (--margin, MARGIN by default): within the margin
where the 90% interval lies wholly inside 1/(1+m) to 1+m (two one-sided tests at 5% each, TOST: the row is not worth
adopting for speed here, even if it is also wholly on one side of 1); else faster or slower where the 98% interval
(DECIDING: the bench looks after every round) lies wholly above or below 1; otherwise open. The answer codes in
summary.csv are same (within the margin) and unsettled (open). The other ratios (memory, a mode's rounds) keep the
narrow rule (`classify`): no measurable difference inside 1 +- BAND. Rounds are added to the rows still open
(`needs_rounds`, the planner's stop rule) and stop at a row's first answer; the made-up benches of
tests/bench/stages/statistics/test_rules.py measure how often the rule errs when it does. Each row's derived fields
(DERIVED, `derived`: worked out once from its numbers, for the words and the renderers): its step and compute ms,
its data wait, its stalls, its standing against its ceiling, whether torch sees its memory, emulated bf16, its
peer's answers, the rounds that would settle it, the baseline against itself.
"""

import math
from typing import Callable, NamedTuple

import pandas as pd

from bench import catalogue
from bench.schema import SummaryRow, num
from bench.stages.statistics.intervals import (
    CONFIDENCE,
    half_width,
    interval,
    narrower,
    t_quantile,
)

# ----------------------------------------------------------------------------- statistics: paired rounds

# the default --margin: a speed-up whose 90% interval lies inside 1/1.1x..1.1x is within the margin, not worth adopting
# for speed here. asv's factor (1.1), and the narrowest margin that the 2-core EPYCs' noise, 0.07 to 0.10 a paired
# draw (log), decides for a row with no effect in 2 to 4 rounds (+-5%: 7 to 14); docs/bench.md "The margin"
MARGIN = 0.10
EQUIVALENCE = 0.90  # the interval read against the margin: two one-sided tests at 5% each
# the interval that calls a row faster or slower: a bench looks after every round and stops at the first answer, so
# each look asks more than 95% (at 95% a row with no effect came out faster or slower in 7.5% to 8% of made-up
# benches at a noise of 0.07 to 0.10; at 98%, with rows kept open to GIVE_UP's rounds, at most 4.3%:
# tests/bench/stages/statistics/test_rules.py, docs/bench.md)
DECIDING = 0.98
# a row's own paired rounds before the bench gives it up as below the noise: an estimate of the rounds still needed
# read from 2 or 3 rounds moves with their noise (on made-up benches at 0.07 to 0.10 a draw, giving up after 2 left
# 18% to 67% of rows with no effect open; after 4, 10% to 52%: docs/bench.md "The margin")
GIVE_UP = 4
BAND = 0.03  # the narrow rule of the other ratios (memory, a mode's rounds): inside 0.97x..1.03x, no difference
PRECISION = 0.05  # an interval within +-5% of its estimate needs no more rounds
EFFECT_SHARE = 0.25  # ... nor one within a quarter of the effect's size (log scale), for large effects
MIN_ROUNDS = 2  # --repeats auto: rounds before the first look (the first interval: 2 rounds, 1 degree of freedom)
MAX_ROUNDS = 10  # --repeats auto: rounds at most, whatever the budget
ANSWERS = ("faster", "slower", "same", "unsettled")  # what classify() says of a ratio of rates
LEARN_BAND = 0.1  # a final loss whose paired interval lies wholly beyond 1 +- this of the baseline's learns otherwise
LEARNING = ("worse", "better")  # what learning() says; None: nothing a rerun would not contradict


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


def inside_margin(low, high, margin):
    """The interval lies wholly inside 1/(1 + margin) to 1 + margin (a margin of 0.1: 0.909x to 1.1x): on the log
    scale, as far below 1 as above."""
    return 1 / (1 + margin) <= low and high <= 1 + margin


def decide(low, high, df, margin=MARGIN):
    """A speed-up's answer from its CONFIDENCE (95%) t interval low..high with df degrees of freedom: same (within the
    margin: its EQUIVALENCE (90%) interval, narrower(), wholly inside 1/(1+margin) to 1+margin: the two one-sided
    tests), else faster or slower (its DECIDING interval wholly above or below 1), else unsettled (open)."""
    if math.isnan(low) or math.isnan(high):
        return "unsettled"
    if inside_margin(
        *narrower(low, high, df, EQUIVALENCE), margin
    ):  # first: a difference inside the margin is none to act on
        return "same"
    below, above = narrower(low, high, df, DECIDING)
    if below > 1:
        return "faster"
    if above < 1:
        return "slower"
    return "unsettled"


def margin_of(row):
    """The margin a row's speed answer was read against (its summary's `margin`), MARGIN where a summary from before
    the margin has none."""
    row = SummaryRow.of(row)
    margin = num(row.margin)
    return MARGIN if math.isnan(margin) else margin


def precise(estimate, low, high, precision=PRECISION, share=EFFECT_SHARE):
    """The interval is narrow enough that more rounds would not change the answer: its half-width (log scale) is
    within +-precision, or within `share` of the effect's own size (a 0.2x row needs no +-5%: an interval a quarter
    of its distance from 1.00x wide lies 8 standard errors away from it, so stopping there calls no chance result
    a finding)."""
    width = half_width(estimate, low, high)
    if math.isnan(width):
        return False
    return math.log1p(width) <= max(math.log1p(precision), share * abs(math.log(estimate)))


def learning(ratios, band=LEARN_BAND):
    """(estimate, low, high, answer) of a row's final training loss against the baseline's, paired by round (each
    round at a seed of its own: bench/stages/planning/plan.py round_runs), so that the spread over the rounds is what a
    rerun shows: worse where the interval lies wholly above 1 + band, better wholly below 1 / (1 + band), else None (a
    difference no larger than reruns show, or no interval: one round, or rounds that replay the same numbers, which say
    nothing of the noise)."""
    estimate, low, high = interval(ratios)
    return estimate, low, high, learns(low, high, band)


def learns(low, high, band=LEARN_BAND):
    """The rule of learning(), on its interval of the final loss's ratio: worse wholly above 1 + band, better wholly
    below 1 / (1 + band), else None (within what reruns show, or no interval: NaN, or a point)."""
    if math.isnan(low) or math.isnan(high) or low == high:
        return None
    if low > 1 + band:
        return "worse"
    if high < 1 / (1 + band):
        return "better"
    return None


ROUND_WHYS = ("one round", "open", "precise", "decided", "below the noise")  # needs_rounds' second answer


def needs_rounds(row):
    """(whether the row gets another round under --repeats auto, why: ROUND_WHYS): yes while its answer is open
    (decide: neither faster, slower nor within the margin), unless its interval is already as narrow as precise()
    asks (a margin narrower than the precision) or no count of rounds the bench runs would decide it at the noise seen
    (rounds_to_settle above MAX_ROUNDS: its effect lies on the margin's edge, or below this machine's noise), read
    from GIVE_UP paired rounds of its own and 2 degrees of freedom or more. A decided row gets no
    more: its round goes to the rows still open. The answer is the row's speed_answer where it has one (an answer that
    rests on busy rounds is open there, whatever its interval says), else decide()'s."""
    row = SummaryRow.of(row)
    estimate, low, high = num(row.speedup), num(row.speedup_low), num(row.speedup_high)
    if math.isnan(low) or math.isnan(high):
        return True, "one round"
    answer = row.speed_answer  # the summary's (a busy round may keep it open), else its interval's
    answer = answer if isinstance(answer, str) else decide(low, high, degrees_of(row), margin_of(row))
    if answer != "unsettled":
        return False, "decided"
    if precise(estimate, low, high):
        return False, "precise"
    if num(row.rounds_paired) >= GIVE_UP and degrees_of(row) >= 2 and rounds_to_settle(row) > MAX_ROUNDS:
        return False, "below the noise"
    return True, "open"


# ----------------------------------------------------------------------------- the verdicts

# a row that answers a question against another row as well as the baseline: FSDP against DDP, at the same processes
PEERS = catalogue.PEERS
WAIT_BOUND = 0.2  # a run that waits for data this share of its window or more is limited by its input pipeline
WAIT_LITTLE = 0.05  # below this share, a faster input pipeline has little to win
WAIT_CHANGE = 0.05  # a change in the data wait smaller than this (absolute) is "stayed"
CORES_CHANGE = 0.1  # on a CPU, a change of the loader's cores smaller than this is not said
ACCURACY_GAP = 0.1  # validation accuracy this far from the baseline's, after the same steps, is worth a look
STALL = 1.25  # a row whose 90th-percentile step is this many times its median step stalls now and then


def torch_blind(row):
    """DALI on a GPU hands out its batches as views of its own memory (DALI 2.4's default), which torch's counters do
    not see: such a row's torch figures leave its batches out and are not compared; NVML's figure sees them."""
    row = SummaryRow.of(row)
    return row.loader == "dali" and row.device == "cuda"


def against_ceiling(row):
    """(standing, share %, low %, high %) of a row against its ceiling, by the paired interval: standing is below,
    at (the interval holds 100%: the two cannot be told apart), above (wholly above 100%), one (a single round, no
    interval) or None (no ceiling). The table's cell, the verdict and the answer's flag all read it."""
    row = SummaryRow.of(row)
    pct, low, high = num(row.ceiling_pct), num(row.ceiling_low_pct), num(row.ceiling_high_pct)
    if pd.isna(pct):
        return None, pct, low, high
    if pd.isna(low):
        return "one", pct, low, high
    return ("above" if low > 100 else "at" if high >= 100 else "below"), pct, low, high


def emulated_bf16(row):
    """The row ran bf16 autocast on a device that only emulates bf16."""
    row = SummaryRow.of(row)
    return row.amp_dtype == "bf16" and str(row.bf16_native).lower() == "false"


def step_ms(row):
    """A step at the row's measured rate: the one step time of the table, time.png and the verdicts."""
    row = SummaryRow.of(row)
    rate = num(row.rate_median)
    return 1e3 * num(row.global_batch_size) / rate if rate > 0 else float("nan")


def waited(row):
    """The share of its steady steps the compute waited for data (the refills at epoch starts apart: real training
    has one in thousands of steps; bench/stages/epochs.py): on a GPU the device's own (starved: its stream idle until
    the batch was there), not the host's, which also waits where the host runs ahead (DALI's iterator blocks until
    its batch is ready); on a CPU the two are one. NaN where not known (read_rates: a window that held an epoch start
    in a record that does not separate its wait)."""
    row = SummaryRow.of(row)
    starved = num(row.starved_steady_frac)
    return starved if row.device == "cuda" and pd.notna(starved) else num(row.data_wait_steady_frac)


def steady_after(warmup_ms, median_ms, steady=1.1):
    """The warm-up steps a run needed: the fewest k such that every warm-up step after the k-th took steady x the
    timed window's median step or less; the last warm-up step is left out (it counts the FLOPs and gives the warm-up's
    memory back: slow by design). None where no step before the last was steady, or nothing was recorded."""
    if not warmup_ms or not median_ms or median_ms <= 0:
        return None
    steps = list(warmup_ms[:-1])
    k = len(steps)
    while k > 0 and steps[k - 1] <= steady * median_ms:
        k -= 1
    return k + 1 if k < len(steps) else None


def stalls(row):
    """(p90 step ms, median step ms) of a row whose slowest tenth of steps take STALL times its median or more (steps
    that stall between steady ones: the host, a collective, a loader's hiccup), else None. On the H200 of 2026-11-27
    the whole recipe without compile stepped in 58-62 ms at the median and 102-120 ms at the 90th percentile, 4-5%
    starved: its rate was its stalls'."""
    row = SummaryRow.of(row)
    p90, median = num(row.step_time_p90_ms), num(row.step_time_median_ms)
    if not (median > 0 and p90 >= STALL * median):
        return None
    return p90, median


def compute_ms(row):
    """Compute per step: the step at the measured rate less its share waiting for data."""
    row = SummaryRow.of(row)
    wait = waited(row)
    return step_ms(row) * (1 - (0 if pd.isna(wait) else wait))


def rounds_to_settle(row, most=10_000):
    """About how many paired rounds at the noise seen would decide the row (decide): the spread of its log ratios,
    read back from its interval (half-width = t(df) x sd / sqrt(rounds), df: rounds - 1 and the machine noise's,
    interval), and the fewest rounds n at which either its DECIDING interval, t(n - 1 + the machine's df) x sd /
    sqrt(n), is narrower than its distance from 1 (faster or slower), or its 90% interval is narrower than its
    distance from the margin's nearer edge (within the margin). The t quantile counts: 2 rounds' interval is 12.7
    standard errors wide where 10 rounds' is 2.3, so the rounds do not grow with the square of a 2-round interval.
    NaN without an interval, inf where none up to `most` would."""
    row = SummaryRow.of(row)
    estimate, low, high = num(row.speedup), num(row.speedup_low), num(row.speedup_high)
    rounds = num(row.rounds_paired)
    if math.isnan(low) or math.isnan(high) or not rounds >= 2:
        return math.nan
    width, effect, margin = math.log(high / low) / 2, abs(math.log(estimate)), math.log1p(margin_of(row))
    if width <= 0 or (effect == 0 and margin <= 0):
        return math.inf
    machine = max(0.0, degrees_of(row) - (rounds - 1))  # the machine's noise's degrees of freedom (interval's noise)
    spread = width * math.sqrt(rounds) / t_quantile(0.5 + CONFIDENCE / 2, machine + rounds - 1)

    def decided(n):
        df = machine + n - 1
        changed = effect > 0 and t_quantile(0.5 + DECIDING / 2, df) * spread / math.sqrt(n) < effect
        within = t_quantile(0.5 + EQUIVALENCE / 2, df) * spread / math.sqrt(n) <= margin - effect
        return changed or within

    n = int(rounds)
    while n <= most and not decided(n):
        n = n + 1 if n < 100 else int(n * 1.1)
    return n if n <= most else math.inf


def degrees_of(row):
    """The degrees of freedom of the row's speed-up interval: speedup_df, else (a summary from before it) its rounds
    less one."""
    row = SummaryRow.of(row)
    df = num(row.speedup_df)
    return df if not math.isnan(df) else num(row.rounds_paired) - 1


def ratio_answer(row, column, memory=False):
    """The answer of a ratio's interval (column_low to column_high) by classify, as the speed-up's; in memory's words
    (more, less) where memory; None for a ratio of one round (no interval)."""
    row = SummaryRow.of(row)
    low, high = num(getattr(row, f"{column}_low")), num(getattr(row, f"{column}_high"))
    if math.isnan(low):
        return None
    answer = classify(low, high)
    return dict(faster="more", slower="less").get(answer, answer) if memory else answer


def within_interval(row):
    """(low, high) of the row's speed-up's 90% interval, the one read against its margin (narrower); NaNs without."""
    row = SummaryRow.of(row)
    return narrower(num(row.speedup_low), num(row.speedup_high), degrees_of(row), EQUIVALENCE)


def deciding_interval(row):
    """(low, high) of the row's speed-up's DECIDING interval, the one that calls it faster or slower; NaNs without."""
    row = SummaryRow.of(row)
    return narrower(num(row.speedup_low), num(row.speedup_high), degrees_of(row), DECIDING)


SELF_CHECK = ("holds", "fails")  # what self_check says of the baseline against itself


def self_check(row):
    """Of the baseline run again as a row (catalogue.SELF: no effect by construction): holds where its answer is within
    the margin or open, fails where it came out faster or slower: the intervals are narrower than this machine's noise
    (a disturbed round, drift the pairing did not take out), and every answer beside it is read with that in mind;
    None for every other row and before an answer."""
    row = SummaryRow.of(row)
    if row.variant != catalogue.SELF or not isinstance(row.speed_answer, str):
        return None
    return "fails" if row.speed_answer in ("faster", "slower") else "holds"


class Derived(NamedTuple):
    column: str
    dtype: type  # float (NaN where none), str (None where none) or bool
    of: Callable  # the field's value, from the row's own numbers


# each row's derived fields, which the words and the renderers (bench/outputs/) read, never working them out again.
# They are the summary's numbers read once by the rules above, so derived() adds them to any summary (one read back
# from summary.csv too); summary.csv holds only the numbers they come from (in_order leaves them out).
DERIVED = (
    Derived("step_ms", float, step_ms),  # ms a step at the measured rate
    Derived("compute_ms", float, compute_ms),  # the step less its data wait
    Derived("wait_share", float, waited),  # the share of the window waiting for data (a GPU's: the device's own)
    Derived("stall_p90_ms", float, lambda row: (stalls(row) or (math.nan, math.nan))[0]),  # where its steps stall
    Derived("stall_median_ms", float, lambda row: (stalls(row) or (math.nan, math.nan))[1]),
    Derived("ceiling_standing", str, lambda row: against_ceiling(row)[0]),  # below, at, above, one (round)
    Derived("torch_blind", bool, torch_blind),  # torch's memory counters do not see its batches (DALI on a GPU)
    Derived("bf16_emulated", bool, emulated_bf16),  # bf16 autocast on a device that only emulates bf16
    Derived("peer_speed_answer", str, lambda row: ratio_answer(row, "speedup_vs_peer")),  # against its PEERS row
    Derived("peer_memory_answer", str, lambda row: ratio_answer(row, "memory_vs_peer", memory=True)),
    Derived("rounds_to_settle", float, rounds_to_settle),  # paired rounds at this noise to decide it (inf: none)
    Derived("within_low", float, lambda row: within_interval(row)[0]),  # the 90% interval read against the margin
    Derived("within_high", float, lambda row: within_interval(row)[1]),
    Derived("deciding_low", float, lambda row: deciding_interval(row)[0]),  # the one that calls faster or slower
    Derived("deciding_high", float, lambda row: deciding_interval(row)[1]),
    Derived("self_check", str, self_check),  # the baseline against itself: holds (within, open) or fails
)


def derived(summary):
    """The summary with each row's derived fields (DERIVED) as columns: what the words and the renderers read."""
    summary = summary.copy()
    rows = [SummaryRow.of(row) for _, row in summary.iterrows()]
    for field in DERIVED:
        values = [field.of(row) for row in rows]
        values = [bool(value) for value in values] if field.dtype is bool else values
        summary[field.column] = pd.Series(values, index=summary.index, dtype=float if field.dtype is float else object)
    return summary
