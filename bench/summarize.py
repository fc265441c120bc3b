"""Summarizing: from the rows of a bench to one row per variant, with its paired comparison and its verdict.

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

The answer (`classify`): no measurable difference when the interval lies wholly inside 1 +- BAND (even if
also wholly on one side of 1: a difference that small is none to act on); else faster or slower when it lies
wholly above or below 1; otherwise not settled. Rounds are added while an interval is wider than PRECISION
or a quarter of the effect's size (`precise`), never on whether it has crossed 1: stopping when a result
looks significant would manufacture findings.

The verdicts: one line per variant, computed from its own summary row and its reference's by the rules
below, never written by hand. Every number in a verdict is a field of the summary (or the plain arithmetic
of one: a step is global_batch_size / samples_per_s), so it matches the table. Memory is read alike. One
step time everywhere: ms per step at the row's measured rate (global batch / samples_per_s), the same figure
as the table's and time.png's; compute per step is that step less its data wait.

The summary (`summarize`): per workload and variant, the median and spread of the rate, the speed-up and
memory against the reference with their intervals, the share of the ceiling, the notes on busy and diverged
runs; summary.csv is it, and summary.md and report.html show it (bench/markdown.py, bench/report.py).
"""

import math

import numpy as np
import pandas as pd
from scipy import stats

from bench import schema

# ----------------------------------------------------------------------------- statistics: paired rounds

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


# ----------------------------------------------------------------------------- the verdicts

# a row that answers a question against another row as well as the baseline: FSDP against DDP, at the same processes
PEERS = {"fsdp": "ddp"}
WAIT_BOUND = 0.2  # a run that waits for data this share of its window or more is limited by its input pipeline
WAIT_LITTLE = 0.05  # below this share, a faster input pipeline has little to win
WAIT_CHANGE = 0.05  # a change in the data wait smaller than this (absolute) is "stayed"
CORES_CHANGE = 0.1  # on a CPU, a change of the loader's cores smaller than this is not said
ACCURACY_GAP = 0.1  # validation accuracy this far from the baseline's, after the same steps, is worth a look


def torch_blind(row):
    """DALI on a GPU hands out its batches as views of its own memory (DALI 2.4's default), which torch's counters do
    not see: such a row's torch figures leave its batches out and are not compared; NVML's figure sees them."""
    return row.get("loader") == "dali" and row.get("device") == "cuda"


def add(summary):
    """summary with a `verdict` for every row: training rows against their workload's baseline, loader rows
    against loader.py."""
    summary = summary.copy()
    summary["verdict"] = None
    for i, row in summary.iterrows():
        same = summary[(summary["workload"] == row.workload) & (summary["kind"] == row.kind)]
        reference = same[same["variant"] == ("baseline" if row.kind == "train" else "loader")]
        summary.at[i, "verdict"] = verdict(row, reference.iloc[0] if not reference.empty else None)
    return summary


def verdict(row, base):
    """One line: what the variant did (speed, memory, each against the noise of the repeats) and why, from its
    measured fields."""
    name = row.variant
    if not row.runs_ok:
        return f"{name}: no verdict: all {row.runs_failed} of its runs failed ({row.error})."
    if row.get("runs_diverged"):
        return (
            f"{name}: no verdict: its loss diverged (NaN or inf) in {row.runs_diverged} of {row.runs_ok} runs, so its"
            " speed was measured on meaningless numbers."
        )
    if row.kind == "loader":
        if base is None or row.variant == base.variant:
            return f"{name}: the input pipeline alone delivers {row.rate_median:,.0f} images/s{noise_of(row)}."
        return f"{name}: {speed(row, 'images/s of loader.py')}, the input pipeline alone.{busy(row)}"
    if row.get("dataset") == "synthetic":
        return (
            f"{name}: the ceiling: {row.rate_median:,.1f} samples/s on batches already on the device, the speed"
            f" limit of {row.model} here; the real rows of its precision are read against it.{busy(row)}"
        )
    if base is None or name == base.variant:
        reached = ceiling_words(row)
        parts = [f"compute {compute_ms(row):.1f} ms a step"] if pd.notna(compute_ms(row)) else []
        parts += [f"waiting for data {waited(row):.0%} of the time"] if pd.notna(waited(row)) else []
        if pd.notna(num(row, "energy_per_1k_samples_j")):
            parts += [f"{num(row, 'energy_per_1k_samples_j'):,.1f} J per 1,000 samples ({row.energy_source})"]
        said = f": {', '.join(parts)}" if parts else ""
        return (
            f"{name}: the reference, {row.rate_median:,.1f} samples/s{noise_of(row)}{said}{reached}.{mfu_words(row)}"
            f"{busy(row)}"
        )
    if not_applied(row):
        return f"{name}: does not apply here: {not_applied(row)}, as the baseline ({speed(row, 'speed')}).{busy(row)}"
    if ran_eager(row):
        return f"{name}: no verdict on compiling: {ran_eager(row)} ({speed(row, 'speed')} is eager code's).{busy(row)}"
    head = f"{name}: {speed(row, 'speed')}"
    if pd.notna(row.get("memory_vs_baseline")):
        head += f", {memory(row)}"
    if pd.notna(num(row, "energy_per_1k_samples_j_vs_baseline")):  # energy: the medians' ratio (energy_source's)
        head += f" and {num(row, 'energy_per_1k_samples_j_vs_baseline'):.2f}x the energy per sample"
    said = reasons(row, base)
    return f"{head}{': ' + '; '.join(said) if said else ''}.{peer_words(row)}{mfu_words(row)}{busy(row)}"


def ran_eager(row):
    """Why a compiled row measured no compiled code ('compiled code did not run in its timed window'), or ''.
    Its runs count the timed steps whose loss came through compiled code (meter.py): none, and the row's speed is
    eager code's, whatever it reads (torch 2.11 once fell back to eager silently after the FLOP count)."""
    if pd.isna(row.get("compile_mode")) or num(row, "compiled_steps_timed") != 0:
        return ""
    return "compiled code did not run in its timed window (torch.compile fell back to eager code)"


def mfu_words(row):
    """' It reaches 41% of this GPU's datasheet peak for its precision (MFU).', or '' where the peak is not known."""
    mfu = num(row, "mfu_pct")
    if pd.isna(mfu):
        return ""
    peak, gpus = num(row, "peak_tflop_per_s"), num(row, "world_size")
    whose = "this GPU's" if not gpus > 1 else f"its {gpus:.0f} GPUs'"
    return f" It reaches {mfu:.0f}% of {whose} datasheet peak for its precision ({peak:.0f} TFLOP/s: MFU)."


def peer_words(row):
    """' Against ddp (the same 2 processes and global batch): 0.84x the speed (...), 0.95x the memory per process
    (...).', or '' for a row without a peer."""
    peer = row.get("peer")
    if not isinstance(peer, str) or pd.isna(num(row, "speedup_vs_peer")):
        return ""
    said = f" Against {peer} (the same {num(row, 'world_size'):.0f} processes and global batch): "
    said += ratio_words(row, "speedup_vs_peer", "the speed")
    if pd.notna(num(row, "memory_vs_peer")):
        said += ", " + ratio_words(row, "memory_vs_peer", "the memory per process")
    return said + "."


def ratio_words(row, column, what):
    """'0.84x the speed, slower (0.80x to 0.88x)' by the interval (as the speed-up's answer), '(one round)' without."""
    value, low, high = num(row, column), num(row, f"{column}_low"), num(row, f"{column}_high")
    if pd.isna(low):
        return f"{value:.2f}x {what} (one round)"
    answer = classify(low, high)
    if "speed" not in what:
        answer = dict(faster="more", slower="less").get(answer, answer)
    said = dict(same="no measurable difference", unsettled="not settled").get(answer, answer)
    return f"{value:.2f}x {what}, {said} ({low:.2f}x to {high:.2f}x)"


def plural(count, word):
    """'1 round', '3 rounds'."""
    return f"{count:.0f} {word}{'' if round(count) == 1 else 's'}"


def against_ceiling(row):
    """(standing, share %, low %, high %) of a row against its ceiling, by the paired interval: standing is below,
    at (the interval holds 100%: the two cannot be told apart), above (wholly above 100%), one (a single round, no
    interval) or None (no ceiling). The table's cell, the verdict and the answer's flag all read it."""
    pct, low, high = num(row, "ceiling_pct"), num(row, "ceiling_low_pct"), num(row, "ceiling_high_pct")
    if pd.isna(pct):
        return None, pct, low, high
    if pd.isna(low):
        return "one", pct, low, high
    return ("above" if low > 100 else "at" if high >= 100 else "below"), pct, low, high


def not_applied(row):
    """Why a row's technique did nothing here, where its own record says so, else '': tf32 on a device with neither
    TF32 nor native bf16 left its matmuls in fp32 (train_tf32.py said so), so the run was the baseline's."""
    if row.get("variant") == "tf32" and row.get("matmul_precision") == "fp32":
        return (
            f"this {'GPU' if row.get('device') == 'cuda' else 'CPU'} has neither TF32 nor native bf16, so it ran fp32"
        )
    return ""


def emulated_bf16(row):
    """The row ran bf16 autocast on a device that only emulates bf16."""
    return row.get("amp_dtype") == "bf16" and str(row.get("bf16_native")).lower() == "false"


def ceiling_words(row):
    """'; it reaches 76% of the ceiling (71% to 80%)', or that it cannot be told from it, by the paired interval."""
    standing, pct, low, high = against_ceiling(row)
    if standing is None:
        return ""
    if standing == "one":
        return f"; it reaches {pct:.0f}% of the ceiling (one round)"
    if standing == "at":
        return f"; it runs at the ceiling, as far as the rounds tell ({low:.0f}% to {high:.0f}% of it)"
    spread = f" ({low:.0f}% to {high:.0f}%)" if round(low) != round(high) else ""
    return f"; it reaches {pct:.0f}% of the ceiling{spread}"


def interval_words(low, high, rounds):
    return f"95% interval {low:.2f}x to {high:.2f}x over {plural(rounds, 'paired round')}"


def speed(row, what):
    """'1.51x faster (95% interval 1.21x to 1.88x over 3 paired rounds)', 'not settled after 3 rounds ...'."""
    s, low, high, rounds = row.speedup, num(row, "speedup_low"), num(row, "speedup_high"), num(row, "rounds_paired")
    answer = row.get("speed_answer")
    if pd.isna(low):
        return f"{s:.2f}x the {what}, not settled: one paired round, no interval to judge the noise by"
    if answer in ("faster", "slower"):
        return f"{s:.2f}x {answer} ({interval_words(low, high, rounds)})"
    if answer == "same":
        words = interval_words(low, high, rounds)
        return f"no measurable difference in {what} ({s:.2f}x; {words}, inside 1 +- {BAND:.0%})"
    return (
        f"{s:.2f}x the {what}, not settled after {plural(rounds, 'round')} ({interval_words(low, high, rounds)}:"
        f" the noise, +-{row.speedup_precision_pct:.0f}%, is wider than the effect)"
    )


def memory(row):
    what = "GPU memory" if row.get("memory_source") == "nvml_peak_mib" else "memory"
    if row.get("memory_source") == "peak_host_mem_mib":
        what = "host memory"
    m, low, high = row.memory_vs_baseline, num(row, "memory_vs_baseline_low"), num(row, "memory_vs_baseline_high")
    answer = row.get("memory_answer")
    if pd.isna(low):
        return f"{m:.2f}x the {what} (one round)"
    if answer == "same":
        return f"{what} unchanged ({m:.2f}x, {low:.2f}x to {high:.2f}x)"
    if answer in ("more", "less"):
        return f"{m:.2f}x the {what}, {answer} ({low:.2f}x to {high:.2f}x)"
    return f"{m:.2f}x the {what}, not settled ({low:.2f}x to {high:.2f}x)"


def step_ms(row):
    """A step at the row's measured rate: the one step time of the table, time.png and the verdicts."""
    rate = num(row, "rate_median")
    return 1e3 * num(row, "global_batch_size") / rate if rate > 0 else float("nan")


def waited(row):
    """The share of the window the compute waited for data: on a GPU the device's own (starved: its stream idle until
    the batch was there), not the host's, which also waits where the host runs ahead (DALI's iterator blocks until
    its batch is ready); on a CPU the two are one."""
    starved = num(row, "starved_frac")
    return starved if row.get("device") == "cuda" and pd.notna(starved) else num(row, "data_wait_frac")


def compute_ms(row):
    """Compute per step: the step at the measured rate less its share waiting for data."""
    wait = waited(row)
    return step_ms(row) * (1 - (0 if pd.isna(wait) else wait))


def reasons(row, base):
    """Why, from the fields: the data wait and the compute per step, then what else the row shows."""
    said = []
    wait, base_wait = waited(row), waited(base)
    fresh_loader = pd.notna(row.get("loader")) and row.get("loader") != base.get("loader")
    if fresh_loader and pd.notna(base_wait) and base_wait < WAIT_LITTLE and not clearly_faster(row):
        said.append(f"the baseline waited for data {base_wait:.0%} of the time, so a faster loader had little to win")
    if base_wait >= WAIT_BOUND and wait >= WAIT_BOUND and not clearly_faster(row):
        said.append(
            f"the data wait stayed high ({base_wait:.0%} to {wait:.0%}): the input pipeline, not compute, sets the pace"
        )
    if emulated_bf16(row) and row.speedup < 1:
        where = "GPU (before Ampere)" if row.get("device") == "cuda" else "CPU (no AVX-512-BF16 or AMX)"
        said.append(f"bf16 is emulated on this {where}, so autocast costs more than it saves")
    step = f"compute per step went from {compute_ms(base):.1f} ms to {compute_ms(row):.1f} ms"
    if pd.isna(compute_ms(row)) or pd.isna(compute_ms(base)):
        step = None
    if pd.isna(wait) or pd.isna(base_wait):
        said += [step] if step else []
    elif abs(wait - base_wait) < WAIT_CHANGE:
        said.append(f"{step or 'compute per step unknown'} while the data wait stayed at {wait:.0%}")
    else:
        moved = "fell" if wait < base_wait else "rose"
        said.append(
            f"{step or 'compute per step unknown'} and the data wait {moved} from {base_wait:.0%} to {wait:.0%}"
        )
    cores = cores_words(row, base)
    if cores:
        said.append(cores)
    if torch_blind(row):
        said.append(
            "its GPU memory is NVML's, which sees DALI's own memory where its batches live (torch's counters do not)"
            if row.get("memory_source") == "nvml_peak_mib"
            else "its GPU memory is not compared: its batches live in DALI's own memory, which torch's counters do"
            " not see, and NVML gave no figure"
        )
    if num(row, "world_size") > 1:
        where = "the same CPU" if row.get("device") == "cpu" else f"{row.world_size:.0f} GPUs"
        said.append(f"{row.world_size:.0f} processes of batch {row.global_batch_size / row.world_size:.0f} on {where}")
    if pd.notna(num(row, "compile_s")):
        cold = f" ({row.compile_cold_s:.1f} s on an empty cache)" if pd.notna(num(row, "compile_cold_s")) else ""
        said.append(f"compiling took {row.compile_s:.1f} s{cold} before the first timed step")
    if num(row, "compile_graph_breaks") > 0:  # torch.compile ran, in pieces: each break a return to Python
        graphs, breaks = int(num(row, "compile_graphs")), int(num(row, "compile_graph_breaks"))
        said.append(f"torch.compile made {plural(graphs, 'graph')} with {plural(breaks, 'graph break')}")
    if pd.notna(num(row, "val_acc")) and pd.notna(num(base, "val_acc")):
        if abs(row.val_acc - base.val_acc) >= ACCURACY_GAP:
            said.append(
                f"its validation accuracy, {row.val_acc:.3f} against the baseline's {base.val_acc:.3f} after the"
                " same steps, says to check that it learns alike"
            )
    return said


def cores_words(row, base):
    """On a CPU, where a change of loader (or its share) moved the cores: 'its loading took 0.1 cores from the model
    (the baseline's: 0.4), which used 1.9 (1.6)'; None where not measured or not moved."""
    if row.get("device") != "cpu":
        return None
    loader, model = num(row, "cpu_loader_cores"), num(row, "cpu_model_cores")
    base_loader, base_model = num(base, "cpu_loader_cores"), num(base, "cpu_model_cores")
    if any(pd.isna(v) for v in (loader, model, base_loader, base_model)):
        return None
    fresh_loader = pd.notna(row.get("loader")) and row.get("loader") != base.get("loader")
    if not fresh_loader and abs(loader - base_loader) < CORES_CHANGE:
        return None
    return (
        f"on this CPU its loading took {loader:.2f} cores from the model (the baseline's: {base_loader:.2f}), and the"
        f" model used {model:.2f} ({base_model:.2f})"
    )


def num(row, name):
    """A number of the row, NaN where it has none (NaN compares False and prints as nan: a rule just does not fire)."""
    value = row.get(name)
    return float("nan") if value is None or pd.isna(value) else float(value)


def clearly_faster(row):
    return row.get("speed_answer") == "faster"


def noise_of(row):
    if row.runs_ok < 2:
        return " (one run)"
    return f" (repeats spread {row.spread_pct:.0f}%)"


def busy(row):
    if not row.get("runs_busy"):
        return ""
    return f" Taken on a busy machine in {row.runs_busy} of {row.runs_ok} runs: not to be trusted."


# ----------------------------------------------------------------------------- the summary


CEILINGS = {"full": "synthetic", "mixed": "amp-synthetic"}  # the synthetic row each precision is compared with


# the memory a verdict and the trade-off plot read, the first measured: the GPU's whole process tree (NVML), torch's
# reserved memory, or on a CPU the host memory of the process tree
MEMORY = ("nvml_peak_mib", "peak_mem_reserved_mib", "peak_host_mem_mib")


TORCH_MEMORY = ("peak_mem_allocated_mib", "peak_mem_reserved_mib")  # torch's own counters (torch.cuda.max_memory_*)


def summarize(runs):
    """Per workload and variant, in plan order: median and spread of the rate, speed-up and memory against the
    reference, the share of the ceiling of its precision, and how many of its runs were taken on a busy machine.

    Training runs are compared with the `baseline` variant of their workload, loader-only runs with `loader`.
    """
    runs = runs.assign(workload=runs["workload"].fillna("custom"))  # rows of schema version 1 name none
    summary = per_variant(runs)
    against_references(summary, runs)
    against_ceilings(summary, runs)
    summary = add(summary)
    return summary.reindex(columns=[c for c in schema.SUMMARY_COLUMNS if c in summary] + list(schema.RATIOS.values()))


def per_variant(runs):
    """A row per workload, kind and variant: its runs, the median and spread of its rate, its medians and firsts,
    its memory (the first source every run of it has) and its cold compile."""
    rows = []
    for (workload, kind, variant), group in runs.groupby(["workload", "kind", "variant"], sort=False):
        ok = group[group["status"] == "ok"]
        rate = ok["samples_per_s"]
        row = dict(workload=workload, kind=kind, variant=variant, runs_ok=len(ok), runs_failed=len(group) - len(ok))
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
            cold = ok[ok["compile_cache_warm"].astype(str).str.lower().eq("false")]
            row["compile_cold_s"] = cold["compile_s"].median()
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
            paired_rates = paired(ok, "samples_per_s", reference)
            source = base["memory_source"].iloc[0] if "memory_source" in base else None  # alike only: one source
            paired_memory = paired(ok, source, reference) if isinstance(source, str) else {}
            for i in summary.index[mine]:
                variant = summary.at[i, "variant"]
                ratios = paired_rates.get(variant, [])
                estimate, low, high = interval(ratios)
                summary.loc[i, ["speedup", "speedup_low", "speedup_high"]] = estimate, low, high
                summary.loc[i, "rounds_paired"] = len(ratios)
                summary.loc[i, "speedup_precision_pct"] = 100 * half_width(estimate, low, high)
                summary.loc[i, "speed_answer"] = None if variant == reference else classify(low, high)
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
                rates = paired(ok, "samples_per_s", peer).get(summary.at[i, "variant"], [])
                summary.loc[i, ["speedup_vs_peer", "speedup_vs_peer_low", "speedup_vs_peer_high"]] = interval(rates)
                if isinstance(source, str):
                    memory = paired(ok, source, peer).get(summary.at[i, "variant"], [])
                    summary.loc[i, ["memory_vs_peer", "memory_vs_peer_low", "memory_vs_peer_high"]] = interval(memory)
            blind = mine & summary.apply(torch_blind, axis=1)  # figures that leave DALI's batches out: not compared
            for column, ratio in schema.RATIOS.items():
                summary.loc[mine, ratio] = summary.loc[mine, column] / base[column].iloc[0]
                if column in TORCH_MEMORY:
                    summary.loc[blind, ratio] = None


def against_ceilings(summary, runs):
    """Each real training row's share of the ceiling of its precision (synthetic, amp-synthetic), paired by round."""
    against = {}  # (workload, ceiling): {variant: rate / the ceiling's rate, per round}
    for i, row in summary.iterrows():  # against the ceiling of its precision, paired by round like the speed-up
        ceiling = CEILINGS["mixed" if pd.notna(row.get("amp_dtype")) else "full"]
        if row["kind"] != "train" or row["dataset"] == "synthetic":
            continue
        if (row.workload, ceiling) not in against:
            ok = runs[(runs["workload"] == row.workload) & (runs["kind"] == "train") & (runs["status"] == "ok")]
            has = (ok["variant"] == ceiling).any()
            against[(row.workload, ceiling)] = paired(ok, "samples_per_s", ceiling) if has else None
        ratios = against[(row.workload, ceiling)]
        if ratios is None:
            continue
        estimate, low, high = interval(ratios.get(row.variant, []))
        summary.loc[i, "ceiling"] = ceiling
        summary.loc[i, ["ceiling_pct", "ceiling_low_pct", "ceiling_high_pct"]] = 100 * estimate, 100 * low, 100 * high


def busy_note(summary):
    """A sentence on the runs taken while something else competed, or None."""
    busy, total = int(summary["runs_busy"].sum()), int(summary["runs_ok"].sum())
    if not busy:
        return None
    return (
        f"The machine was busy during {busy} of {total} runs: read these numbers with care (busy_reason in runs.csv)."
    )


def diverged_note(summary):
    """A sentence on the runs whose loss diverged, or None: their speed must not be read without it."""
    diverged = summary[summary["runs_diverged"] > 0]
    if diverged.empty:
        return None
    names = ", ".join(sorted(set(diverged["variant"])))
    return (
        f"The loss diverged (NaN or inf) in {int(diverged['runs_diverged'].sum())} runs ({names}): their speed was"
        " measured on meaningless numbers and is not a fair comparison (diverged_step in runs.csv; try a lower --lr)."
    )


def settled_note(summary):
    """How many of the rows compared with a reference got a settled answer, and over how many rounds."""
    asked = summary[summary["speed_answer"].notna()] if "speed_answer" in summary else summary.iloc[:0]
    if "dataset" in asked:  # the ceilings are limits, not answers
        asked = asked[asked["dataset"] != "synthetic"]
    if asked.empty:
        return None
    settled = asked[asked["speed_answer"] != "unsettled"]
    rounds = asked["rounds_paired"]
    span = plural(rounds.max(), "paired round")
    span = span if rounds.min() == rounds.max() else f"{rounds.min():.0f} to {span}"
    return (
        f"Settled: {len(settled)} of {plural(len(asked), 'row')} (faster, slower or no difference beyond"
        f" +-{BAND:.0%}, by 95% intervals over {span})."
    )


def first(frame, column):
    """The column's first value in frame, None where there is none."""
    return frame[column].dropna().iloc[0] if column in frame and frame[column].notna().any() else None
