"""The verdicts: one line per variant, computed from its own summary row and its reference's by the rules
below, never written by hand. Every number in a verdict is a field of the summary (or the plain arithmetic
of one: compute per step is global_batch_size / compute_samples_per_s), so it matches the table.

A change is read against the repeats: the speed-up's range runs from the variant's slowest run over the
baseline's fastest to its fastest over the baseline's slowest (speedup_low, speedup_high), the memory's alike;
a range that holds 1.0 is "within noise". With one run of either there is no spread to read it against, and the
verdict says so.
"""

import pandas as pd

WAIT_BOUND = 0.2  # a run that waits for data this share of its window or more is limited by its input pipeline
WAIT_LITTLE = 0.05  # below this share, a faster input pipeline has little to win
WAIT_CHANGE = 0.05  # a change in the data wait smaller than this (absolute) is "stayed"
ACCURACY_GAP = 0.1  # validation accuracy this far from the baseline's, after the same steps, is worth a look


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


def within_noise(low, high):
    return pd.notna(low) and pd.notna(high) and low <= 1 <= high


def speed(row, what):
    """'1.51x faster (1.01x to 2.42x over the repeats)', '1.00x the speed, within noise (0.77x to 1.95x ...)'."""
    s, low, high = row.speedup, row.get("speedup_low"), row.get("speedup_high")
    if row.runs_ok < 2 or pd.isna(low) or low == high:
        word = "faster" if s >= 1 else "slower"
        return f"{s:.2f}x the {what} ({word}; one run each, no spread to judge the noise by)"
    if within_noise(low, high):
        return f"{s:.2f}x the {what}, within noise ({low:.2f}x to {high:.2f}x over the repeats)"
    word = "faster" if s > 1 else "slower"
    return f"{s:.2f}x {word} ({low:.2f}x to {high:.2f}x over the repeats)"


def memory(row):
    what = "GPU memory" if row.get("memory_source") == "nvml_peak_mib" else "memory"
    if row.get("memory_source") == "peak_host_mem_mib":
        what = "host memory"
    m, low, high = row.memory_vs_baseline, row.get("memory_vs_baseline_low"), row.get("memory_vs_baseline_high")
    if row.runs_ok >= 2 and within_noise(low, high) and low != high:
        return f"{what} unchanged ({m:.2f}x, within noise)"
    return f"{m:.2f}x the {what}"


def compute_ms(row):
    """Compute per step: the step's time had the device never waited for data."""
    rate = num(row, "compute_samples_per_s")
    return 1e3 * num(row, "global_batch_size") / rate if rate > 0 else float("nan")


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
    return row.speedup > 1 and not within_noise(row.get("speedup_low"), row.get("speedup_high"))


def noise_of(row):
    if row.runs_ok < 2:
        return " (one run)"
    return f" (repeats spread {row.spread_pct:.0f}%)"


def busy(row):
    if not row.get("runs_busy"):
        return ""
    return f" Taken on a busy machine in {row.runs_busy} of {row.runs_ok} runs: not to be trusted."
