"""python -m bench --scaling 1,2,4,8: how the DDP rows scale with the number of processes, the table that decides
whether more GPUs are worth it (throughput, speed-up over one process, efficiency), as NVIDIA's DeepLearningExamples
publish it.

Each round runs every distributed variant (ddp and all unless --variants names others) at every count, one process
per GPU (on a CPU, gloo processes that share its cores). Weak scaling (the default, as the published tables): each
process keeps the plan's batch, so the global batch grows with the count. Strong (--scaling-mode strong): the
global batch stays the plan's, split over the processes. The rounds pair each count with one process in the same
round, as the bench pairs a variant with the baseline (bench/stages/statistics/summarize.py): the speed-up is the
geometric mean of those ratios with its 95% interval, efficiency = speed-up / processes, and the answer (faster, same,
slower, unsettled) reads the speed-up's interval by the bench's rules.

Writes scaling.csv, scaling.md and scaling.png to --out at the end, from the runs finished (a stopped mode keeps
them: --resume goes on); each run's log and metrics are under logs/<bench>/scaling/. It leaves runs.csv alone: its
runs are at other batches and process counts than the bench's.
"""

import random
import shlex
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from bench import BenchError, catalogue, write_whole
from bench.config import varied
from bench.modes import Registration, planned_bench
from bench.observe import machine
from bench.outputs import render
from bench.outputs.declared import Bullets, Figure, Line, Lines, Rows, Shows
from bench.outputs.verdicts import fmt, present
from bench.stages import cost
from bench.stages.planning import build, plan, slurm
from bench.stages.running import calibrate, execute
from bench.stages.statistics import intervals, rules

ROUNDS = 3  # --repeats auto: rounds of every count
COLUMNS = [
    "variant",
    "processes",
    "nodes",
    "global_batch",
    "rounds_ok",
    "samples_per_s",
    "samples_per_s_min",
    "samples_per_s_max",
    "speedup",
    "speedup_low",
    "speedup_high",
    "efficiency",
    "answer",
    "memory_per_process_mib",
    "memory_kind",
    "scaling_mode",
    "error",
]


def add_flags(p):
    p.add_argument(
        "--scaling",
        metavar="COUNTS",
        help="process counts, e.g. 1,2,4,8: the DDP rows (ddp, all) at each, with speed-up and efficiency",
    )
    p.add_argument(
        "--scaling-mode",
        choices=["weak", "strong"],
        help="with --scaling: weak (default: each process keeps the batch) or strong (the global batch is split)",
    )


def check_flags(flags, config):
    """--scaling's counts and rows read."""
    if flags.scaling is not None:
        counts_flag(flags.scaling)
        variants_of(config.rows.variants)
        if config.work.workload == "all":
            raise BenchError("--scaling runs one workload: --workload small or imagenet, or --data")


@dataclass(frozen=True)
class Flags:
    """--scaling's own flags: the process counts (sorted), the distributed rows scaled, weak or strong."""

    counts: tuple
    variants: tuple
    scaling_mode: str = "weak"


def own(flags, config):
    return Flags(counts_flag(flags.scaling), variants_of(config.rows.variants), flags.scaling_mode or "weak")


def counts_flag(text):
    """--scaling's value: process counts, comma-separated, each 1 or more, each once; sorted."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise BenchError(f"--scaling {text}: process counts, comma-separated (1,2,4,8)") from None
    if not counts or min(counts) < 1:
        raise BenchError(f"--scaling {text}: process counts of 1 or more")
    if len(set(counts)) < len(counts):
        raise BenchError(f"--scaling {text}: each count once")
    return tuple(sorted(counts))


def variants_of(asked):
    """The distributed variants to scale: ddp and all by default (the bench's whole list), else those named."""
    if list(asked) == list(catalogue.DEFAULT):
        return ("ddp", "all")
    chosen = tuple(v for v in asked if catalogue.distributed(v))
    if not chosen:
        raise BenchError("--scaling runs the distributed rows (ddp, fsdp, all): --variants names none of them")
    return chosen


def check_counts(counts, gpu_count, cores, nodes=0):
    """One process per GPU; on a CPU, a core per process at least; across nodes (--launcher slurm) whole nodes."""
    if nodes:
        for n in counts:
            slurm.spread(n, gpu_count or cores, nodes)
        return
    if gpu_count and counts[-1] > gpu_count:
        raise BenchError(f"--scaling {counts[-1]}: one process per GPU, and this machine has {gpu_count} GPU(s)")
    if not gpu_count and counts[-1] > cores:
        raise BenchError(f"--scaling {counts[-1]}: {cores} CPU cores here, and each CPU process needs one")


def runs_of(config, counts, gpu_count, cores, work, logs):
    """Every round's runs: each variant at each count; the rounds after the first in a shuffled order."""
    if config.own.scaling_mode == "strong":
        odd = [n for n in counts if work.batch_size % n]
        if odd:
            raise BenchError(f"--scaling-mode strong splits the batch {work.batch_size} over the processes: it does"
                             f" not divide by {odd[0]}")  # fmt: skip
    path, info = work.data, dict(image_size=work.image_size, classes=range(work.classes))
    variants = config.own.variants
    rounds = ROUNDS if config.limits.repeats == "auto" else config.limits.repeats
    runs = []
    for repeat in range(1, rounds + 1):
        order = [(v, n) for v in variants for n in counts]
        if repeat > 1:
            random.Random(f"{config.work.seed}-{repeat}").shuffle(order)
        for variant, n in order:
            batch = work.batch_size * n if config.own.scaling_mode == "weak" else work.batch_size
            chosen = replace(work, batch_size=batch)
            nodes, per_node = (
                slurm.spread(n, gpu_count or cores, config.launch.nodes) if config.launch.nodes else (0, n)
            )
            run = build.training_run(variant, repeat, path=path, info=info, chosen=chosen, gpu_count=gpu_count,
                                     nproc=per_node, workers=config.work.workers, cores=cores, workload="scaling",
                                     prefix=f"n{n}-", cache=logs)  # fmt: skip
            runs.append(slurm.on_nodes(run, nodes) if nodes else run)
    return runs


def table_of(rows, mode):
    """The table: per variant and count, the rate over the rounds and the speed-up over one process (paired by
    round) with its interval, efficiency and answer; memory per process."""
    frame = pd.DataFrame(rows)
    for column in "samples_per_s", "error", "peak_host_mem_mib", "nvml_peak_mib":  # a failed run's row may lack them
        if column not in frame:
            frame[column] = None
    frame["samples_per_s"] = pd.to_numeric(frame["samples_per_s"])
    smallest = frame["processes"].min()  # the reference count
    table = []
    for (variant, n), group in frame.groupby(["variant", "processes"], sort=False):
        ok = group[(group["status"] == "ok") & group["samples_per_s"].notna()]
        row = dict(variant=variant, processes=n, global_batch=group["global_batch"].iloc[0], rounds_ok=len(ok))
        row["nodes"] = group["nodes"].iloc[0] if "nodes" in group else 1
        errors = group["error"].dropna()
        row.update(scaling_mode=mode, error=None if len(ok) or errors.empty else str(errors.iloc[-1])[:200])
        if len(ok):
            rate = ok["samples_per_s"]
            row.update(samples_per_s=rate.median(), samples_per_s_min=rate.min(), samples_per_s_max=rate.max())
            memory = ok["nvml_peak_mib"] if ok["nvml_peak_mib"].notna().any() else ok["peak_host_mem_mib"]
            if memory.notna().any():
                row["memory_per_process_mib"] = memory.max() / n
                row["memory_kind"] = "GPU (NVML)" if ok["nvml_peak_mib"].notna().any() else "host (PSS)"
        one = frame[(frame["variant"] == variant) & (frame["processes"] == smallest)]
        one = one[(one["status"] == "ok") & one["samples_per_s"].notna()].groupby("repeat")["samples_per_s"].last()
        mine = ok.groupby("repeat")["samples_per_s"].last()
        common = mine.index.intersection(one.index)
        if len(common):
            estimate, low, high = intervals.interval(list(mine[common] / one[common]))
            row.update(speedup=estimate, speedup_low=low, speedup_high=high, efficiency=estimate * smallest / n)
            row["answer"] = "reference" if n == smallest else rules.classify(low, high)
        table.append(row)
    return pd.DataFrame(table).reindex(columns=COLUMNS)


class Scaling(execute.Mode):
    """The mode as the executor runs it: rounds of every variant at every count; a record a run.
    Its state: the process counts and the scaling mode, besides the timeout."""

    name = subfolder = "scaling"

    @dataclass(frozen=True)
    class State(execute.State):
        counts: tuple = ()
        scaling_mode: str = "weak"

    def groups(self, runs):
        return build.rounds(runs)

    def do(self, run, job):
        row = job.launch(run)
        if row is None:
            return None
        nodes = run.nodes or 1
        return dict(row, variant=run.variant, processes=run.processes, nodes=nodes, global_batch=run.batch_size)

    def say(self, run, record):
        rate = f"{record['samples_per_s']:,.1f} samples/s" if record["status"] == "ok" else f"failed: {record['error']}"
        return f"round {run.repeat}: {run.variant} x{run.processes} (batch {record['global_batch']}): {rate}"

    def finish(self, records, unrun, how):
        if not records:
            raise BenchError("--scaling stopped before its first run ended: nothing to write")
        table = table_of(records, self.state.scaling_mode)
        done, rounds = max(r["repeat"] for r in records), max(r.repeat for r in self.runs)
        spent = sum(r.get("wall_s") or 0 for r in records)
        spent_out = bool(how["paused"]) and "budget" in how["paused"]
        write(self.config.outputs.out, table, self.info, spent, done, rounds, spent_out)
        for record in table.to_dict("records"):
            print(f"  {line(record)}")
        print(f"scaling: {spent / 60:.1f} min in runs; {self.config.outputs.out}/scaling.md, scaling.csv, scaling.png")
        return 0


def run(config):
    """DDP's rows at each process count: speed-up and efficiency."""
    info, logs = planned_bench(config)
    gpu_count = info["gpu_count"]
    counts = config.own.counts
    check_counts(counts, gpu_count, info["cpu_cores"], config.launch.nodes)
    nproc = min(counts[-1], gpu_count) if config.launch.nodes and gpu_count else counts[-1]  # per node
    workload = config.work.workload or (None if config.work.data else "small")
    # the plan gives the work; the budget is the mode's
    one = varied(config, variants=config.own.variants, loaders=(), repeats=1, budget="none", nproc=nproc,
                 workload=workload)  # fmt: skip
    _, works, _ = plan.make_plan(one, gpu_count, info["cpu_cores"], logs, info["cpu_bf16_native"], calibrate.steps)
    work = next(iter(works.values()))
    runs = runs_of(config, counts, gpu_count, info["cpu_cores"], work, logs)
    if config.dry_run:
        gpu = bool(gpu_count)
        minutes = estimate_s(runs, gpu, info["cpu_bf16_native"]) / 60
        compiles = cost.cold_compiles(runs, gpu)
        print(f"scaling ({config.own.scaling_mode}): {len(runs)} runs, about {minutes:.0f} min{compiles}:")
        for r in runs:
            print(f"  round {r.repeat}: {r.variant} x{r.processes}: {shlex.join(slurm.launched(r))}")
        return
    main(config, info, runs, logs, counts, works)


def main(config, info, runs, logs, counts, works):
    """Run the rounds through the executor."""
    gpu = bool(info["gpu_count"])
    budget_s = cost.budget_s(config.limits.budget, gpu)
    rounds = max(r.repeat for r in runs)
    print(f"scaling ({config.own.scaling_mode}): {', '.join(config.own.variants)} at {', '.join(map(str, counts))}"
          f" processes, {rounds} rounds, about {estimate_s(runs, gpu, info['cpu_bf16_native']) / 60:.0f} min"
          f"{cost.cold_compiles(runs, gpu)}"
          + (f" (budget {budget_s / 60:g} min)" if budget_s else ""), flush=True)  # fmt: skip
    if not gpu:
        print(f"  on a CPU the processes share its {info['cpu_cores']} cores (each gets cores / processes threads):"
              " this measures what DDP costs, not what more GPUs would give", flush=True)  # fmt: skip
    timeout = cost.timeout_s(config.limits.timeout, gpu)
    state = Scaling.State(counts=tuple(counts), scaling_mode=config.own.scaling_mode, timeout=timeout)
    for run in runs:  # the executor's budget and --chunk go by them until a run of the kind has been measured
        run.estimate_s = cost.run_s(run, window_s(gpu), gpu, info["cpu_bf16_native"])
    mode = Scaling(config, info, logs.name, runs, works, state)
    execute.start(mode)
    execute.execute(mode, budget_s, config.limits.chunk)


def write(out, table, info, spent, done, rounds, spent_out=False):
    out = Path(out)
    write_whole(out / "scaling.csv", lambda tmp: table.to_csv(tmp, index=False))
    where = machine.where(info)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    mode = table["scaling_mode"].iloc[0]
    title = f"Scaling ({mode}): {where} ({when}, {done} of {rounds} rounds, {spent / 60:.1f} min)"
    shared = None if info["gpu_count"] else info["cpu_cores"]  # CPU processes share its cores
    render.write(SHOWS, out, table, title, shared_cores=shared, spent_out=spent_out)


# ----------------------------------------------------------------------------- what it shows: its words, its page
# (scaling.md) and its plot (scaling.png), rendered by bench/outputs/

ANSWER = dict(
    faster="faster than the reference",
    slower="slower than the reference",
    same="no measurable difference",
    unsettled="not settled: more rounds (--repeats)",
)


def line(row):
    n = int(row["processes"])
    if not row["rounds_ok"]:
        return f"{row['variant']} x{n}: failed: {row['error']}"
    text = f"{row['variant']} x{n}: {row['samples_per_s']:,.1f} samples/s"
    if row["answer"] == "reference":
        return text + " (the reference)"
    if present(row["speedup"]):
        text += f", {row['speedup']:.2f}x the reference"
        if present(row["speedup_low"]):
            text += f" (95% interval {row['speedup_low']:.2f}x to {row['speedup_high']:.2f}x)"
        text += f", {row['efficiency']:.0%} efficiency: {ANSWER[row['answer']]}"
    return text


def processes_cell(row):
    nodes = f" on {row['nodes']:.0f} nodes" if present(row["nodes"]) and row["nodes"] > 1 else ""
    return f"{row['processes']:.0f}{nodes}"


def interval_cell(row):
    if not present(row["speedup_low"]) or row["answer"] == "reference":
        return ""
    return f"{row['speedup_low']:.2f}x to {row['speedup_high']:.2f}x"


def blocks(table, shared_cores=None, spent_out=False):
    """scaling.md: each count of processes against the reference; shared_cores: the CPU's cores every process shares
    (None on GPUs); spent_out: the budget ran out before the rounds asked."""
    said = []
    if shared_cores is not None:
        said.append(f"CPU processes share its {shared_cores} cores: the table measures what DDP costs here, not what"
                    " more GPUs would give.")  # fmt: skip
    if spent_out:
        said.append("The budget was spent before the rounds asked: --budget, or fewer counts.")
    kind = table["memory_kind"].dropna()
    memory = f"memory per process, MiB ({kind.iloc[0]})" if not kind.empty else "memory per process, MiB"
    columns = (
        ("variant", lambda r: r["variant"]),
        ("processes", processes_cell),
        ("global batch", lambda r: fmt(r["global_batch"], "{:,.0f}")),
        ("samples/s", lambda r: fmt(r["samples_per_s"], "{:,.1f}")),
        ("speed-up", lambda r: fmt(r["speedup"], "{:.2f}x")),
        ("95% interval", interval_cell),
        ("efficiency", lambda r: fmt(r["efficiency"], "{:.0%}")),
        (memory, lambda r: fmt(r["memory_per_process_mib"], "{:,.0f}")),
    )
    rows = table.to_dict("records")
    return [*said, Rows(rows, columns), Bullets([line(r) for r in rows])]


def figure(table, title, **_):
    """scaling.png: samples/s against processes, a line per variant with its range, and the ideal line (the smallest
    count's rate times the processes)."""
    drawn = []
    for i, (variant, group) in enumerate(table[table["samples_per_s"].notna()].groupby("variant", sort=False)):
        x, y = list(group["processes"]), list(group["samples_per_s"])
        low = list(group["samples_per_s"] - group["samples_per_s_min"])
        high = list(group["samples_per_s_max"] - group["samples_per_s"])
        ideal = [y[0] * n / x[0] for n in x]
        drawn += [Line(variant, x, y, low, high, colour=f"C{i}"), Line(f"{variant}: ideal", x, ideal, dashed=True,
                  colour=f"C{i}")]  # fmt: skip
    panel = Lines(drawn, "processes (one per GPU)", "samples/s (median of the rounds, min to max)",
                  xticks=sorted(table["processes"].unique()), from_zero=True)  # fmt: skip
    return Figure([panel], (6.5, 4.2), title, wrap=None)


SHOWS = Shows("scaling.md", "scaling.png", "samples/s against processes, with the ideal line", blocks, figure)


def window_s(gpu):
    """The timed window --scaling's estimates take: the default plan's (25 steps timed on a CPU)."""
    return cost.WINDOW_S if gpu else cost.COST_S["cpu"]["window"] * 25 / 20


def estimate_s(runs, gpu, bf16_native=True):
    """--scaling: the bench's estimate of each run at the default plan's window; the first run of a compiled variant
    at each count compiles cold (each count has its own cache); on a GPU the steps' calibration too."""
    calibration = cost.COST_S["gpu" if gpu else "cpu"]["calibrate"]
    return calibration + sum(cost.run_s(run, window_s(gpu), gpu, bf16_native) for run in runs)


MODE = Registration("scaling", run, asked=lambda flags: flags.scaling is not None, add_flags=add_flags,
                    check_flags=check_flags, own=own, outputs=("scaling.csv", "scaling.md", "scaling.png"),
                    executes=Scaling, only=("scaling_mode", "launcher", "nodes"), shows=SHOWS)  # fmt: skip
