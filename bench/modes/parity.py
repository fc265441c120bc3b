"""python -m bench --parity: does each technique learn the same as the baseline? A technique that is faster but
learns worse is no speed-up. The baseline trains with --seeds seeds (5 by default) and every technique once (seed
--seed), on the same data, steps and global batch; each technique's training-loss curve and final validation accuracy
are read against the band the baseline's seeds give: a 95% prediction interval for one more run of the baseline
(mean +- t(seeds - 1) * sd * sqrt(1 + 1 / seeds), at each point of the curve, of the log of the loss), so the band
is as wide as the seed-to-seed spread and no tolerance is chosen by hand.

A technique
- learns the same: its curve ends inside the band and its final accuracy too;
- learns worse (better) from step N: its last MIN_POINTS points of the curve or more lie above (below) the band, from
  step N on; or its final accuracy lies below (above) its band; by how much is its loss against the baseline's mean
  at the last point;
- diverged: its loss became NaN or inf (diverged_step);
- is not the same run as its twin: a row that computes the same run as another at the same seed (catalogue.TWINS:
  FSDP's is DDP's, checkpointing's and the fused step's the baseline's) must follow its twin's curve, not merely keep
  inside the band: a technique that starts each process from its own weights learns as well as another seed does (a
  band cannot see it) but leaves its twin's curve as far as another seed's. Their distance (the mean over the curve of
  the difference of the logs of the losses) against two seeds' typical distance (the median over pairs of seeds):
  TWIN_SHARE of it or more, or more than twice the distance of the baseline run twice at the same seed (the machine's
  own nondeterminism, 0 on a CPU), is not the same run.

The data is the generated hard workload (data/hard: classes that overlap, so the loss falls over many steps) unless
--data names a folder; the model a tiny CNN on a CPU (examples/smallnet.py:tiny), resnet18 on a GPU. Writes
parity.csv, parity.md and parity_curves.png to --out; each run's log and metrics are under logs/<bench>/parity/.
"""

import json
import math
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from bench import BenchError, catalogue, data, logs_of, write_whole
from bench.config import read
from bench.modes import Registration, new_id, planned_for, table_in
from bench.observe import machine
from bench.outputs import render
from bench.outputs.declared import Band, Bullets, Figure, Joins, Line, Lines, Rows, Shows
from bench.outputs.verdicts import fmt, plural, present
from bench.schema import SummaryRow
from bench.stages import cost
from bench.stages.planning import build, planned, prepare
from bench.stages.running import execute
from bench.stages.statistics import intervals

DEFAULTS = dict(  # the CPU: a tiny CNN, about 3 epochs of the hard data (150 steps of 64); the GPU: resnet18
    cpu=dict(model="examples/smallnet.py:tiny", batch_size=64, steps=150, warmup_steps=5),
    gpu=dict(model="resnet18", batch_size=256, steps=600, warmup_steps=20),
)
SEEDS = 5  # the baseline's seeds, by default: a band of 3.0 standard deviations (2 seeds: 15.6, 3: 5.0)
MIN_POINTS = 3  # a curve outside the band at its last points, this many or more, learns worse (or better)
# a twin this share of two seeds' typical distance from its twin's curve, or more, is not the same run. Measured in
# the saved CPU run (baseline/cpu-2core-amd-epyc-avx512-bf16/parity.md): the twins 0.000 (fsdp, checkpoint) and 0.006
# (fused) of it; FSDP with each process's own initial weights 0.70 of it
# (baseline/cpu-2core-amd-epyc-avx512-bf16/fsdp-without-broadcast/)
TWIN_SHARE = 0.5
REPEAT_FLOOR = 2  # ... or this many times the distance of the baseline run twice at one seed, where that is more
CONFIDENCE = 0.95
COLUMNS = ["variant", "verdict", "from_step", "final_loss", "band_loss_low", "band_loss_high", "loss_vs_baseline",
           "final_val_acc", "band_acc_low", "band_acc_high", "diverged_step", "twin", "twin_distance", "seed_distance",
           "repeat_distance", "skipped_steps", "steps", "seed", "error"]  # fmt: skip


def add_flags(p):
    p.add_argument(
        "--parity",
        action="store_true",
        help="does each technique learn the same? the baseline over --seeds seeds, each technique once, same steps",
    )
    p.add_argument("--seeds", type=int, help=f"with --parity: the baseline's seeds, its band (default {SEEDS})")


def check_flags(flags, config):
    if flags.seeds is not None and not 2 <= flags.seeds <= 20:
        raise BenchError(f"--seeds {flags.seeds}: 2 to 20 (a band needs the spread of two seeds at least)")
    if config.mode == "parity" and config.work.steps == "auto":
        raise BenchError("--parity trains a fixed number of steps: give --steps N")


@dataclass(frozen=True)
class Flags:
    """--parity's own flags: the baseline's seeds (None: SEEDS)."""

    seeds: int | None = None


def runs_of(config, info, gpu_count, logs, generate=True):
    """The baseline at each seed, then every technique at --seed: the same model, data, batch and steps."""
    chosen = dict(DEFAULTS["gpu" if gpu_count else "cpu"])
    given = {k: getattr(config.work, k) for k in ("model", "batch_size", "steps", "warmup_steps")}
    chosen.update({k: v for k, v in given.items() if v is not None})  # 0 is given
    if chosen["warmup_steps"] >= chosen["steps"]:
        raise BenchError(f"--warmup-steps {chosen['warmup_steps']} leaves none of the {chosen['steps']} steps")
    path = Path(config.work.data) if config.work.data else Path(data.ROOT) / "data" / "hard"
    if generate and not config.work.data:
        data.ensure("hard", config.work.seed, data.HARD)
    described = prepare.describe(path, "custom" if config.work.data else "hard")
    nproc = config.launch.nproc or gpu_count or 2
    variants = [v for v in build.ordered(build.asked_variants(config, gpu_count), gpu_count) if "synthetic" not in v]
    if "baseline" not in variants or len(variants) < 2:
        raise BenchError("--parity compares techniques with the baseline: --variants needs baseline and one more")
    runs = []
    for seed in range(config.own.seeds or SEEDS):
        work = planned.Work(chosen["model"], chosen["batch_size"], chosen["steps"], chosen["warmup_steps"], "all",
                         seed=config.work.seed + seed)  # fmt: skip
        run = build.training_run("baseline", seed + 1, path=path, info=described, chosen=work, gpu_count=gpu_count,
                                 nproc=nproc, workers=config.work.workers, cores=info["cpu_cores"],
                                 workload="hard")  # fmt: skip
        runs.append(run.with_flags(name=f"baseline-seed{config.work.seed + seed}"))
    if any(catalogue.TWINS.get(v) in variants for v in variants):  # the machine's own nondeterminism: seed 0 again
        runs.append(runs[0].with_flags(name=f"{runs[0].name}-again", repeat=len(runs) + 1))
    work = planned.Work(chosen["model"], chosen["batch_size"], chosen["steps"], chosen["warmup_steps"], "all",
                     seed=config.work.seed)  # fmt: skip
    for variant in variants:
        if variant != "baseline":
            runs.append(build.training_run(variant, 1, path=path, info=described, chosen=work, gpu_count=gpu_count,
                                           nproc=nproc, workers=config.work.workers, cores=info["cpu_cores"],
                                           workload="hard", cache=logs))  # fmt: skip
    return runs


def band(values):
    """(mean, low, high): a 95% prediction interval for one more value from the seeds' values (NaN with fewer than
    two)."""
    values = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(values) < 2:
        return math.nan, math.nan, math.nan
    mean, sd, n = values.mean(), values.std(ddof=1), len(values)
    half = intervals.scipy_stats().t.ppf(0.5 + CONFIDENCE / 2, n - 1) * sd * math.sqrt(1 + 1 / n)
    return mean, mean - half, mean + half


def loss_band(curves):
    """{step: (mean, low, high)} at each step every seed's loss curve has: the band of the log of the loss (a loss
    is positive and its spread scales with it), taken back (the mean is then the geometric mean)."""
    points = [dict((int(step), loss) for step, loss in curve) for curve in curves]
    common = sorted(set.intersection(*(set(p) for p in points))) if points else []
    logs = {step: band([math.log(p[step]) if p[step] > 0 else math.nan for p in points]) for step in common}
    return {step: tuple(math.exp(v) for v in values) for step, values in logs.items()}


def outside_from(curve, bands, side):
    """The step from which the curve lies outside the band on side (+1 above, -1 below) to its end, if it does for
    MIN_POINTS points or more; else None."""
    inside = [(step, loss) for step, loss in curve if int(step) in bands]
    run = []
    for step, loss in inside:
        _, low, high = bands[int(step)]
        run = run + [int(step)] if (loss > high if side > 0 else loss < low) else []
    return run[0] if len(run) >= MIN_POINTS else None


def distance(a, b):
    """Two loss curves' distance: the mean over their common steps of |log a - log b| (NaN with none in common)."""
    a, b = dict((int(s), v) for s, v in a), dict((int(s), v) for s, v in b)
    common = [s for s in a if s in b and a[s] > 0 and b[s] > 0]
    return float(np.mean([abs(math.log(a[s]) - math.log(b[s])) for s in common])) if common else math.nan


def twin_check(result, twin, seeds, again=None):
    """(twin_distance, seed_distance, repeat_distance, same): the result's curve against its twin's at the same seed,
    read against two seeds' typical distance and the baseline run twice (again: that second run's result, or None)."""
    ok = [s["loss_curve"] for s in seeds if s.get("status") == "ok"]
    pairs = [distance(a, b) for i, a in enumerate(ok) for b in ok[i + 1 :]]
    seed_distance = float(np.nanmedian(pairs)) if pairs else math.nan
    first = next((s for s in seeds if s.get("seed") == result.get("seed") and s.get("status") == "ok"), None)
    repeat = distance(again["loss_curve"], first["loss_curve"]) if again and first else math.nan
    apart = distance(result["loss_curve"], twin["loss_curve"])
    limit = max(TWIN_SHARE * seed_distance, REPEAT_FLOOR * (0 if math.isnan(repeat) else repeat))
    return apart, seed_distance, repeat, not apart >= limit


def verdict(result, seeds, twin=None, again=None):
    """The row of parity.csv for one technique's result against the baseline seeds' results (each: loss_curve,
    val_acc, diverged_step, status); twin: the result of the row it computes the same run as (catalogue.TWINS) at the
    same seed, again: the baseline's second run at that seed, where they ran."""
    row = dict(variant=result["variant"], seed=result.get("seed"), error=result.get("error"))
    row.update(skipped_steps=result.get("skipped_steps"), steps=result.get("steps"))  # fp16's scaler: its skips
    if result.get("status") != "ok":
        return dict(row, verdict="failed")
    if result.get("diverged_step") is not None and not pd.isna(result.get("diverged_step")):
        return dict(row, verdict="diverged", diverged_step=result["diverged_step"])
    bands = loss_band([s["loss_curve"] for s in seeds if s.get("status") == "ok"])
    curve = [(int(step), loss) for step, loss in result["loss_curve"] if int(step) in bands]
    _, acc_low, acc_high = band([s.get("val_acc") for s in seeds if s.get("status") == "ok"])
    acc_low, acc_high = max(0.0, acc_low), min(1.0, acc_high)  # an accuracy's band inside 0 to 1 (NaN stays NaN)
    row.update(final_val_acc=result.get("val_acc"), band_acc_low=acc_low, band_acc_high=acc_high)
    if curve:
        step, loss = curve[-1]
        mean, low, high = bands[step]
        row.update(final_loss=loss, band_loss_low=low, band_loss_high=high, loss_vs_baseline=loss / mean)
    worse, better = outside_from(curve, bands, +1), outside_from(curve, bands, -1)
    acc = result.get("val_acc")
    acc_worse = acc is not None and acc < acc_low
    acc_better = acc is not None and acc > acc_high
    same_run = True
    if twin and twin.get("status") == "ok" and twin.get("loss_curve") and curve:
        apart, seed_distance, repeat, same_run = twin_check(result, twin, seeds, again)
        row.update(twin=twin["variant"], twin_distance=apart, seed_distance=seed_distance, repeat_distance=repeat)
    if worse is not None or acc_worse:
        return dict(row, verdict="learns worse", from_step=worse)
    if better is not None or acc_better:
        return dict(row, verdict="learns better", from_step=better)
    return dict(row, verdict="learns the same" if same_run else "not the same run")


class Parity(execute.Mode):
    """The mode as the executor runs it: a run each (the baseline once a seed); the verdicts once all have run.
    Its state: the seeds, the techniques' seed, besides the timeout."""

    name, what, subfolder = "parity", "runs", "parity"

    @dataclass(frozen=True)
    class State(execute.State):
        seeds: int = SEEDS
        seed: int = 0

    def do(self, run, job):
        row = job.launch(run)
        if row is None:
            return None
        result = dict(variant=run.variant, status=row["status"], error=row.get("error"), run_s=row["wall_s"])
        result["seed"] = int(run.flags.get("--seed", 0))
        result["again"] = run.name.endswith("-again")  # the baseline run twice at one seed: not one of the band
        if row["status"] == "ok":
            metrics = json.loads((self.folder() / f"{run.name}.json").read_text())
            result.update(loss_curve=metrics.get("loss_curve") or [], val_acc=metrics.get("val_acc"))
            result["diverged_step"] = metrics.get("diverged_step")
            result.update(skipped_steps=metrics.get("amp_skipped_steps"), steps=int(run.flags["--steps"]))
        return result

    def say(self, run, record):
        if record["status"] != "ok":
            return f"{run.name}: failed: {record.get('error')}"
        last = record["loss_curve"][-1][1] if record["loss_curve"] else math.nan
        return f"{run.name}: last loss {last:.3f}, final accuracy {fmt(record.get('val_acc'), '{:.3f}') or '-'}"

    def finish(self, records, unrun, how):
        seeds = [r for r in records if r["variant"] == "baseline" and not r.get("again")]
        again = next((r for r in records if r.get("again") and r.get("status") == "ok"), None)
        at_seed = {r["variant"]: r for r in records if r.get("seed") == self.state.seed and not r.get("again")}
        rows = [verdict(r, seeds, at_seed.get(catalogue.TWINS.get(r["variant"])), again) for r in records
                if r["variant"] != "baseline"]  # fmt: skip
        rows += [dict(variant=run.variant, verdict="failed", error=f"not run: {why}") for run, why in unrun]
        table = pd.DataFrame(rows).reindex(columns=COLUMNS)
        spent = sum(r.get("run_s") or 0 for r in records)
        out = self.config.outputs.out
        write(out, table, seeds, [r for r in records if not r.get("again")], self.info, spent)
        print(f"parity: {spent / 60:.1f} min in runs; {out}/parity.md, parity.csv, parity_curves.png")
        return 0


def main(config, info, bench_id):
    """Plan the runs and run them through the executor."""
    logs = logs_of(config.outputs.out, bench_id)
    runs = runs_of(config, info, info["gpu_count"], logs)
    gpu = bool(info["gpu_count"])
    budget_s = cost.budget_s(config.limits.budget, gpu)
    say(runs, gpu, info, budget_s)
    for run in runs:
        run.estimate_s = estimate_s([run], gpu, info["cpu_bf16_native"])
    path = Path(config.work.data) if config.work.data else Path(data.ROOT) / "data" / "hard"
    works = dict(hard=planned.Work(data=str(path), generated=not config.work.data, seed=config.work.seed))
    timeout = cost.timeout_s(config.limits.timeout, gpu)
    state = Parity.State(seeds=config.own.seeds or SEEDS, seed=config.work.seed, timeout=timeout)
    mode = Parity(config, info, bench_id, runs, works, state)
    execute.start(mode)
    execute.execute(mode, budget_s, config.limits.chunk)


def say(runs, gpu, info, budget_s=None):
    seeds = sum(r.variant == "baseline" and not r.name.endswith("-again") for r in runs)
    steps = runs[0].flags.get("--steps")
    budget = f" (budget {budget_s / 60:g} min)" if budget_s else ""
    minutes = estimate_s(runs, gpu, info["cpu_bf16_native"]) / 60
    again = sum(r.name.endswith("-again") for r in runs)
    twice = " (the first twice: the twins' check)" if again else ""
    techniques = plural(len(runs) - seeds - again, "technique")
    print(f"parity: the baseline at {seeds} seeds{twice} and {techniques}, {steps} steps each, about {minutes:.0f}"
          f" min{budget}", flush=True)  # fmt: skip


def write(out, table, seeds, records, info, spent):
    out = Path(out)
    write_whole(out / "parity.csv", lambda tmp: table.to_csv(tmp, index=False))
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    title = f"Does each technique learn the same? {machine.where(info)} ({when}, {spent / 60:.1f} min)"
    render.write(SHOWS, out, table, title, seeds=seeds, records=records)


# ----------------------------------------------------------------------------- what it shows: its words, its page
# (parity.md) and its plot (parity_curves.png), rendered by bench/outputs/


def line(row):
    """'amp: learns worse from step 60: its loss 1.31x the baseline's mean at step 150 (band 0.62 to 0.81); final
    accuracy 0.412 (band 0.455 to 0.520)'."""
    said = row["verdict"]
    if said == "failed":
        return f"{row['variant']}: failed: {row.get('error')}"
    if said == "diverged":
        return f"{row['variant']}: diverged: its loss was NaN or inf from step {row['diverged_step']:.0f}"
    if said != "learns the same" and pd.notna(row.get("from_step")):
        said += f" from step {row['from_step']:.0f}"
    parts = []
    if said == "not the same run":
        said += f" as {row['twin']}"
        repeat = row.get("repeat_distance")
        repeat = f"; the baseline run twice: {repeat:.3f}" if pd.notna(repeat) else ""
        apart, seeds = row["twin_distance"], row["seed_distance"]
        parts.append(f"at the same seed its curve is {apart:.3f} from {row['twin']}'s, {apart / seeds:.2f} of two"
                     f" seeds' typical {seeds:.3f}{repeat}: do its processes start from one set of weights and see the"
                     " same data?")  # fmt: skip
    if pd.notna(row.get("final_loss")):
        parts.append(f"its last loss {row['final_loss']:.3f}, {row['loss_vs_baseline']:.2f}x the baseline's mean"
                     f" (band {row['band_loss_low']:.3f} to {row['band_loss_high']:.3f})")  # fmt: skip
    if pd.notna(row.get("skipped_steps")):
        parts.append(f"its fp16 scaler skipped the update of {row['skipped_steps']:.0f} of its"
                     f" {fmt(row.get('steps'), '{:.0f}') or ''} steps (inf or NaN in the gradients)")  # fmt: skip
    if pd.notna(row.get("final_val_acc")):
        parts.append(f"final accuracy {row['final_val_acc']:.3f} (band {fmt(row.get('band_acc_low'), '{:.3f}')} to"
                     f" {fmt(row.get('band_acc_high'), '{:.3f}')})")  # fmt: skip
    return f"{row['variant']}: {said}" + (f": {'; '.join(parts)}" if parts else "")


def between(low, high, pattern="{:.3f}"):
    return lambda r: f"{fmt(r[low], pattern)} to {fmt(r[high], pattern)}"


def twin_cell(row):
    return f"{row['twin']}: {row['twin_distance'] / row['seed_distance']:.2f}" if present(row["twin"]) else ""


TABLE = (
    ("variant", lambda r: r["variant"]),
    ("verdict", lambda r: r["verdict"]),
    ("from step", lambda r: fmt(r["from_step"], "{:.0f}")),
    ("last loss", lambda r: fmt(r["final_loss"], "{:.3f}")),
    ("band", between("band_loss_low", "band_loss_high")),
    ("x baseline", lambda r: fmt(r["loss_vs_baseline"], "{:.2f}x")),
    ("final acc", lambda r: fmt(r["final_val_acc"], "{:.3f}")),
    ("band", between("band_acc_low", "band_acc_high")),
    ("twin: apart / seeds'", twin_cell),
)


def blocks(table, seeds, records=()):
    """parity.md: each technique's verdict against the band of the baseline's seeds (seeds: their records), a twin's
    distance from its twin as a share of two seeds' (TWIN_SHARE or more: not the same run)."""
    said = (f"The band: the baseline at {len(seeds)} seeds, a 95% prediction interval. A twin (a row that computes the"
            " same run as another): its curve's distance from its twin's at the same seed, as a share of two seeds'"
            f" typical distance ({TWIN_SHARE:g} or more: not the same run).")  # fmt: skip
    rows = table.to_dict("records")
    return [said, Rows(rows, TABLE), Bullets([line(r) for r in rows])]


def figure(table, title, seeds, records):
    """parity_curves.png: the baseline seeds' band (shaded) and mean, and each technique's training loss over it;
    None where no run finished."""
    ok = [r for r in records if r.get("status") == "ok"]
    if not ok:
        return None
    bands = loss_band([s["loss_curve"] for s in seeds if s.get("status") == "ok"])
    steps = sorted(bands)
    mean, low, high = (list(v) for v in zip(*(bands[s] for s in steps))) if steps else ([], [], [])
    band = Band(steps, low, high, mean, "baseline: its seeds' 95% band", "baseline: its seeds' mean")
    drawn = [Line(r["variant"], *points(r.get("loss_curve"))) for r in ok if r["variant"] != "baseline"]
    panel = Lines(drawn, "step", "training loss (mean of 10 steps)", band=band, legend_beside=True, grid=True)
    return Figure([panel], (10.5, 4.8), title, title_size=9, dpi=120, trimmed=True)


def points(curve):
    """([steps], [losses]) of a loss curve ([step, loss] pairs; none: two empty lists)."""
    steps, losses = zip(*curve) if curve else ((), ())
    return list(steps), list(losses)


SHOWS = Shows("parity.md", "parity_curves.png", "each technique's training loss over the baseline seeds' band", blocks,
              figure)  # fmt: skip


def run(config):
    """Does each technique learn the same as the baseline's seeds?"""
    info = planned_for(config)
    bench_id = new_id()
    if config.dry_run:
        runs = runs_of(config, info, info["gpu_count"], logs_of(config.outputs.out, bench_id), generate=False)
        say(runs, bool(info["gpu_count"]), info, cost.budget_s(config.limits.budget, info["gpu_count"]))
        for r in runs:
            print(f"  {r.name}: {shlex.join(r.cmd)}")
        return
    main(config, info, bench_id)


# ----------------------------------------------------------------------------- what it adds to a bench's summary


def with_parity(summary, parity):
    """The training rows with the verdict of a --parity run (its parity.csv, read into a frame), by variant: the
    technique is the same whatever the speed bench's model; parity None or empty changes nothing."""
    if parity is None or parity.empty:
        return summary
    found = parity.set_index("variant")
    train = summary["kind"] == "train"
    summary.loc[train, "parity_verdict"] = summary.loc[train, "variant"].map(found["verdict"])
    summary.loc[train, "parity_from_step"] = summary.loc[train, "variant"].map(found["from_step"])
    return summary


def numbers(summary, out):
    """A bench's summary with the verdicts of a --parity run in the same results folder (parity.csv), by variant."""
    table = table_in(out, "parity.csv", ("variant", "verdict", "from_step"), "--parity's verdicts")
    return summary if table is None else with_parity(summary.copy(), table)


def cell(row):
    """'the same', 'worse from step 60', 'diverged' ('' for a row --parity did not run)."""
    row = SummaryRow.of(row)
    said = row.parity_verdict
    if not isinstance(said, str):
        return ""
    step = f" from step {row.parity_from_step:.0f}" if pd.notna(row.parity_from_step) else ""
    return said.removeprefix("learns ") + (step if said in ("learns worse", "learns better") else "")


def words(row):
    """'in --parity it learns worse from step 60 than the baseline over its seeds (parity.md)' ('' without one)."""
    row = SummaryRow.of(row)
    said = row.parity_verdict
    if not isinstance(said, str):
        return ""
    step = f" from step {row.parity_from_step:.0f}" if pd.notna(row.parity_from_step) else ""
    if said == "learns the same":
        return "in --parity it learns the same as the baseline over its seeds (parity.md)"
    if said == "not the same run":
        return "in --parity it is not the same run as its twin at the same seed (parity.md)"
    if said in ("learns worse", "learns better"):
        return f"in --parity it {said}{step} than the baseline over its seeds (parity.md)"
    return f"in --parity it {said} (parity.md)"


# a bench's summary in the same folder: each row's verdict in its column and its words; a faster row that learns
# worse (or diverged) is no speed-up worth having, and one whose curve leaves its twin's at the same seed (FSDP's
# DDP's) is not the run it claims to speed up: the answer first lists both apart, first
JOINS = Joins(
    numbers,
    column=("learns (--parity)", cell),
    said=words,
    apart=(("Faster, but learns worse", lambda row: row.parity_verdict in ("learns worse", "diverged")),
           ("Faster, but not the same run", lambda row: row.parity_verdict == "not the same run")),
    points=(("learning", "python -m bench --parity"),),  # where a bench's rows end apart: compare them over seeds
)  # fmt: skip


# --parity: a run's start and evaluations, a step of its model and a cold compile of it: on a CPU the tiny CNN as the
# saved run measured it (2-core EPYC with AVX-512-BF16, 2026-11-26: the baseline 21 to 42 s for 150 steps of 64,
# median 27, a compiled row 25 s more; 15 runs, 7.7 min); on a GPU assumed until a GPU runs it
PARITY_S = dict(cpu=dict(start=10, step=0.11, compile=30), gpu=dict(start=25, step=0.05, compile=60))


def estimate_s(runs, gpu, bf16_native=True):
    """--parity: each run's start and its steps at its row's factor (cost.slower, bf16 emulated), a compile
    cold."""
    seconds_of = PARITY_S["gpu" if gpu else "cpu"]
    return sum(
        seconds_of["start"]
        + int(run.flags.get("--steps", 0)) * seconds_of["step"] * cost.slower(run, gpu, bf16_native)
        + (seconds_of["compile"] if run.compiles else 0)
        for run in runs
    )


MODE = Registration("parity", run, asked=lambda flags: flags.parity, add_flags=add_flags, check_flags=check_flags,
                    own=read(Flags), outputs=("parity.csv", "parity.md", "parity_curves.png"),
                    executes=Parity, only=("seeds",), joins=JOINS, shows=SHOWS)  # fmt: skip
