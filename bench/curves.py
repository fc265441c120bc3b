"""The learning curves: does a technique still learn? Every training run records its training loss (a mean per
10 steps) and its validation accuracy at each evaluation (loss_curve and val_curve in its metrics, in
logs/<bench>/<run>.json). The bench gathers those of a bench into curves.json beside runs.csv (a saved baseline
keeps it; the logs stay behind) and draws curves.png: training loss against step and validation accuracy against
epoch, a line per variant (its first round), a row of two panels per workload."""

import json
from pathlib import Path

import matplotlib

from bench import write_whole

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FILE = "curves.json"


def gather(out, bench_id, runs):
    """{run: dict(variant, workload, repeat, loss, val)} of the bench's ok training runs, read from their metrics and
    written to out/curves.json; without logs (a saved baseline), what out/curves.json holds for the bench; None if
    there is none (stale files of another bench are removed)."""
    found, logs = {}, Path(out) / "logs" / str(bench_id)
    train = runs[(runs["kind"] == "train") & (runs["status"] == "ok")]
    for row in train.itertuples():
        try:
            metrics = json.loads((logs / f"{row.run}.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(metrics, dict) and metrics.get("loss_curve"):
            val = metrics.get("val_curve") or []
            found[row.run] = dict(
                variant=row.variant, workload=row.workload, repeat=int(row.repeat), loss=metrics["loss_curve"], val=val
            )
    path = Path(out) / FILE
    if found:
        text = json.dumps(dict(bench_id=str(bench_id), runs=found)) + "\n"
        write_whole(path, lambda tmp: Path(tmp).write_text(text))
        return found
    try:
        saved = json.loads(path.read_text())
        if saved["bench_id"] == str(bench_id):
            return saved["runs"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for stale in path, path.with_suffix(".png"):
        stale.unlink(missing_ok=True)
    return None


def first_rounds(curves, workload):
    """Each variant's run of its first round in the workload, in the order the runs came."""
    chosen = {}
    for run in sorted(curves.values(), key=lambda r: r["repeat"]):
        if run["workload"] == workload:
            chosen.setdefault(run["variant"], run)
    return chosen


def plot(curves, path, headings):
    """curves.png: per workload, the training loss against step and the validation accuracy against epoch."""
    workloads = [w for w in headings if first_rounds(curves, w)]
    if not workloads:
        return
    fig, axes = plt.subplots(len(workloads), 2, figsize=(11, 3.6 * len(workloads)), squeeze=False)
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
    plt.close(fig)
