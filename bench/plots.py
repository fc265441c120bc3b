"""The plots: throughput.png (median samples/s with the spread of the repeats) and memory.png, a panel per workload."""

import textwrap

import matplotlib
import pandas as pd

from bench import write_whole
from bench.tables import label

matplotlib.use("Agg")  # files only, no screen needed
import matplotlib.pyplot as plt  # noqa: E402


def panels(summary, headings, rows_of, height):
    """A figure with one panel per workload that has rows to draw; (figure, [(axes, rows, heading)])."""
    parts = [(rows_of(summary[summary["workload"] == w]), h) for w, h in headings.items()]
    parts = [(rows, h) for rows, h in parts if not rows.empty]
    sizes = [height(rows) for rows, _ in parts] or [1]
    fig, axes = plt.subplots(len(sizes), 1, figsize=(7.5, sum(sizes)), height_ratios=sizes, squeeze=False)
    return fig, [(ax, rows, h) for ax, (rows, h) in zip(axes[:, 0], parts)]


def trained(frame):
    return frame[(frame["kind"] == "train") & (frame["runs_ok"] > 0)]


def plot_throughput(summary, path, headings):
    fig, parts = panels(summary, headings, trained, lambda rows: 0.55 * len(rows) + 1.6)
    for ax, train, heading in parts:
        y = range(len(train))
        low, high = train["rate_median"] - train["rate_min"], train["rate_max"] - train["rate_median"]
        ax.barh(y, train["rate_median"], xerr=[low, high], capsize=4, color="tab:blue", alpha=0.8)
        for i, (_, row) in enumerate(train.iterrows()):
            label_text = f" {row.rate_median:,.1f}" + (
                f"  ({row.speedup:.2f}x)" if pd.notna(row.get("speedup")) else ""
            )
            ax.text(row.rate_max, i, label_text, va="center", fontsize=8)
        ax.set_yticks(list(y), [label(row) for _, row in train.iterrows()], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("samples/s (median of repeats; bars: min to max)")
        ax.set_xlim(0, train["rate_max"].max() * 1.35)
        ax.set_title(textwrap.fill(heading, 85), fontsize=9)
    save(fig, path)


def save(fig, path):
    fig.tight_layout()
    try:
        write_whole(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(fig)


def plot_memory(summary, path, headings):
    train = trained(summary)
    gpu = train["nvml_peak_mib"].notna().any() or train["peak_mem_allocated_mib"].notna().any()
    if gpu:
        series = [
            ("peak_mem_allocated_mib", "torch max_memory_allocated (max over processes)"),
            ("peak_mem_reserved_mib", "torch max_memory_reserved (max over processes)"),
            ("nvml_peak_mib", "NVML, whole process tree (its GPUs)"),
        ]
    else:
        series = [("peak_host_mem_mib", "host memory, whole process tree (PSS)")]
    fig, parts = panels(summary, headings, trained, lambda rows: 0.5 * len(rows) * len(series) / 2 + 1.8)
    for ax, rows, heading in parts:
        height = 0.8 / len(series)
        for k, (column, name) in enumerate(series):
            y = [i + k * height for i in range(len(rows))]
            ax.barh(y, rows[column].fillna(0), height=height, label=name)
        ticks = [i + height * (len(series) - 1) / 2 for i in range(len(rows))]
        ax.set_yticks(ticks, [label(row) for _, row in rows.iterrows()], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("peak memory, MiB (median of repeats)")
        ax.legend(fontsize=7, loc="lower right")
        ax.set_title(textwrap.fill(heading, 85), fontsize=9)
    save(fig, path)
