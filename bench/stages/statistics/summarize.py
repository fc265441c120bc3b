"""Summarizing: from the rows of a bench to one row per variant, with its paired comparison and its answers.

The statistics of paired rounds (intervals, the machine's noise, pooling, the pairing itself) are
bench/stages/statistics/intervals.py's, and the rules a row's answers follow (the margin, the stop rule, learning, each
row's answers as fields) bench/stages/statistics/rules.py's; this module builds the summary's rows and reads them
through both.

A round in which a row's run or a reference run beside it was taken on a busy machine (the runner's flag: other
processes' CPU, the hypervisor's steal) is read as such: the row's answer is read again from its runs without the
busy ones (`quiet_answer`), and where the two differ the row stays open: an answer that rests on a disturbed round
is none.

The summary (`summarize`): per workload and variant, the median and spread of the rate, the speed-up and
memory against the reference with their intervals and answers, the share of the ceiling: numbers and answers
only. The words (each row's verdict, the notes) are bench/outputs/verdicts.py's, from these numbers; summary.csv is the
two together, and summary.md and report.html show them (bench/outputs/markdown.py, bench/outputs/report.py). One
step time everywhere: ms per step at the row's measured rate (global batch / samples_per_s, `step_ms`), the same figure
as the table's and time.png's; compute per step is that step less its data wait.
"""

import math

import numpy as np
import pandas as pd

from bench import catalogue, schema
from bench.schema import SummaryRow, num
from bench.stages import epochs
from bench.stages.cost import STEADY
from bench.stages.statistics.intervals import (
    at_reference_steps,
    busy_rounds,
    degrees,
    half_width,
    interval,
    is_busy,
    noise,
    paired,
)
from bench.stages.statistics.rules import MARGIN, PEERS, classify, decide, learning, step_ms, torch_blind

# ----------------------------------------------------------------------------- the steady rate

RATE_BASES = ("window", "steady steps", "median step", "unknown")  # how rate_of reads a run's rate


def of_run(run, name):
    """A field of a run (a row of runs.csv, read by its name: a record from before a field has none) as a number, NaN
    where it has none."""
    return num(run.get(name))


def train_images(run):
    """The images of the training set a run trained on, from its record (steps_per_epoch; before that field, its
    epoch at the measured rate); NaN where neither is there."""
    steps, batch = of_run(run, "steps_per_epoch"), of_run(run, "global_batch_size")
    batch = of_run(run, "batch_size") if math.isnan(batch) else batch
    if not math.isnan(steps):
        return steps * batch
    return of_run(run, "epoch_time_s") * of_run(run, "samples_per_s")


def starts_over(run):
    """How many times as often as training on the real set it stands for (bench/stages/epochs.py) the run's window
    held epoch starts, where it held more than that allows; NaN where it did not (or nothing says)."""
    starts, timed = of_run(run, "epoch_starts_timed"), of_run(run, "steps_timed")
    batch = of_run(run, "global_batch_size")
    batch = of_run(run, "batch_size") if math.isnan(batch) else batch
    if not starts > 0 or not timed > 0 or math.isnan(batch):
        return math.nan
    images = train_images(run)
    real = epochs.real_set(
        run.get("workload") or "custom", run.get("device") == "cuda", None if math.isnan(images) else images
    )
    real_epoch = epochs.epoch_steps(real.images, batch) if real else None
    if real_epoch is None or starts <= epochs.allowed(timed, real_epoch):
        return math.nan
    return starts * real_epoch / timed


def rate_of(run):
    """(the rate the summary reads, its basis: RATE_BASES) of one ok run: as steady training has it. A window that
    held no more epoch starts than the real set would is read as it is (samples_per_s); one that held more, at its
    steady steps (steady_samples_per_s: the window less the steps that began an epoch), or, in a record from before
    that field, at its median step where its steps were steady (the 90th percentile within STEADY of the median: the
    median is then every steady step's time); else not at all: its window held a refill that the record does not
    separate, and its steps stalled, so neither the window nor the median step is its steady rate."""
    if math.isnan(starts_over(run)):
        return of_run(run, "samples_per_s"), "window"
    if not math.isnan(of_run(run, "steady_samples_per_s")):
        return of_run(run, "steady_samples_per_s"), "steady steps"
    median, p90 = of_run(run, "step_time_median_ms"), of_run(run, "step_time_p90_ms")
    batch = of_run(run, "global_batch_size")
    if median > 0 and p90 <= STEADY * median and not math.isnan(batch):
        return 1e3 * batch / median, "median step"
    return math.nan, "unknown"


PER_WINDOW_RATE = ("achieved_tflop_per_s", "mfu_pct")  # a run's figures in proportion to its window's rate
PER_WINDOW_ENERGY = ("energy_per_1k_samples_j", "avg_power_w")  # ... and of its window's energy: not separable


def read_rates(runs):
    """The runs with `rate` and `rate_basis` (rate_of), their FLOP rates at that rate and their energy where the
    window is their rate (its energy holds the refill of a window read otherwise: unknown), and their steady data
    waits: in a record from before data_wait_steady_frac and starved_steady_frac, the window's where it held no epoch
    start, else unknown (NaN)."""
    runs = runs.copy()
    rows = [row for _, row in runs.iterrows()]
    found = [rate_of(row) if row.get("status") == "ok" else (math.nan, None) for row in rows]
    runs["rate"] = pd.Series([rate for rate, _ in found], index=runs.index, dtype=float)
    runs["rate_basis"] = pd.Series([basis for _, basis in found], index=runs.index, dtype=object)
    steady = runs["rate_basis"].isin(["steady steps", "median step"])
    scale = (runs["rate"] / runs["samples_per_s"]).where(steady, 1.0)
    for column in PER_WINDOW_RATE:  # the FLOP rates scale with the rate; the window's energy holds the refill
        if column in runs:
            runs[column] = (runs[column] * scale).where(runs["rate_basis"] != "unknown")
    for column in PER_WINDOW_ENERGY:
        if column in runs:
            runs[column] = runs[column].where(~steady & (runs["rate_basis"] != "unknown"))
    for steady, whole in ("data_wait_steady_frac", "data_wait_frac"), ("starved_steady_frac", "starved_frac"):
        if whole not in runs:
            continue
        mine = runs[steady] if steady in runs else pd.Series(math.nan, index=runs.index)
        none_held = runs["epoch_starts_timed"].fillna(0) == 0 if "epoch_starts_timed" in runs else True
        runs[steady] = mine.where(mine.notna(), runs[whole].where(none_held))
    return runs


def basis_of(group):
    """(how a row's rate was read: the one basis of its ok runs whose rate is known, 'mixed', or 'unknown' where none
    is; how many of its ok runs' rates are unknown)."""
    bases = group["rate_basis"].dropna()
    known = list(dict.fromkeys(b for b in bases if b != "unknown"))
    basis = None if bases.empty else "unknown" if not known else known[0] if len(known) == 1 else "mixed"
    return basis, int((bases == "unknown").sum())


# ----------------------------------------------------------------------------- the summary


CEILINGS = {"full": "synthetic", "mixed": "amp-synthetic"}  # the synthetic row each precision is compared with


# the memory a verdict and the trade-off plot read, the first measured: the GPU's whole process tree (NVML), torch's
# reserved memory, or on a CPU the host memory of the process tree
MEMORY = ("nvml_peak_mib", "peak_mem_reserved_mib", "peak_host_mem_mib")


TORCH_MEMORY = ("peak_mem_allocated_mib", "peak_mem_reserved_mib")  # torch's own counters (torch.cuda.max_memory_*)


def summarize(runs, margin=MARGIN):
    """Per workload and variant, in plan order: median and spread of the rate, speed-up and memory against the
    reference (the speed-up's answer against `margin`, written in each row's `margin`), the share of the ceiling of
    its precision, and how many of its runs were taken on a busy machine.

    Training runs are compared with the `baseline` variant of their workload, loader-only runs with `loader`.
    """
    runs = runs.assign(workload=runs["workload"].astype(object).fillna("custom"))  # rows of schema version 1 name none
    runs = read_rates(runs)  # each run's rate and data wait as steady training has them
    summary = per_variant(runs)
    summary["margin"] = float(margin)
    against_references(summary, runs)
    against_ceilings(summary, runs)
    paybacks(summary)
    return summary  # every column: bench/outputs/verdicts.py adds the words and puts them in summary.csv's order


PAYBACKS = ("pays back", "never", "not settled")  # what payback() says of a compiled row


def payback(row, base):
    """(answer, steps from a cold cache, steps from a warm one) for a compiled row against its baseline: the steps of
    training after which the row's first step, which compiles, costs no more than its faster steps saved. The compile
    costs its first step less the baseline's first step (eager code, the same work: its own one-off costs, cuDNN's
    autotuning say, are the baseline's too); a step saves the baseline's step time less the row's, at the paired
    speed-up. "pays back" where the speed-up's interval lies above 1, "never" where it lies below; "not settled"
    where it holds 1 or there is none (one round): the steps are then those of the estimate, where it is above 1."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    speedup, low, high = num(row.speedup), num(row.speedup_low), num(row.speedup_high)
    answer = "pays back" if low > 1 else "never" if high < 1 else "not settled"
    base_step_s = step_ms(base) / 1e3
    if not speedup > 1 or not base_step_s > 0 or answer == "never":
        return answer, None, None
    saved_s = base_step_s * (1 - 1 / speedup)
    eager_first_s = num(base.first_step_s)
    eager_first_s = 0.0 if math.isnan(eager_first_s) else eager_first_s

    def steps(compile_s):
        count = (compile_s - eager_first_s) / saved_s  # rounded first: 250.00000000000006 steps are 250
        return None if math.isnan(compile_s) else max(0, math.ceil(round(count, 6)))

    return answer, steps(num(row.compile_cold_s)), steps(num(row.compile_warm_s))


def paybacks(summary):
    """payback() for every training row that compiled code in its timed window, against its workload's baseline."""
    for column in "payback_answer", "payback_cold_steps", "payback_warm_steps":
        summary[column] = None
    if "compile_s" not in summary:
        return
    for workload in summary["workload"].unique():
        base = summary[(summary["workload"] == workload) & (summary["kind"] == "train")]
        base = base[base["variant"] == "baseline"]
        mine = (summary["workload"] == workload) & (summary["kind"] == "train") & summary["compile_s"].notna()
        if base.empty or "speedup" not in summary:
            continue
        for i, row in summary[mine].iterrows():
            compiled = num(SummaryRow.of(row).compiled_steps_timed)
            if compiled == 0:  # the window timed eager code: nothing compiled to repay
                continue
            summary.loc[i, ["payback_answer", "payback_cold_steps", "payback_warm_steps"]] = payback(row, base.iloc[0])


def in_order(summary, derived=False):
    """The summary's columns in the schema's order (summary.csv's), the ratios last; with derived, every other column
    after them (each row's derived fields and causes: what the words and the renderers read, not summary.csv)."""
    columns = [c for c in schema.SUMMARY_COLUMNS if c in summary] + list(schema.RATIOS.values())
    return summary.reindex(columns=columns + ([c for c in summary if c not in columns] if derived else []))


def per_variant(runs):
    """A row per workload, kind and variant: its runs, the median and spread of its rate, its medians and firsts,
    its memory (the first source every run of it has) and its cold compile."""
    rows = []
    for (workload, kind, variant), group in runs.groupby(["workload", "kind", "variant"], sort=False):
        ok = group[group["status"] == "ok"]
        rate = ok["rate"]
        row = dict(workload=workload, kind=kind, variant=variant, runs_ok=len(ok), runs_failed=len(group) - len(ok))
        row["rate_basis"], row["runs_unsteady"] = basis_of(ok)
        over = [starts_over(r) for _, r in ok.iterrows()]
        row["epoch_starts_over"] = float(np.nanmedian(over)) if not all(math.isnan(x) for x in over) else math.nan
        real = epochs.real_set(workload, first(ok, "device") == "cuda", first(ok, "steps_per_epoch"))
        row["stands_for"] = real.name if real else None
        unknown = ok[ok["rate_basis"] == "unknown"]
        row["rate_floor"] = unknown["samples_per_s"].median() if not unknown.empty else math.nan
        row["runs_busy"] = int(ok["busy"].astype(str).str.lower().eq("true").sum())
        row["runs_diverged"] = int(ok["diverged_step"].notna().sum()) if "diverged_step" in ok else 0
        row.update(rate_median=rate.median(), rate_min=rate.min(), rate_max=rate.max())
        row["spread_pct"] = 100 * (row["rate_max"] - row["rate_min"]) / row["rate_median"]
        row.update({column: ok[column].median() for column in schema.MEDIANS})
        row.update(
            {column: ok[column].dropna().iloc[0] if ok[column].notna().any() else None for column in schema.FIRSTS}
        )
        row["error"] = group.loc[group["status"] != "ok", "error"].iloc[-1] if len(ok) < len(group) else None
        blind = torch_blind(dict(loader=first(ok, "loader"), device=first(ok, "device")))
        source = next(
            (c for c in MEMORY if c in ok and ok[c].notna().any() and not (blind and c in TORCH_MEMORY)), None
        )
        if source:
            row.update(memory_source=source, memory_mib=ok[source].median())
            row.update(memory_min_mib=ok[source].min(), memory_max_mib=ok[source].max())
        if "compile_cache_warm" in ok and ok["compile_s"].notna().any():
            warm = ok["compile_cache_warm"].astype(str).str.lower()
            row["compile_cold_s"] = ok.loc[warm.eq("false"), "compile_s"].median()
            row["compile_warm_s"] = ok.loc[warm.eq("true"), "compile_s"].median()
        rows.append(row)
    return pd.DataFrame(rows)


def against_references(summary, runs):
    """Each row against its workload's reference (baseline; loader for a loader's rows), paired by round: the
    speed-up and the memory with their intervals and answers, each PEERS row against its peer too, and the ratios
    of the medians."""
    for workload in summary["workload"].unique():
        for kind, reference in ("train", "baseline"), ("loader", "loader"):
            mine = (summary["kind"] == kind) & (summary["workload"] == workload)
            base = summary[mine & (summary["variant"] == reference)]
            if base.empty:
                continue
            ok = runs[(runs["workload"] == workload) & (runs["kind"] == kind) & (runs["status"] == "ok")]
            paired_rates = paired(ok, "rate", reference)
            machine = noise(ok, "rate", reference)  # the speed's noise, from the baseline beside the rows
            busy = busy_rounds(ok, reference)  # {variant: the rounds its pairing read a busy run in}
            quiet = ok[~is_busy(ok)]  # the same runs, the busy ones left out: read again where a round was busy
            quiet_rates = paired(quiet, "rate", reference) if any(busy.values()) else {}
            quiet_machine = noise(quiet, "rate", reference) if any(busy.values()) else None
            learned = at_reference_steps(ok, reference)
            losses = (
                paired(learned, "train_loss_final", reference) if kind == "train" and "train_loss_final" in ok else {}
            )
            source = base["memory_source"].iloc[0] if "memory_source" in base else None  # alike only: one source
            paired_memory = paired(ok, source, reference) if isinstance(source, str) else {}
            for i in summary.index[mine]:
                variant = summary.at[i, "variant"]
                summary.loc[i, "speedup_floor"] = summary.at[i, "rate_floor"] / base["rate_median"].iloc[0]
                ratios = paired_rates.get(variant, [])
                estimate, low, high = interval(ratios, noise=machine)
                summary.loc[i, ["speedup", "speedup_low", "speedup_high"]] = estimate, low, high
                summary.loc[i, "rounds_paired"] = len(ratios)
                summary.loc[i, "speedup_df"] = degrees(ratios, machine)
                summary.loc[i, "speedup_precision_pct"] = 100 * half_width(estimate, low, high)
                answer = decide(low, high, summary.at[i, "speedup_df"], summary.at[i, "margin"])
                summary.loc[i, "rounds_busy"] = len(busy.get(variant, ()))
                if busy.get(variant) and variant != reference:  # an answer that rests on busy rounds is open
                    kept = quiet_rates.get(variant, [])
                    _, q_low, q_high = interval(kept, noise=quiet_machine)
                    quiet_answer = decide(q_low, q_high, degrees(kept, quiet_machine), summary.at[i, "margin"])
                    summary.loc[i, ["quiet_answer", "busy_answer"]] = quiet_answer, answer
                    answer = answer if quiet_answer == answer else "unsettled"
                summary.loc[i, "speed_answer"] = None if variant == reference else answer
                if variant != reference and variant in losses and summary.at[i, "dataset"] != "synthetic":
                    columns = ["loss_ratio", "loss_ratio_low", "loss_ratio_high", "learning_answer"]
                    summary.loc[i, columns] = learning(losses[variant])
                if isinstance(source, str) and summary.at[i, "memory_source"] == source:
                    estimate, low, high = interval(paired_memory.get(variant, []))
                    summary.loc[i, ["memory_vs_baseline", "memory_vs_baseline_low", "memory_vs_baseline_high"]] = (
                        estimate,
                        low,
                        high,
                    )
                    answer = classify(low, high)
                    answer = dict(faster="more", slower="less").get(answer, answer)
                    summary.loc[i, "memory_answer"] = None if variant == reference else answer
            for i in summary.index[mine]:  # a row that answers a question against another row, too (PEERS)
                peer = PEERS.get(summary.at[i, "variant"])
                if peer not in set(summary.loc[mine, "variant"]):
                    continue
                summary.loc[i, "peer"] = peer
                rates = paired(ok, "rate", peer).get(summary.at[i, "variant"], [])
                summary.loc[i, ["speedup_vs_peer", "speedup_vs_peer_low", "speedup_vs_peer_high"]] = interval(rates)
                if isinstance(source, str):
                    memory = paired(ok, source, peer).get(summary.at[i, "variant"], [])
                    summary.loc[i, ["memory_vs_peer", "memory_vs_peer_low", "memory_vs_peer_high"]] = interval(memory)
            blind = mine & summary.apply(torch_blind, axis=1)  # figures that leave DALI's batches out: not compared
            for column, ratio in schema.RATIOS.items():
                summary.loc[mine, ratio] = summary.loc[mine, column] / base[column].iloc[0]
                if column in TORCH_MEMORY:
                    summary.loc[blind, ratio] = None


RECIPE_CEILING = "all-synthetic"  # the whole recipe's own ceiling (catalogue.py), where a bench ran it


def ceiling_of(row, ran):
    """The synthetic row a real row is read against: the whole recipe's own ceiling for the recipe with its amp,
    channels_last and compile on (all, all:no-ddp, either over any loader) where it ran (ran: the workload's
    variants), else the ceiling of its precision (CEILINGS)."""
    row = SummaryRow.of(row)
    if RECIPE_CEILING in ran and catalogue.family(row.variant) == "all":
        if set(catalogue.combination(row.variant)) <= {"no-ddp"}:
            return RECIPE_CEILING
    return CEILINGS["mixed" if pd.notna(row.amp_dtype) else "full"]


def against_ceilings(summary, runs):
    """Each real training row's share of its ceiling (ceiling_of: synthetic, amp-synthetic or the recipe's own),
    paired by round."""
    against = {}  # (workload, ceiling): {variant: rate / the ceiling's rate, per round}
    for i, row in summary.iterrows():  # against its ceiling, paired by round like the speed-up
        row = SummaryRow.of(row)
        if row.kind != "train" or row.dataset == "synthetic":
            continue
        ceiling = ceiling_of(row, set(summary.loc[summary["workload"] == row.workload, "variant"]))
        if (row.workload, ceiling) not in against:
            ok = runs[(runs["workload"] == row.workload) & (runs["kind"] == "train") & (runs["status"] == "ok")]
            has = (ok["variant"] == ceiling).any()
            against[(row.workload, ceiling)] = paired(ok, "rate", ceiling) if has else None
        ratios = against[(row.workload, ceiling)]
        if ratios is None:
            continue
        estimate, low, high = interval(ratios.get(row.variant, []))
        summary.loc[i, "ceiling"] = ceiling
        summary.loc[i, ["ceiling_pct", "ceiling_low_pct", "ceiling_high_pct"]] = 100 * estimate, 100 * low, 100 * high


def first(frame, column):
    """The column's first value in frame, None where there is none."""
    return frame[column].dropna().iloc[0] if column in frame and frame[column].notna().any() else None
