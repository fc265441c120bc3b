"""The verdicts: one line per variant, computed from its own summary row and its reference's by the rules
below, never written by hand. Every number in a verdict is a field of the summary (or the plain arithmetic
of one: a step is global_batch_size / samples_per_s), so it matches the table.

A change is read from paired rounds (bench/stats.py): the ratio of the variant's rate to its reference's in
each round, their geometric mean and its 95% confidence interval. The answer is settled when the interval
lies wholly inside 1 +- stats.BAND (no measurable difference), else wholly above 1 (faster) or below
(slower); otherwise the verdict says it is not settled and after how many rounds. Memory alike. One step
time everywhere: ms per step at the row's measured rate (global batch / samples_per_s), the same figure as
the table's and time.png's; compute per step is that step less its data wait.
"""

import pandas as pd

from bench.stats import BAND

WAIT_BOUND = 0.2  # a run that waits for data this share of its window or more is limited by its input pipeline
WAIT_LITTLE = 0.05  # below this share, a faster input pipeline has little to win
WAIT_CHANGE = 0.05  # a change in the data wait smaller than this (absolute) is "stayed"
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
        reached = f"; it reaches {row.ceiling_pct:.0f}% of the ceiling" if pd.notna(row.get("ceiling_pct")) else ""
        parts = [f"compute {compute_ms(row):.1f} ms a step"] if pd.notna(compute_ms(row)) else []
        parts += (
            [f"waiting for data {row.data_wait_frac:.0%} of the time"] if pd.notna(row.get("data_wait_frac")) else []
        )
        said = f": {', '.join(parts)}" if parts else ""
        return f"{name}: the reference, {row.rate_median:,.1f} samples/s{noise_of(row)}{said}{reached}.{busy(row)}"
    head = f"{name}: {speed(row, 'speed')}"
    if pd.notna(row.get("memory_vs_baseline")):
        head += f", {memory(row)}"
    said = reasons(row, base)
    return f"{head}{': ' + '; '.join(said) if said else ''}.{busy(row)}"


def interval(low, high, rounds):
    return f"95% interval {low:.2f}x to {high:.2f}x over {rounds:.0f} paired rounds"


def speed(row, what):
    """'1.51x faster (95% interval 1.21x to 1.88x over 3 paired rounds)', 'not settled after 3 rounds ...'."""
    s, low, high, rounds = row.speedup, num(row, "speedup_low"), num(row, "speedup_high"), num(row, "rounds_paired")
    answer = row.get("speed_answer")
    if pd.isna(low):
        return f"{s:.2f}x the {what}, not settled: one paired round, no interval to judge the noise by"
    if answer in ("faster", "slower"):
        return f"{s:.2f}x {answer} ({interval(low, high, rounds)})"
    if answer == "same":
        return f"no measurable difference in {what} ({s:.2f}x; {interval(low, high, rounds)}, inside 1 +- {BAND:.0%})"
    return (
        f"{s:.2f}x the {what}, not settled after {rounds:.0f} rounds ({interval(low, high, rounds)}: the noise,"
        f" +-{row.speedup_precision_pct:.0f}%, is wider than the effect)"
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


def compute_ms(row):
    """Compute per step: the step at the measured rate less its share waiting for data."""
    wait = num(row, "data_wait_frac")
    return step_ms(row) * (1 - (0 if pd.isna(wait) else wait))


def reasons(row, base):
    """Why, from the fields: the data wait and the compute per step, then what else the row shows."""
    said = []
    wait, base_wait = num(row, "data_wait_frac"), num(base, "data_wait_frac")
    fresh_loader = pd.notna(row.get("loader")) and row.get("loader") != base.get("loader")
    if fresh_loader and pd.notna(base_wait) and base_wait < WAIT_LITTLE and not clearly_faster(row):
        said.append(f"the baseline waited for data {base_wait:.0%} of the time, so a faster loader had little to win")
    if base_wait >= WAIT_BOUND and wait >= WAIT_BOUND and not clearly_faster(row):
        said.append(
            f"the data wait stayed high ({base_wait:.0%} to {wait:.0%}): the input pipeline, not compute, sets the pace"
        )
    if row.get("amp_dtype") == "bf16" and str(row.get("bf16_native")).lower() == "false" and row.speedup < 1:
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
    if fresh_loader and row.get("device") == "cpu":
        said.append(f"on a CPU its {row.loader} loader shares the cores with the model")
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
    if pd.notna(num(row, "val_acc")) and pd.notna(num(base, "val_acc")):
        if abs(row.val_acc - base.val_acc) >= ACCURACY_GAP:
            said.append(
                f"its validation accuracy, {row.val_acc:.3f} against the baseline's {base.val_acc:.3f} after the"
                " same steps, says to check that it learns alike"
            )
    return said


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
