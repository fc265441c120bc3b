"""The plots: throughput.png (median samples/s with the spread of the repeats) and memory.png."""

import textwrap

import matplotlib
import pandas as pd

matplotlib.use("Agg")  # files only, no screen needed
import matplotlib.pyplot as plt  # noqa: E402


def plot_throughput(summary, path, title):
    train = summary[(summary["kind"] == "train") & (summary["runs_ok"] > 0)]
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(train) + 1.6))
    y = range(len(train))
    low, high = train["rate_median"] - train["rate_min"], train["rate_max"] - train["rate_median"]
    ax.barh(y, train["rate_median"], xerr=[low, high], capsize=4, color="tab:blue", alpha=0.8)
    for i, (_, row) in enumerate(train.iterrows()):
        label = f" {row.rate_median:,.1f}" + (f"  ({row.speedup:.2f}x)" if pd.notna(row.get("speedup")) else "")
        ax.text(row.rate_max, i, label, va="center", fontsize=9)
    ax.set_yticks(list(y), train["variant"])
    ax.invert_yaxis()
    ax.set_xlabel("samples/s (median of repeats; bars: min to max)")
    ax.set_xlim(0, train["rate_max"].max() * 1.35)
    ax.set_title(textwrap.fill(title, 85), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_memory(summary, path, title):
    train = summary[(summary["kind"] == "train") & (summary["runs_ok"] > 0)]
    gpu = train["nvml_peak_mib"].notna().any() or train["peak_mem_allocated_mib"].notna().any()
    if gpu:
        series = [
            ("peak_mem_allocated_mib", "torch max_memory_allocated (max over processes)"),
            ("peak_mem_reserved_mib", "torch max_memory_reserved (max over processes)"),
            ("nvml_peak_mib", "NVML, whole process tree (all GPUs)"),
        ]
    else:
        series = [("peak_host_mem_mib", "host memory, whole process tree (PSS)")]
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(train) * len(series) / 2 + 2))
    height = 0.8 / len(series)
    for k, (column, label) in enumerate(series):
        y = [i + k * height for i in range(len(train))]
        ax.barh(y, train[column].fillna(0), height=height, label=label)
    ax.set_yticks([i + height * (len(series) - 1) / 2 for i in range(len(train))], train["variant"])
    ax.invert_yaxis()
    ax.set_xlabel("peak memory, MiB (median of repeats)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(textwrap.fill(title, 85), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
