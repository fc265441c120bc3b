"""python -m bench --to-accuracy ACC: does a technique still learn, and sooner? Time to a target accuracy, the way
MLPerf Training and DAWNBench report training: every training variant, with the same seed and schedule (planned for
--max-epochs), trains until its validation accuracy (every image, at each epoch's end) reaches ACC, or the epochs
run out. The scripts stop themselves (--target-accuracy); the times come from each run's val_curve.

The data is the generated hard workload (data/hard, bench/data.py: classes that overlap, so accuracy climbs over
epochs) unless --data names a folder. Writes to_accuracy.csv, to_accuracy.md and to_accuracy_curves.png to --out;
each run's log and metrics are under logs/<bench>/to-accuracy/. --budget bounds the mode: variants not reached say so.
"""

import json
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from bench import BenchError, data, logs_of, write_whole
from bench.config import read
from bench.modes import Registration, new_id, planned_for
from bench.observe import machine
from bench.outputs import plots, render
from bench.outputs.declared import Bullets, Rows, Shows
from bench.outputs.verdicts import fmt, present
from bench.stages import cost
from bench.stages.planning import build, planned, prepare
from bench.stages.running import execute

DEFAULTS = dict(  # the CPU: a tiny CNN (seconds an epoch on 2 cores, 10 min for the mode); the GPU: resnet18
    cpu=dict(model="examples/smallnet.py:tiny", batch_size=64, max_epochs=5, warmup_steps=5),
    gpu=dict(model="resnet18", batch_size=256, max_epochs=30, warmup_steps=20),
)
COLUMNS = [
    "variant",
    "reached",
    "epochs",
    "train_s",
    "wall_s",
    "speedup",
    "final_val_acc",
    "best_val_acc",
    "samples_per_s",
    "target",
    "max_epochs",
    "error",
]


def add_flags(p):
    p.add_argument(
        "--to-accuracy",
        type=float,
        metavar="ACC",
        help="time to a validation accuracy (0 to 1): every training variant on the hard data until it gets there",
    )
    p.add_argument("--max-epochs", type=int, help="with --to-accuracy: the epochs before a variant gives up (CPU 5)")


def check_flags(flags, config):
    if flags.to_accuracy is not None and not 0 < flags.to_accuracy <= 1:
        raise BenchError(
            f"--to-accuracy {flags.to_accuracy:g}: a share of the validation images, above 0 and at most 1"
        )
    if flags.max_epochs is not None and flags.max_epochs < 1:
        raise BenchError(f"--max-epochs {flags.max_epochs}: 1 or more")


@dataclass(frozen=True)
class Flags:
    """--to-accuracy's own flags: the accuracy to reach, and the epochs before a variant gives up (None: the
    machine's default)."""

    to_accuracy: float
    max_epochs: int | None = None


def runs_of(config, info, gpu_count, logs, generate=True):
    """One run per training variant (the ceilings left out), at the mode's model, batch and epochs."""
    kind = "gpu" if gpu_count else "cpu"
    chosen = dict(DEFAULTS[kind])
    given = {k: getattr(config.work, k) for k in ("model", "batch_size", "warmup_steps")}
    chosen.update({k: v for k, v in given.items() if v is not None})  # 0 is given
    epochs = config.own.max_epochs or chosen["max_epochs"]
    path = Path(config.work.data) if config.work.data else Path(data.ROOT) / "data" / "hard"
    if generate and not config.work.data:
        data.ensure("hard", config.work.seed, data.HARD)
    described = prepare.describe(path, "custom" if config.work.data else "hard")
    work = planned.Work(
        chosen["model"], chosen["batch_size"], None, chosen["warmup_steps"], "all", seed=config.work.seed
    )
    nproc = config.launch.nproc or gpu_count or 2
    variants = [v for v in build.ordered(build.asked_variants(config, gpu_count), gpu_count) if "synthetic" not in v]
    if not variants:
        raise BenchError("--to-accuracy trains training variants: --variants names none (the ceilings are left out)")
    runs = []
    for variant in variants:
        run = build.training_run(variant, 1, path=path, info=described, chosen=work, gpu_count=gpu_count, nproc=nproc,
                                 workers=config.work.workers, cores=info["cpu_cores"], workload="hard",
                                 cache=logs)  # fmt: skip
        runs.append(run.with_flags(flags={"--epochs": epochs, "--target-accuracy": config.own.to_accuracy}))
    return runs, epochs


def time_to_target(metrics, target):
    """(reached, epochs, train_s, wall_s, final accuracy, best accuracy) from a run's val_curve."""
    points = metrics.get("val_curve") or []
    best = max((p["val_acc"] for p in points), default=None)
    final = points[-1]["val_acc"] if points else None
    for point in points:
        if point["val_acc"] >= target:
            return True, point["epoch"], point["train_s"], point["wall_s"], final, best
    return False, len(points), None, None, final, best


class ToAccuracy(execute.Mode):
    """The mode as the executor runs it: a run a variant; its record, the time to the target from its val_curve.
    Its state: the target accuracy and the epochs to reach it in, besides the timeout."""

    name, what, subfolder = "to_accuracy", "variants", "to-accuracy"

    @dataclass(frozen=True)
    class State(execute.State):
        target: float = 0.0
        epochs: int = 0

    def do(self, run, job):
        row = job.launch(run)
        if row is None:
            return None
        target, epochs = self.state.target, self.state.epochs
        result = dict(variant=run.variant, target=target, max_epochs=epochs, error=row.get("error"))
        result.update(status=row["status"], run_s=row["wall_s"], wall_s=None)
        if row["status"] == "ok":
            metrics = json.loads((self.folder() / f"{run.name}.json").read_text())
            reached, done, train_s, wall_s, final, best = time_to_target(metrics, target)
            result.update(reached=reached, epochs=done, train_s=train_s, wall_s=wall_s, final_val_acc=final)
            result.update(best_val_acc=best, samples_per_s=metrics.get("samples_per_s"))
            learned = dict(loss=metrics.get("loss_curve") or [], val=metrics.get("val_curve") or [])
            result["curves"] = dict(variant=run.variant, workload="hard", repeat=1, **learned)
        return result

    def say(self, run, record):
        return line(record)

    def finish(self, records, unrun, how):
        rows = [{k: v for k, v in r.items() if k != "curves"} for r in records]
        rows += [dict(variant=run.variant, error=f"not run: {why}") for run, why in unrun]
        found = {r["run"]: r["curves"] for r in records if r.get("curves")}
        table = pd.DataFrame(rows).reindex(columns=COLUMNS)
        base = table[(table["variant"] == "baseline") & (table["reached"] == True)]  # noqa: E712 (NaN where not run)
        if not base.empty:
            table["speedup"] = base["train_s"].iloc[0] / table["train_s"]
        spent = sum(r.get("run_s") or 0 for r in records)
        write(self.config.outputs.out, table, self.info, spent, self.state.target, found)
        print(f"to accuracy: {spent / 60:.1f} min in runs; {self.config.outputs.out}/to_accuracy.md, to_accuracy.csv,"
              " to_accuracy_curves.png")  # fmt: skip
        return 0


def main(config, info, bench_id):
    """Plan a run per training variant and run them through the executor."""
    logs = logs_of(config.outputs.out, bench_id)
    runs, epochs = runs_of(config, info, info["gpu_count"], logs)
    gpu = bool(info["gpu_count"])
    budget_s = cost.budget_s(config.limits.budget, gpu)
    budget = f" (budget {budget_s / 60:g} min)" if budget_s else ""
    most = estimate_s(runs, epochs, gpu, info["cpu_bf16_native"])
    print(f"to accuracy {config.own.to_accuracy:g}: {len(runs)} variants, at most {epochs} epochs each, at most about"
          f" {most / 60:.0f} min{budget}", flush=True)  # fmt: skip
    for run in runs:
        run.estimate_s = estimate_s([run], epochs, gpu, info["cpu_bf16_native"])
    path = Path(config.work.data) if config.work.data else Path(data.ROOT) / "data" / "hard"
    works = dict(hard=planned.Work(data=str(path), generated=not config.work.data, seed=config.work.seed))
    timeout = cost.timeout_s(config.limits.timeout, gpu, "to_accuracy")
    state = ToAccuracy.State(target=config.own.to_accuracy, epochs=epochs, timeout=timeout)
    mode = ToAccuracy(config, info, bench_id, runs, works, state)
    execute.start(mode)
    execute.execute(mode, budget_s, config.limits.chunk)


def write(out, table, info, spent, target, found):
    out = Path(out)
    write_whole(out / "to_accuracy.csv", lambda tmp: table.to_csv(tmp, index=False))
    where = machine.where(info)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    title = f"Time to {target:g} validation accuracy: {where} ({when}, {spent / 60:.1f} min)"
    render.write(SHOWS, out, table, title)
    if found:  # its plot: the learning curves, as a bench draws them (curves.png)
        plots.plot_curves(found, out / SHOWS.plot, {"hard": title})


# ----------------------------------------------------------------------------- what it shows: its words and its page
# (to_accuracy.md), rendered by bench/outputs/; its plot is the bench's learning curves (to_accuracy_curves.png)


def line(row):
    if str(row.get("error")).startswith("not run"):
        return f"{row['variant']}: {row['error']}"
    if not present(row.get("reached")):
        return f"{row['variant']}: failed: {row.get('error')}"
    if row["reached"]:
        text = f"{row['variant']}: reached {row['target']:g} in {row['epochs']} epochs, {row['train_s']:.1f} s training"
        text += f" ({row['wall_s']:.1f} s with evaluation and start-up)"
        if present(row.get("speedup")) and row["variant"] != "baseline":
            text += f", {row['speedup']:.2f}x the baseline's speed to it"
        return text
    best = f"{row['best_val_acc']:.3f}" if present(row.get("best_val_acc")) else "none"
    return f"{row['variant']}: did NOT reach {row['target']:g} in {row['max_epochs']} epochs (best {best})"


TABLE = (
    ("variant", lambda r: r["variant"]),
    ("reached", lambda r: {True: "yes", False: "**no**"}.get(r["reached"], "failed")),
    ("epochs", lambda r: fmt(r["epochs"], "{:.0f}")),
    ("training s", lambda r: fmt(r["train_s"], "{:.1f}")),
    ("wall s", lambda r: fmt(r["wall_s"], "{:.1f}")),
    ("speed-up", lambda r: fmt(r["speedup"], "{:.2f}x")),
    ("final acc", lambda r: fmt(r["final_val_acc"], "{:.3f}")),
    ("best acc", lambda r: fmt(r["best_val_acc"], "{:.3f}")),
)


def blocks(table):
    """to_accuracy.md: each variant's time to the target accuracy."""
    rows = table.to_dict("records")
    return [Rows(rows, TABLE), Bullets([line(r) for r in rows])]


SHOWS = Shows(
    "to_accuracy.md", "to_accuracy_curves.png", "training loss and validation accuracy of each variant", blocks
)


def run(config):
    """Time to a validation accuracy for each training variant."""
    info = planned_for(config)
    bench_id = new_id()
    logs = logs_of(config.outputs.out, bench_id)
    if config.dry_run:
        runs, epochs = runs_of(config, info, info["gpu_count"], logs, generate=False)
        estimate = estimate_s(runs, epochs, info["gpu_count"], info["cpu_bf16_native"])
        target = config.own.to_accuracy
        print(f"to accuracy {target:g}: {len(runs)} variants, at most {epochs} epochs each, at most about"
              f" {estimate / 60:.0f} min:")  # fmt: skip
        for r in runs:
            print(f"  {r.variant}: {shlex.join(r.cmd)}")
        return
    main(config, info, bench_id)


# --to-accuracy: a run's start (importing torch, building the data and model) and an epoch with its evaluation. CPU:
# the tiny CNN on the 2-core AMD EPYC (an epoch 7.3 s); GPU: assumed until a GPU runs it
START_S = dict(cpu=10, gpu=20)
EPOCH_S = dict(cpu=9, gpu=5)


def estimate_s(runs, epochs, gpu, bf16_native=True):
    """--to-accuracy: the most the runs may take, every one training all its epochs. A CPU's rows take the bench's
    factors (cost.slower, bf16 emulated where the CPU has no native bf16); a compiled row adds a cold compile."""
    kind = "gpu" if gpu else "cpu"
    total = 0.0
    for run in runs:
        factor = 1.0 if gpu else cost.slower(run, gpu, bf16_native)
        total += START_S[kind] + epochs * EPOCH_S[kind] * factor + cost.compile_s(run, gpu, repeat=1)
    return total


MODE = Registration("to_accuracy", run, asked=lambda flags: flags.to_accuracy is not None, add_flags=add_flags,
                    check_flags=check_flags, own=read(Flags),
                    outputs=("to_accuracy.csv", "to_accuracy.md", "to_accuracy_curves.png"), executes=ToAccuracy,
                    shows=SHOWS,
                    only=("max_epochs",))  # fmt: skip
