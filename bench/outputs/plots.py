"""The plots: throughput.png (median samples/s with the spread of the repeats), memory.png, tradeoff.png (speed-up
against memory) and time.png (where a step's time goes), a panel per workload; and the learning curves.

The learning curves: does a technique still learn? Every training run records its training loss (a mean per
10 steps) and its validation accuracy at each evaluation (loss_curve and val_curve in its metrics, in
logs/<bench>/<run>.json). The bench gathers those of a bench into curves.json beside runs.csv (a saved baseline
keeps it; the logs stay behind) and draws curves.png: training loss against step and validation accuracy against
epoch, a line per variant (its first round), a row of two panels per workload (a mode may draw its own with it).

A mode's own plot is drawn here too, from its declaration (figure: bench/outputs/declared.py).
"""

import functools
import textwrap
from pathlib import Path

import pandas as pd

from bench import kept_for_bench, run_metrics, write_whole
from bench.outputs import declared
from bench.outputs.markdown import label
from bench.schema import rows_of


@functools.cache
def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no screen needed), imported when the first plot is drawn: a
    bench's start, its --help and a bad flag's one line do without its half a second."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def panels(summary, headings, rows_of, height, width=7.5):
    """A figure with one panel per workload that has rows to draw; (figure, [(axes, rows, heading)])."""
    parts = [(rows_of(summary[summary["workload"] == w]), h) for w, h in headings.items()]
    parts = [(rows, h) for rows, h in parts if not rows.empty]
    sizes = [height(rows) for rows, _ in parts] or [1]
    fig, axes = pyplot().subplots(len(sizes), 1, figsize=(width, sum(sizes)), height_ratios=sizes, squeeze=False)
    return fig, [(ax, rows, h) for ax, (rows, h) in zip(axes[:, 0], parts)]


def trained(frame):
    return frame[(frame["kind"] == "train") & (frame["runs_ok"] > 0)]


def plot_throughput(summary, path, headings):
    fig, parts = panels(summary, headings, trained, lambda rows: 0.55 * len(rows) + 1.6)
    for ax, train, heading in parts:
        y = range(len(train))
        low, high = train["rate_median"] - train["rate_min"], train["rate_max"] - train["rate_median"]
        ax.barh(y, train["rate_median"], xerr=[low, high], capsize=4, color="tab:blue", alpha=0.8)
        for i, row in enumerate(rows_of(train)):
            label_text = f" {row.rate_median:,.1f}" + (f"  ({row.speedup:.2f}x)" if pd.notna(row.speedup) else "")
            ax.text(row.rate_max, i, label_text, va="center", fontsize=8)
        ax.set_yticks(list(y), [label(row) for row in rows_of(train)], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("samples/s (median of repeats; bars: min to max)")
        ax.set_xlim(0, train["rate_max"].max() * 1.35)
        ax.set_title(textwrap.fill(heading, 85), fontsize=9)
    save(fig, path)


def save(fig, path, dpi=120):
    fig.tight_layout()
    try:
        write_whole(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight"))
    finally:
        pyplot().close(fig)


def plot_memory(summary, path, headings, joined=()):
    """Peak memory per training row; a joined mode's mark (joined: the modes' Joins) written beside a row's bars, and
    its note on the axis where some row has one."""
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
    fig, parts = panels(summary, headings, trained, lambda rows: 0.5 * len(rows) * len(series) / 2 + 1.8, width=10.5)
    for ax, rows, heading in parts:
        height = 0.8 / len(series)
        for k, (column, name) in enumerate(series):
            y = [i + k * height for i in range(len(rows))]
            ax.barh(y, rows[column].fillna(0), height=height, label=name)
        ticks = [i + height * (len(series) - 1) / 2 for i in range(len(rows))]
        ax.set_yticks(ticks, [label(row) for row in rows_of(rows)], fontsize=8)
        ax.invert_yaxis()
        marks = [[joins.mark(row) for joins in joined] for row in rows_of(rows)]
        widest = rows[[c for c, _ in series]].max(axis=1).fillna(0)
        for tick, marked, end in zip(ticks, marks, widest):
            if any(marked):
                ax.text(end, tick, " " + "; ".join(filter(None, marked)), va="center", fontsize=7)
        if any(map(any, marks)):
            ax.set_xlim(0, widest.max() * 1.45)
        notes = [joins.marked for k, joins in enumerate(joined) if any(marked[k] for marked in marks)]
        ax.set_xlabel("; ".join(["peak memory, MiB (median of repeats)", *notes]))
        # beside the bars, not on them: the last row's bars reach the right edge (the H200's checkpoint row was hidden)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
        ax.set_title(textwrap.fill(heading, 85), fontsize=9)
    save(fig, path)


def plot_tradeoff(summary, path, headings):
    """Speed-up against memory, one point per variant with its 95% intervals over the paired rounds (a row of one
    round: a hollow point, no bars): up and left is better."""
    fig, parts = panels(summary, headings, compared, lambda rows: 4.8, width=10.5)
    if not parts:
        fig.axes[0].set_axis_off()
        fig.axes[0].text(0.5, 0.5, "no row has both a speed-up and a memory ratio to place", ha="center", va="center")
    for ax, rows, heading in parts:
        ax.axhline(1, color="grey", lw=0.8, ls=":")
        ax.axvline(1, color="grey", lw=0.8, ls=":")
        for row, color, marker in zip(rows_of(rows), colors(), MARKERS):
            x, y = row.memory_vs_baseline, row.speedup
            xerr = [[x - row.memory_vs_baseline_low], [row.memory_vs_baseline_high - x]]
            yerr = [[y - row.speedup_low], [row.speedup_high - y]]
            once = pd.isna(row.speedup_low) or pd.isna(row.memory_vs_baseline_low)  # one round: a point, no bars
            name = f"{label(row)}: {y:.2f}x speed, {x:.2f}x memory" + (" (one round: no interval)" if once else "")
            bars = dict(xerr=None, yerr=None) if once else dict(xerr=xerr, yerr=yerr)
            ax.errorbar(x, y, **bars, fmt=marker, mfc="none" if once else color, color=color, ms=7, capsize=3, lw=1,
                        label=name)  # fmt: skip
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
        memory = {"nvml_peak_mib": "GPU memory (NVML)", "peak_mem_reserved_mib": "GPU memory (torch reserved)"}
        what = memory.get(rows["memory_source"].iloc[0], "host memory (PSS)")
        ax.set_xlabel(f"peak {what} vs baseline, x (left: less memory)")
        ax.set_ylabel("speed-up vs baseline, x (up: faster)")
        bars = "bars: 95% intervals over the paired rounds"
        if rows["speedup_low"].isna().any() or rows["memory_vs_baseline_low"].isna().any():
            bars += "; hollow: one round, no interval"
        ax.set_title(textwrap.fill(f"{heading}; {bars}", 85), fontsize=9)
        ax.grid(alpha=0.25)
    save(fig, path)


@functools.cache
def colors():
    """tab10's colours, 40 in turn (a plot's rows or lines, one each)."""
    return [pyplot().get_cmap("tab10")(i % 10) for i in range(40)]


MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<"] * 4


def compared(frame):
    """Training rows with a speed-up and a memory ratio to place."""
    rows = trained(frame)
    rows = rows[rows["dataset"] != "synthetic"]
    if "memory_vs_baseline" not in rows:
        return rows.iloc[:0]
    return rows.dropna(subset=["speedup", "memory_vs_baseline"])


def plot_time(summary, path, headings):
    """Where the time of a step goes, per variant: waiting for data and computing (and on a GPU, the share of the
    window it starved for data), in ms per step at the measured rate."""
    fig, parts = panels(summary, headings, trained, lambda rows: 0.45 * len(rows) + 1.8)
    for ax, rows, heading in parts:
        step_ms = rows["step_ms"]  # the one step time of the table and the verdicts
        wait_ms = step_ms * rows["data_wait_frac"].fillna(0)
        y = list(range(len(rows)))
        ax.barh(y, wait_ms, color="tab:orange", label="host waiting for data (data_wait_frac)")
        ax.barh(y, step_ms - wait_ms, left=wait_ms, color="tab:blue", label="computing (the rest of the step)")
        if rows["device"].eq("cuda").any():
            starved = step_ms * rows["starved_frac"].fillna(0)
            ax.barh([i + 0.3 for i in y], starved, height=0.2, color="tab:red", label="GPU starved for data")
        for i, (ms, wait) in enumerate(zip(step_ms, rows["data_wait_frac"].fillna(0))):
            ax.text(ms, i, f" {ms:.1f} ms, {wait:.0%} waiting", va="center", fontsize=7.5)
        ax.set_yticks(y, [label(row) for row in rows_of(rows)], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, step_ms.max() * 1.4)
        ax.set_xlabel("ms per step at the measured rate (global batch / samples per s)")
        ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncol=3, frameon=False)
        ax.set_title(textwrap.fill(heading, 85), fontsize=9, pad=22)
    save(fig, path)


# ----------------------------------------------------------------------------- the learning curves

FILE = "curves.json"


def gather_curves(out, bench_id, runs):
    """{run: dict(variant, workload, repeat, loss, val)} of the bench's ok training runs, read from their metrics and
    written to out/curves.json; without logs (a saved baseline), what out/curves.json holds for the bench; None if
    there is none (stale files of another bench are removed)."""
    found = {}
    for row, metrics in run_metrics(out, bench_id, runs):
        if metrics.get("loss_curve"):
            val = metrics.get("val_curve") or []
            found[row.run] = dict(
                variant=row.variant, workload=row.workload, repeat=int(row.repeat), loss=metrics["loss_curve"], val=val
            )
    kept = kept_for_bench(Path(out) / FILE, bench_id, "runs", found)
    if kept is None:
        (Path(out) / FILE).with_suffix(".png").unlink(missing_ok=True)
    return kept


def first_rounds(curves, workload):
    """Each variant's run of its first round in the workload, in the order the runs came."""
    chosen = {}
    for run in sorted(curves.values(), key=lambda r: r["repeat"]):
        if run["workload"] == workload:
            chosen.setdefault(run["variant"], run)
    return chosen


def plot_curves(curves, path, headings):
    """curves.png: per workload, the training loss against step and the validation accuracy against epoch."""
    workloads = [w for w in headings if first_rounds(curves, w)]
    if not workloads:
        return
    fig, axes = pyplot().subplots(len(workloads), 2, figsize=(11, 3.6 * len(workloads)), squeeze=False)
    for (loss_ax, acc_ax), workload in zip(axes, workloads):
        for variant, run in first_rounds(curves, workload).items():
            steps, losses = zip(*run["loss"]) if run["loss"] else ((), ())
            (line,) = loss_ax.plot(steps, losses, label=variant, linewidth=1.2)
            epochs = [point["epoch"] for point in run["val"]]
            accuracy = [point["val_acc"] for point in run["val"]]
            acc_ax.plot(epochs, accuracy, marker="o", color=line.get_color(), label=variant, linewidth=1.2)
        loss_ax.set(xlabel="step", ylabel="training loss (mean of 10 steps)", title=f"{workload}: training loss")
        acc_ax.set(xlabel="epoch", ylabel="validation accuracy", title=f"{workload}: validation accuracy")
        acc_ax.set_ylim(0, 1)
        last = max(
            (point["epoch"] for run in first_rounds(curves, workload).values() for point in run["val"]), default=1
        )
        acc_ax.set_xticks(range(1, last + 1, max(1, last // 10)))
        acc_ax.set_xlim(0.5, last + 0.5)
        for ax in loss_ax, acc_ax:
            ax.grid(alpha=0.3)
        loss_ax.legend(fontsize=7, ncol=2)
    fig.suptitle(next(iter(headings.values())) if len(headings) == 1 else "learning curves", fontsize=9)
    fig.tight_layout()
    write_whole(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    pyplot().close(fig)


# a mode's plot, as its module declares it (bench/outputs/declared.py)


def figure(drawn, path):
    """A mode's Figure: its panels side by side (Bars, Lines), its title, written to path as a PNG."""
    fig, axes = pyplot().subplots(1, len(drawn.panels), figsize=drawn.size, squeeze=False)
    for ax, panel in zip(axes[0], drawn.panels):
        (bars if isinstance(panel, declared.Bars) else lines)(ax, panel)
    title = textwrap.fill(drawn.title, drawn.wrap) if drawn.wrap else drawn.title
    if drawn.title_above:
        fig.suptitle(title, fontsize=drawn.title_size)
    else:
        axes[0][0].set_title(title, fontsize=drawn.title_size)
    if drawn.trimmed:
        save(fig, path, dpi=drawn.dpi)
        return
    fig.tight_layout()
    write_whole(path, lambda tmp: fig.savefig(tmp, dpi=drawn.dpi, format="png"))
    pyplot().close(fig)


def bars(ax, panel):
    """A Bars panel: a bar a value, its label a tick, its words beside it."""
    ax.barh(range(len(panel.values)), panel.values, color=panel.colour, alpha=0.8)
    for i, (value, text) in enumerate(zip(panel.values, panel.texts or ())):
        ax.text(value, i, text, va="center", fontsize=panel.fontsize)
    ax.set_yticks(range(len(panel.values)), panel.labels, fontsize=panel.fontsize)
    ax.set_xlabel(panel.xlabel)
    if panel.title:
        ax.set_title(panel.title)
    if panel.top_first:
        ax.invert_yaxis()
    if panel.margin is not None:
        ax.margins(x=panel.margin)


def lines(ax, panel):
    """A Lines panel: its band (shaded, its middle in black), then its lines: with error bars where they have a
    range, dashed and faint where they are an ideal; a colour each from colors() where none is given (a line without
    points is not drawn)."""
    if panel.band is not None and len(panel.band.x):
        band = panel.band
        ax.fill_between(band.x, band.low, band.high, color="grey", alpha=0.25, label=band.label)
        ax.plot(band.x, band.middle, color="black", lw=1.2, label=band.middle_label)
    free = iter(colors())
    for line in panel.lines:
        colour = line.colour or next(free)  # a line with no points keeps its colour: the others' stay as they were
        if not len(line.x):
            continue
        if line.low is not None:
            ax.errorbar(line.x, line.y, yerr=[line.low, line.high], marker="o", color=colour, capsize=3,
                        label=line.label)  # fmt: skip
        elif line.dashed:
            ax.plot(line.x, line.y, linestyle="--", color=colour, alpha=0.5, label=line.label)
        else:
            ax.plot(line.x, line.y, color=colour, lw=1.1, label=line.label)
    ax.set(xlabel=panel.xlabel, ylabel=panel.ylabel)
    if panel.xticks is not None:
        ax.set_xticks(panel.xticks)
    if panel.from_zero:
        ax.set_ylim(bottom=0)
    if ax.get_legend_handles_labels()[0]:  # a legend where something is drawn: inside the panel or beside it
        beside = dict(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
        ax.legend(**(beside if panel.legend_beside else dict(fontsize=8)))
    if panel.grid:
        ax.grid(alpha=0.3)
