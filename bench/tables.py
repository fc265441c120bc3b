"""The tables: runs.csv (one row per run, appended), summary.csv and summary.md (one row per variant).

runs.csv is written a whole row at a time, under an exclusive lock, in one write and flushed to
disk: a bench killed at any moment leaves every finished row readable, and two benches writing
to the same folder do not interleave their rows. Its columns are fixed, so rows from any run
line up; a field that does not apply is left empty.
"""

import csv
import io
import os

import pandas as pd

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, rows are still written whole
    fcntl = None

RUN_COLUMNS = """bench_id time_utc run variant kind repeat status returncode error wall_s runner_cpu_s
script world_size device device_name model dataset image_size batch_size global_batch_size steps_timed
samples_per_s compute_samples_per_s step_time_ms_median step_time_ms_p90 data_wait_frac epoch_time_s
train_loss_final val_acc val_samples images_per_s
peak_mem_allocated_mb peak_mem_reserved_mb peak_mem_allocated_mb_sum nvml_peak_mb nvml_method peak_host_mem_mb
memory_samples sampler_cpu_s amp_dtype loader workers seed dp_devices sync_bn tf32_matmul tf32_cudnn
torch_version torchvision_version cuda_version cudnn_version dali_version
machine_class cpu_model cpu_cores ram_gb gpu_count gpu_name driver_version python_version platform
git_commit git_dirty command""".split()


class RunsFileError(Exception):
    """runs.csv exists with other columns than this version writes."""


def check_runs_file(path):
    """Fail before the bench starts if rows could not be appended to path."""
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != RUN_COLUMNS:
            raise RunsFileError(f"{path} has other columns (an older version?): move it away and run again")


def append_row(path, row):
    """Append one row to the CSV at path, with the header first if the file is new."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["" if row.get(c) is None else row.get(c) for c in RUN_COLUMNS])
    with open(path, "a", newline="") as f:
        if fcntl:
            fcntl.flock(f, fcntl.LOCK_EX)
        text = buffer.getvalue()
        if f.tell() == 0:
            header = io.StringIO()
            csv.writer(header).writerow(RUN_COLUMNS)
            text = header.getvalue() + text
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def read_runs(path):
    """All rows of runs.csv as a DataFrame (a torn last line, should one exist, is skipped)."""
    return pd.read_csv(path, on_bad_lines="skip")


RATIOS = dict(  # memory columns compared with the baseline, and the name of the ratio
    peak_mem_allocated_mb="allocated_vs_baseline",
    peak_mem_reserved_mb="reserved_vs_baseline",
    nvml_peak_mb="nvml_vs_baseline",
    peak_host_mem_mb="host_mem_vs_baseline",
)
MEDIANS = """compute_samples_per_s data_wait_frac step_time_ms_median peak_mem_allocated_mb peak_mem_allocated_mb_sum
peak_mem_reserved_mb nvml_peak_mb peak_host_mem_mb val_acc wall_s runner_cpu_s""".split()
FIRSTS = "world_size device device_name model dataset image_size global_batch_size steps_timed amp_dtype".split()


def summarize(runs):
    """Per variant, in plan order: median and spread of the rate, speed-up and memory against the baseline.

    Training runs are compared with the `baseline` variant, loader-only runs with `loader`.
    """
    rows = []
    for (kind, variant), group in runs.groupby(["kind", "variant"], sort=False):
        ok = group[group["status"] == "ok"]
        rate = ok["samples_per_s" if kind == "train" else "images_per_s"]
        row = dict(kind=kind, variant=variant, runs_ok=len(ok), runs_failed=len(group) - len(ok))
        row.update(rate_median=rate.median(), rate_min=rate.min(), rate_max=rate.max())
        row["spread_pct"] = 100 * (row["rate_max"] - row["rate_min"]) / row["rate_median"]
        row.update({column: ok[column].median() for column in MEDIANS})
        row.update({column: ok[column].dropna().iloc[0] if ok[column].notna().any() else None for column in FIRSTS})
        row["error"] = group.loc[group["status"] != "ok", "error"].iloc[-1] if len(ok) < len(group) else None
        rows.append(row)
    summary = pd.DataFrame(rows)
    for kind, reference in ("train", "baseline"), ("loader", "loader"):
        mine = summary["kind"] == kind
        base = summary[mine & (summary["variant"] == reference)]
        if not base.empty:
            summary.loc[mine, "speedup"] = summary.loc[mine, "rate_median"] / base["rate_median"].iloc[0]
            for column, ratio in RATIOS.items():
                summary.loc[mine, ratio] = summary.loc[mine, column] / base[column].iloc[0]
    return summary


def fmt(value, pattern="{:,.0f}"):
    return "" if value is None or pd.isna(value) else pattern.format(value)


def table(frame, columns):
    """Markdown lines for frame's rows; columns: (header, function of a row giving the cell)."""
    lines = ["| " + " | ".join(header for header, _ in columns) + " |", "|" + "---|" * len(columns)]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(cell(row) for _, cell in columns) + " |")
    return lines


def runs_cell(row):
    return f"{row.runs_ok}" + (f" ({row.runs_failed} failed)" if row.runs_failed else "")


def markdown(summary, title):
    """The summary as markdown: a table for training runs, one for the input pipeline alone."""
    lines = [f"### {title}", ""]
    train, loaders = summary[summary["kind"] == "train"], summary[summary["kind"] == "loader"]
    if not train.empty:
        columns = [
            ("variant", lambda r: r.variant),
            ("samples/s (median)", lambda r: fmt(r.rate_median, "{:,.1f}")),
            ("spread", lambda r: fmt(r.spread_pct, "{:.1f}%")),
            ("speed-up", lambda r: fmt(r.get("speedup"), "{:.2f}x")),
            ("data wait", lambda r: fmt(r.data_wait_frac, "{:.1%}")),
            ("step ms", lambda r: fmt(r.step_time_ms_median, "{:.1f}")),
        ]
        if train["nvml_peak_mb"].notna().any() or train["peak_mem_allocated_mb"].notna().any():
            columns += [
                ("torch allocated MiB", lambda r: fmt(r.peak_mem_allocated_mb)),
                ("torch reserved MiB", lambda r: fmt(r.peak_mem_reserved_mb)),
                ("NVML MiB (process tree)", lambda r: fmt(r.nvml_peak_mb)),
                ("NVML vs baseline", lambda r: fmt(r.get("nvml_vs_baseline"), "{:.2f}x")),
            ]
        else:
            columns += [
                ("host memory MiB (PSS)", lambda r: fmt(r.peak_host_mem_mb)),
                ("vs baseline", lambda r: fmt(r.get("host_mem_vs_baseline"), "{:.2f}x")),
            ]
        columns += [("val acc", lambda r: fmt(r.val_acc, "{:.3f}")), ("runs", runs_cell)]
        lines += table(train, columns)
    if not loaders.empty:
        lines += ["", "Input pipeline alone (`loader.py --bench`, `loader_dali.py --bench`):", ""]
        columns = [
            ("loader", lambda r: r.variant),
            ("images/s (median)", lambda r: fmt(r.rate_median)),
            ("spread", lambda r: fmt(r.spread_pct, "{:.1f}%")),
            ("vs loader.py", lambda r: fmt(r.get("speedup"), "{:.2f}x")),
            ("runs", runs_cell),
        ]
        lines += table(loaders, columns)
    return "\n".join(lines) + "\n"
