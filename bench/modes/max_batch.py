"""python -m bench --max-batch: the largest global batch each training variant trains without running out of memory,
and its speed there. What a technique's memory saving buys is a bigger batch in the same memory.

Each probe is a fresh short run (PROBE_STEPS steps, then one batch evaluated: evaluation holds no gradients, so it
needs less memory than a step) at one batch: from the plan's batch the batch doubles until a
probe runs out of memory (or reaches the training set's size), then the last batch that fit and the first that did
not are bisected until they are within a step of each other (an eighth of the batch that fit, at least one
process's share). On a GPU the limit is the device's memory; on a CPU it is --memory-limit MIB, an address-space
limit (RLIMIT_AS) on each process of a probe (torch alone takes about 4 GB of it), so that the mode runs, and
is tested, on a CPU. Then one run at the largest batch measures its speed and memory, sized for that batch
(sized_run): the plan's window in seconds rather than its steps (a batch 32 times the plan's times a 32nd of its
steps), its evaluation sample as planned, and inside one epoch where an epoch holds it, so that no epoch restart
(each waits for a worker to build a whole batch) falls in the window; where one does, the table says how many and
the steady rate between them.

Then the iso-memory comparison: every variant whose batch was found is timed at its own largest batch in --repeats
paired rounds (3 with auto), as the speed bench times its rows (each round runs every variant once, the order
reversed every other round; each run as sized_run makes it, so every row trains the same samples in its window), and
its speed is read against the baseline's at the baseline's own largest batch, round by round: the geometric mean of
the ratios and its 95% interval, and the speed bench's answer from it (bench/stages/statistics/summarize.py). A bench in
the same results folder then says, for each row whose answer changes there, what it is "at its largest batch".

Writes max_batch.csv, max_batch.md and max_batch.png to --out; each probe's log is under logs/<bench>/max-batch/.
--budget bounds the whole mode: a variant not searched when it is spent says so, and a round it does not hold is not
started.
"""

import math
import shlex
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from bench import BenchError, write_whole
from bench.config import read, varied
from bench.modes import Registration, planned_bench, speed, table_in
from bench.observe import machine
from bench.outputs import render
from bench.outputs.declared import Bars, Bullets, Figure, Joins, Rows, Shows
from bench.outputs.verdicts import ANSWER_WORDS, fmt, plural, present
from bench.schema import SummaryRow
from bench.stages import cost
from bench.stages.planning import plan
from bench.stages.records.record import read_runs
from bench.stages.running import calibrate, execute
from bench.stages.statistics import intervals, rules

PROBE_STEPS = 3  # a probe: the warm-up step, then two more (the optimizer's state exists from the first)
MAX_BATCH = 2**16  # the doubling stops here
PROBES = 10  # the estimate of the probes of one variant
MIN_TIMED = 10  # the fewest steps the run at the largest batch times (unless the plan times fewer)
ROUNDS = 3  # the paired rounds at each variant's largest batch with --repeats auto
TIMED = "-largest-r"  # a timed round's run is named VARIANT-largest-rROUND
# of the run at the largest batch
MEASURED = (
    "samples_per_s",
    "median_step_samples_per_s",
    "epoch_starts_timed",
    "peak_host_mem_mib",
    "peak_mem_reserved_mib",
    "nvml_peak_mib",
)
COLUMNS = [
    "variant",
    "max_batch",
    "first_failed_batch",
    "why_it_stops",
    "samples_per_s",
    "median_step_samples_per_s",
    "epoch_starts_timed",
    "batch_vs_baseline",
    "speed_vs_baseline",
    "speed_low",
    "speed_high",
    "speed_answer",
    "rounds",
    "peak_host_mem_mib",
    "peak_mem_reserved_mib",
    "nvml_peak_mib",
    "probes",
    "search_s",
    "memory_limit_mib",
    "model",
    "workload",
    "error",
]


def add_flags(p):
    p.add_argument(
        "--max-batch",
        action="store_true",
        help="the largest batch each training variant trains without running out of memory, and its speed there",
    )
    p.add_argument("--memory-limit", type=int, metavar="MIB", help="with --max-batch on a CPU: each probe's memory")


def check_flags(flags, config):
    if flags.memory_limit is not None and flags.memory_limit < 1:
        raise BenchError(f"--memory-limit {flags.memory_limit}: MiB, 1 or more")


@dataclass(frozen=True)
class Flags:
    """--max-batch's own flags: each probe's memory on a CPU, in MiB (None: the machine's)."""

    memory_limit: int | None = None


def step(batch, processes=1):
    """The search's resolution near batch: an eighth of it, at least one batch per process."""
    return max(processes, batch // 8)


def step_down(batch, processes=1):
    """The next batch below batch that a whole run may train: a step lower, a multiple of the processes; None below
    one batch per process."""
    lower = batch - step(batch, processes)
    lower -= lower % processes
    return lower if lower >= processes else None


def out_of_memory(row):
    return row["status"] == "failed" and "out of memory" in str(row.get("error"))


def too_big_for_the_data(row):
    return row["status"] == "failed" and "is larger than the training set" in str(row.get("error"))


def probe_run(run, batch, steps, name, warmup=1):
    """run at another global batch (and steps): its flags replaced."""
    flags = {"--batch-size": batch, **({"--steps": steps, "--warmup-steps": warmup} if steps else {})}
    return run.with_flags(name=name, batch_size=batch, flags=flags)


def sized_run(run, batch, work):
    """The run that measures the speed at the largest batch, sized for it: the plan's timed window in seconds (its
    timed steps times the plan's batch / this batch, MIN_TIMED at least) after a warm-up cut alike (2 steps at least:
    the first is cuDNN's search and the compile), the plan's evaluation sample; the whole run inside one epoch where
    an epoch holds the warm-up and MIN_TIMED steps."""
    if not isinstance(work.steps, int):  # the plan runs epochs (or was not calibrated): its runs as they are
        return probe_run(run, batch, None, f"{run.variant}-at-{batch}")
    share, planned_warmup = work.batch_size / batch, work.warmup_steps
    planned_timed = work.steps - planned_warmup
    fewest = min(MIN_TIMED, planned_timed)
    warmup = min(planned_warmup, max(2, math.ceil(planned_warmup * share)))
    timed = max(fewest, math.ceil(planned_timed * share))
    per_epoch = (work.train_size or math.inf) // batch
    if warmup + timed > per_epoch >= warmup + fewest:
        timed = per_epoch - warmup
    return probe_run(run, batch, warmup + timed, f"{run.variant}-at-{batch}", warmup)


def search(run, start, limit_mib, job):
    """(largest batch that fit, first batch that did not or None, why it stops, probes made, error or None); None
    when the executor was stopped. Batches are multiples of the run's processes (DDP splits the global batch).
    job: the executor's (bench/stages/running/execute.py): each probe is job.launch'ed; the search ends when
    job.over()."""
    step_of = run.processes
    fits, fails, probes = None, None, 0

    def probe(batch):
        nonlocal probes
        probes += 1
        made = probe_run(run, batch, PROBE_STEPS, f"{run.variant}-batch{batch}")
        made = made.with_flags(flags={"--eval-samples": batch})  # one batch evaluated: the path runs, in less time
        row = job.launch(made, memory_limit_mib=limit_mib)
        if row is None:
            raise KeyboardInterrupt
        if row["status"] == "ok":
            return True, None
        if out_of_memory(row) or too_big_for_the_data(row):
            return False, row["error"]
        return None, row["error"]

    batch, why = max(step_of, start - start % step_of), None
    while True:  # down from the start until one fits, then up by doubling until one does not
        if job.over():
            return fits, fails, "the budget was spent", probes, None
        ok, error = probe(batch)
        if ok is None:
            return fits, fails, "a probe failed", probes, error
        if ok:
            fits = batch
            if fails is not None:
                break
            if batch * 2 > MAX_BATCH:
                return fits, None, f"{MAX_BATCH:,}, the most tried", probes, None
            batch *= 2
        else:
            fails, why = batch, error
            if fits is not None:
                break
            if batch <= step_of:
                return None, batch, "even the smallest batch does not fit", probes, error
            batch = max(step_of, batch // 2 - (batch // 2) % step_of)
    while fails - fits > step(fits, step_of):  # bisect to within a step
        if job.over():
            return fits, fails, "the budget was spent", probes, None
        middle = (fits + fails) // 2
        middle -= middle % step_of
        ok, error = probe(middle)
        if ok is None:
            return fits, fails, "a probe failed", probes, error
        if ok:
            fits = middle
        else:
            fails, why = middle, error
    reason = "the training set's size" if "is larger than the training set" in str(why) else "out of memory"
    return fits, fails, reason, probes, None


def say_estimate(runs, gpu, budget_s=None, rounds=ROUNDS):
    """The estimate as printed (by --dry-run too): the total, the cold compiles in it, the rounds at the largest
    batches (runs: as planned, their estimates a bench run's), and where a budget is given, the variants it is
    expected to reach (the search goes in plan order; the rest are listed as not searched)."""
    where = "gpu" if gpu else "cpu"
    compiles = sum(PROBES + 1 for r in runs if r.compiles)
    text = f"max batch: {len(runs)} variants, about {estimate_s(runs, gpu, PROBES) / 60:.0f} min"
    if compiles:
        text += (f" ({compiles} cold compiles of about {cost.COST_S[where]['cold']:.0f} s in it: every probe of a"
                 " compiled variant is a new process at a new batch)")  # fmt: skip
    if rounds and len(runs) > 1:
        timed_s = rounds * sum(r.estimate_s + cost.compile_s(r, gpu, repeat=1) for r in runs)
        text += f", then {plural(rounds, 'round')} at each one's largest batch, about {timed_s / 60:.0f} min"
    if budget_s:
        reached, spent = [], 0.0
        for r in runs:
            spent += estimate_s([r], gpu, PROBES)
            if spent > budget_s:
                break
            reached.append(r.variant if len({x.workload for x in runs}) == 1 else f"{r.workload} {r.variant}")
        text += f"; budget {budget_s / 60:g} min"
        if len(reached) < len(runs):
            text += f", which reaches about {len(reached)}: {', '.join(reached) or 'none'}"
    return text


def timed(run):
    """Whether a run (or a record's run name) is one of the rounds at a largest batch, not a search."""
    return TIMED in (run if isinstance(run, str) else run.name)


def largest(records):
    """{variant: its largest batch} from the searches' records (the last of each run), where one was found, or from
    its last round where a round had to step down."""
    found = {}
    for record in execute.last_of_each(records):
        if not timed(record["run"]) and record.get("max_batch") is not None and not record.get("error"):
            found[record["variant"]] = int(record["max_batch"])
    for record in execute.last_of_each(records):
        if timed(record["run"]) and record.get("status") == "ok" and record["variant"] in found:
            found[record["variant"]] = min(found[record["variant"]], int(record["batch"]))
    return found


class MaxBatch(execute.Mode):
    """The mode as the executor runs it: a variant's search and its measured run are one of its runs; then the rounds
    at each variant's largest batch, added by more() a round at a time once every search has run.
    Its state: memory_limit (MiB or None), rounds, timed_s (a timed run's estimate, by variant), besides the
    timeout."""

    name, what, subfolder = "max_batch", "runs", "max-batch"

    @dataclass(frozen=True)
    class State(execute.State):
        memory_limit: int | None = None
        rounds: int = ROUNDS
        timed_s: dict = field(default_factory=dict)

    def more(self, runs, records):
        """The next round at each variant's largest batch (the order reversed every other round), while fewer than
        state's rounds are planned; (None, why) when there are no more."""
        searches = [r for r in runs if not timed(r)]
        found = largest(records)
        if "baseline" not in found or len(found) < 2:
            return None, "no round at the largest batches: the baseline's and another's are needed"
        made = max((r.repeat for r in runs if timed(r)), default=0)
        if made >= self.state.rounds:
            return None, f"{made} rounds at each variant's largest batch"
        order = [r for r in searches if r.variant in found]
        order = order[::-1] if made % 2 else order
        group = []
        for run in order:
            at = sized_run(run, found[run.variant], self.works[run.workload])
            at = at.with_flags(name=f"{run.variant}{TIMED}{made + 1}", repeat=made + 1)
            at.estimate_s = self.state.timed_s.get(run.variant, at.estimate_s)
            group.append(at)
        return group, None

    def do(self, run, job):
        limit = self.state.memory_limit
        if timed(run):  # a round at the largest batch: one run, a step down while it runs out of memory
            batch, spent = run.batch_size, 0.0
            while True:
                row = job.launch(run, memory_limit_mib=limit)
                if row is None:
                    return None
                spent += row.get("wall_s") or 0.0
                lower = step_down(batch, run.processes)
                if not out_of_memory(row) or lower is None or job.over():
                    break
                # near the limit a run's memory varies from run to run (on a CPU the allocator's address space): the
                # largest batch is the one every round trains, the later rounds at it too (more() reads it here)
                batch = lower
                run = sized_run(run, batch, self.works[run.workload]).with_flags(name=run.name)
            result = dict(variant=run.variant, status=row["status"], error=row.get("error"), round=run.repeat)
            result.update(batch=batch, run_s=spent, **{k: row.get(k) for k in MEASURED})
            return result
        start = run.batch_size
        began = time.monotonic()
        try:
            fits, fails, why, probes, error = search(run, start, limit, job)
        except KeyboardInterrupt:
            return None
        row = dict(variant=run.variant, max_batch=fits, first_failed_batch=fails, why_it_stops=why, probes=probes)
        row.update(memory_limit_mib=limit, error=error, workload=run.workload)
        row["model"] = run.model  # memory.png matches it to the bench's rows
        while fits is not None and error is None and not job.over():  # its speed at the largest batch
            measured = job.launch(sized_run(run, fits, self.works[run.workload]), memory_limit_mib=limit)
            if measured is None:
                return None
            if measured["status"] == "ok":
                row.update({k: measured.get(k) for k in MEASURED})
                break
            if not out_of_memory(measured):
                row["error"] = f"the run at batch {fits} failed: {measured['error']}"
                break
            # a whole run can need more than a short probe (on a CPU the allocator's address space grows over the
            # steps): the largest batch is the one a whole run trains, a step down at a time
            fails, fits = fits, step_down(fits, run.processes)
            row.update(max_batch=fits, first_failed_batch=fails, why_it_stops="out of memory in a whole run")
        row["run_s"] = row["search_s"] = time.monotonic() - began
        row["status"] = "failed" if why == "the budget was spent" else "ok"  # a search the budget cut runs again
        return row

    def say(self, run, record):
        if timed(run):
            if record["status"] != "ok":
                return f"FAILED at batch {record['batch']:,}: {record.get('error')}"
            return f"{record['samples_per_s']:,.1f} samples/s at batch {record['batch']:,} (round {record['round']})"
        return line(record)

    def finish(self, records, unrun, how):
        searches = [r for r in records if not timed(r["run"])]
        table = finish(
            searches, [(r, why) for r, why in unrun if not timed(r)], [r for r in records if timed(r["run"])]
        )
        spent = sum(r.get("run_s") or 0 for r in records)
        write(self.config.outputs.out, table, self.info, spent)
        out = self.config.outputs.out
        print(f"max batch: {spent / 60:.1f} min in runs; {out}/max_batch.md, max_batch.csv, max_batch.png")
        return 0


def run(config):
    """The largest batch each training variant affords: the plan's runs at other batches."""
    info, logs = planned_bench(config)
    gpu_count = info["gpu_count"]
    if not gpu_count and not config.own.memory_limit:
        raise BenchError("--max-batch on a CPU needs --memory-limit MIB: without it a probe would take all of the"
                         " machine's memory")  # fmt: skip
    if gpu_count and config.own.memory_limit:
        raise BenchError("--memory-limit is a CPU's stand-in for a GPU's memory: on a GPU the device's memory is the"
                         " limit")  # fmt: skip
    whole = varied(config, budget="none")  # the budget is the mode's, not the bench's plan's
    runs, works, _ = plan.make_plan(whole, gpu_count, info["cpu_cores"], logs, info["cpu_bf16_native"], calibrate.steps)
    if config.dry_run:
        train = measured_rows(runs)
        budget_s = cost.budget_s(config.limits.budget, gpu_count)
        rounds = config.limits.repeats if isinstance(config.limits.repeats, int) else ROUNDS
        print(f"{say_estimate(train, bool(gpu_count), budget_s, rounds)}:")
        for r in train:
            print(f"  {r.variant}: {shlex.join(r.with_flags(flags={'--batch-size': 'N'}).cmd)}")
        return
    try:
        main(config, info, runs, logs, works)
    finally:
        redraw(config.outputs.out, info)


def measured_rows(runs):
    """The plan's training rows a search runs for: round 1's, less the ceilings and the baselines beside the rows."""
    return [r for r in runs if r.kind == "train" and r.repeat == 1 and not r.beside and "synthetic" not in r.variant]


def main(config, info, runs, logs, works):
    """Search each training run's variant through the executor; write and print the table. works: the plan's work
    of each workload."""
    train = measured_rows(runs)
    if not train:
        raise BenchError("--max-batch searches training variants: --variants names none (the ceilings are left out)")
    gpu = bool(info["gpu_count"])
    budget_s = cost.budget_s(config.limits.budget, gpu)
    memory = config.own.memory_limit
    limit = f"{memory:,} MiB of address space per process" if memory else "the GPU's memory"
    rounds = config.limits.repeats if isinstance(config.limits.repeats, int) else ROUNDS
    print(f"{say_estimate(train, gpu, budget_s, rounds)}; in {limit}", flush=True)
    timed_s = {run.variant: run.estimate_s + cost.compile_s(run, gpu, repeat=1) for run in train}
    for run in train:
        run.estimate_s = estimate_s([run], gpu, PROBES)
    timeout = cost.timeout_s(config.limits.timeout, gpu)
    state = MaxBatch.State(memory_limit=memory, rounds=rounds, timed_s=timed_s, timeout=timeout)
    mode = MaxBatch(config, info, logs.name, train, works, state)
    execute.start(mode)
    execute.execute(mode, budget_s, config.limits.chunk)


def finish(rows, unrun=(), rounds=()):
    """The table: a row per variant (those not searched too: unrun, (run, why) each), with ratios to the baseline.
    rounds: the records of the rounds at the largest batches; where they ran, a variant's samples/s is their median
    and its speed against the baseline's is paired by round (intervals.interval), with its answer; else the ratio of
    the two measured runs alone."""
    rows = [*rows, *(dict(variant=r.variant, why_it_stops=f"not searched: {why}") for r, why in unrun)]
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    table["speed_answer"] = table["speed_answer"].astype(object)
    ok = pd.DataFrame([r for r in rounds if r.get("status") == "ok" and r.get("samples_per_s")])
    if not ok.empty:
        lowest = ok.groupby("variant")["batch"].min()  # a round that stepped down: the batch every round trained
        for variant, batch in lowest.items():
            at = (table["variant"] == variant) & (table["max_batch"] > batch)
            table.loc[at, "first_failed_batch"] = table.loc[at, "max_batch"]
            table.loc[at, "max_batch"] = batch
            table.loc[at, "why_it_stops"] = "out of memory in a round"
        table["rounds"] = table["variant"].map(ok.groupby("variant")["repeat"].nunique())
        for column in MEASURED:  # the rounds' medians, where they ran, rather than the measured run's alone
            median = table["variant"].map(ok.groupby("variant")[column].median()) if column in ok else None
            if median is not None:
                table[column] = median.where(median.notna(), table[column])
    base = table[table["variant"] == "baseline"]
    if not base.empty and pd.notna(base["max_batch"].iloc[0]):
        table["batch_vs_baseline"] = table["max_batch"] / base["max_batch"].iloc[0]
        if pd.notna(base["samples_per_s"].iloc[0]):
            table["speed_vs_baseline"] = table["samples_per_s"] / base["samples_per_s"].iloc[0]
    if not ok.empty and "baseline" in set(ok["variant"]):
        for variant, ratios in intervals.paired(ok, "samples_per_s", "baseline").items():
            if variant == "baseline" or not ratios:
                continue
            estimate, low, high = intervals.interval(ratios)
            at = table["variant"] == variant
            table.loc[at, ["speed_vs_baseline", "speed_low", "speed_high"]] = [estimate, low, high]
            table.loc[at, "speed_answer"] = rules.classify(low, high)
    return table


def write(out, table, info, spent):
    out = Path(out)
    write_whole(out / "max_batch.csv", lambda tmp: table.to_csv(tmp, index=False))
    where = machine.where(info)
    limit = table["memory_limit_mib"].dropna()
    memory = f"{limit.iloc[0]:,.0f} MiB of address space per process" if not limit.empty else "the GPU's memory"
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    render.write(SHOWS, out, table, f"The largest batch in {memory}: {where} ({when}, {spent / 60:.1f} min)")


# ----------------------------------------------------------------------------- what it shows: its words, its page
# (max_batch.md) and its plot (max_batch.png), rendered by bench/outputs/


def iso_words(row):
    """'faster (95% interval 1.10x to 1.33x over 3 paired rounds)', from a row's rounds at the largest batches."""
    answer = ANSWER_WORDS.get(row["speed_answer"], row["speed_answer"])
    if not present(row.get("speed_low")):
        return f"{answer} (one round: no interval)"
    return (f"{answer} (95% interval {row['speed_low']:.2f}x to {row['speed_high']:.2f}x over"
            f" {plural(row['rounds'], 'paired round')})")  # fmt: skip


def line(row):
    """One sentence for a variant."""
    if pd.isna(row.get("max_batch")):
        error = f": {row['error']}" if present(row.get("error")) else ""
        return f"{row['variant']}: no batch found ({row['why_it_stops']}{error})"
    text = f"{row['variant']}: batch {row['max_batch']:,.0f} fits"
    if present(row.get("first_failed_batch")):
        text += f", {row['first_failed_batch']:,.0f} does not ({row['why_it_stops']})"
    else:
        text += f" ({row['why_it_stops']})"
    if present(row.get("samples_per_s")):
        text += f"; {row['samples_per_s']:,.1f} samples/s there"
        if present(row.get("epoch_starts_timed")) and row["epoch_starts_timed"] > 0:
            steady = row.get("median_step_samples_per_s")
            steady = f", {steady:,.1f} samples/s between them" if present(steady) else ""
            text += (f" ({row['epoch_starts_timed']:.0f} epoch starts in the window: an epoch is a few steps at this"
                     f" batch{steady})")  # fmt: skip
    if present(row.get("batch_vs_baseline")) and row["variant"] != "baseline":
        text += f"; {row['batch_vs_baseline']:.2f}x the baseline's batch"
        if present(row.get("speed_vs_baseline")):
            text += f" at {row['speed_vs_baseline']:.2f}x its speed at its own"
        if present(row.get("speed_answer")):
            text += f", {iso_words(row)}"
    if present(row.get("error")):
        text += f" ({row['error']})"
    return text


def speed_range(row):
    return f"{row['speed_low']:.2f}x to {row['speed_high']:.2f}x" if present(row["speed_low"]) else ""


TABLE = (
    ("variant", lambda r: r["variant"]),
    ("max batch", lambda r: fmt(r["max_batch"], "{:,.0f}")),
    ("first that failed", lambda r: fmt(r["first_failed_batch"], "{:,.0f}")),
    ("why it stops", lambda r: str(r["why_it_stops"])),
    ("samples/s there", lambda r: fmt(r["samples_per_s"], "{:,.1f}")),
    ("batch vs baseline", lambda r: fmt(r["batch_vs_baseline"], "{:.2f}x")),
    ("speed vs baseline at its largest", lambda r: fmt(r["speed_vs_baseline"], "{:.2f}x")),
    ("95% interval", speed_range),
    ("answer", lambda r: fmt(r["speed_answer"], "{}")),
)


def blocks(table):
    """max_batch.md: the largest batch of each variant and, after its rounds, its speed there (the iso-memory
    comparison)."""
    records, rounds, said = table.to_dict("records"), table["rounds"].max(), []
    if present(rounds):
        said = [f"Each variant timed at its own largest batch in {plural(rounds, 'paired round')}; its speed against"
                " the baseline's at the baseline's own largest batch: the iso-memory comparison."]  # fmt: skip
    return [*said, Rows(records, TABLE), Bullets([line(r) for r in records])]


def figure(table, title):
    """max_batch.png: each variant's largest batch, its speed there beside it."""
    found = table[table["max_batch"].notna()].to_dict("records")
    texts = [f" {r['max_batch']:,.0f}" + (f", {r['samples_per_s']:,.1f} samples/s" if present(r["samples_per_s"])
             else "") for r in found]  # fmt: skip
    bars = Bars([r["max_batch"] for r in found], [r["variant"] for r in found], "largest global batch that trains",
                texts, colour="tab:green", margin=0.35)  # fmt: skip
    return Figure([bars], (7.5, 0.5 * max(1, len(found)) + 1.6), title)


SHOWS = Shows("max_batch.md", "max_batch.png", "the largest batch of each variant and its speed there", blocks, figure)


def redraw(out, info):
    """After --max-batch: the bench's plots again, memory.png gaining each row's largest batch."""
    if (out / "runs.csv").exists() and (out / "max_batch.csv").exists():
        try:
            speed.write_outputs(out, read_runs(out / "runs.csv")["bench_id"].iloc[-1], info)
        except BenchError as e:  # the mode's own table is written: say why the bench's plots are not redrawn
            print(f"warning: the bench's plots in {out} are as they were: {e}", file=sys.stderr)


def older(table, summary):
    """max_batch.csv as this version reads it: a table written before it named its workload and model (2026-11-24)
    searched the bench's one workload and model, its summary's where it has one; where it has several, the table
    cannot be matched to them (said once, on stderr) and is left out."""
    if table is None or {"workload", "model"} <= set(table):
        return table
    train = summary[summary["kind"] == "train"]
    if train["workload"].nunique() != 1 or train["model"].nunique() != 1:
        print("warning: max_batch.csv names no workload or model, and the bench trained several: the summary goes on"
              " without --max-batch's speeds", file=sys.stderr)  # fmt: skip
        return None
    return table.assign(workload=train["workload"].iloc[0], model=train["model"].iloc[0])


def with_largest(summary, table):
    """The training rows with a --max-batch run's rounds at the largest batches (its max_batch.csv, read into a
    frame), by workload, model and variant: each row's largest batch and its speed there against the baseline's at
    the baseline's own largest batch (paired rounds), with its answer; table None or without rounds changes nothing."""
    if table is None or table.empty or "speed_answer" not in table or table["speed_answer"].isna().all():
        return summary
    found = table.dropna(subset=["speed_answer"]).set_index(["workload", "model", "variant"])
    train = summary.index[summary["kind"] == "train"]
    keys = [(summary.at[i, "workload"], summary.at[i, "model"], summary.at[i, "variant"]) for i in train]
    columns = dict(largest_batch="max_batch", largest_batch_vs_baseline="batch_vs_baseline",
                   largest_speedup="speed_vs_baseline", largest_speedup_low="speed_low",
                   largest_speedup_high="speed_high", largest_answer="speed_answer")  # fmt: skip
    for mine, theirs in columns.items():
        values = [found.at[key, theirs] if key in found.index else None for key in keys]
        if mine != "largest_answer":
            values = [math.nan if v is None else float(v) for v in values]
        summary[mine] = pd.Series(dtype=object if mine == "largest_answer" else float)
        summary.loc[train, mine] = values
    return summary


def numbers(summary, out):
    """A bench's summary with a --max-batch run's table in the same results folder (max_batch.csv), by workload, model
    and variant: each training row's largest batch and its speed there against the baseline's at its own largest
    (with_largest, where the table has rounds), and the largest batch found with its ratio to the
    baseline's (largest_batch_found, largest_batch_found_x: memory.png says them beside each row's bars)."""
    table = older(table_in(out, "max_batch.csv", ("variant", "max_batch"), "--max-batch's speeds"), summary)
    if table is None:
        return summary
    summary = with_largest(summary.copy(), table)  # a new frame: the one given stays as it was
    found = table.dropna(subset=["max_batch"]).set_index(["workload", "model", "variant"])
    found = found[~found.index.duplicated(keep="last")]
    keys = list(zip(summary["workload"], summary["model"], summary["variant"]))
    train = summary["kind"] == "train"
    for mine, theirs in ("largest_batch_found", "max_batch"), ("largest_batch_found_x", "batch_vs_baseline"):
        values = [found.at[key, theirs] if key in found.index and theirs in found else None for key in keys]
        summary[mine] = pd.Series([float(v) if v is not None and t else math.nan for v, t in zip(values, train)],
                                  index=summary.index)  # fmt: skip
    return summary


def cell(row):
    """'1.21x (1.10x to 1.33x), faster, at 4.00x the batch' ('' for a row --max-batch did not time)."""
    row = SummaryRow.of(row)
    answer = row.largest_answer
    if not isinstance(answer, str):
        return ""
    low, high = row.largest_speedup_low, row.largest_speedup_high
    interval = f" ({low:.2f}x to {high:.2f}x)" if present(low) and present(high) else ""
    return f"{row.largest_speedup:.2f}x{interval}, {answer}, at {row.largest_batch_vs_baseline:.2f}x the batch"


def words(row):
    """'at its largest batch (1,024, 4.00x the baseline's) 1.21x the baseline's speed at the baseline's own largest
    (95% interval 1.10x to 1.33x): faster (max_batch.md)' ('' without --max-batch's rounds)."""
    row = SummaryRow.of(row)
    answer = row.largest_answer
    if not isinstance(answer, str):
        return ""
    low, high = row.largest_speedup_low, row.largest_speedup_high
    interval = f" (95% interval {low:.2f}x to {high:.2f}x)" if present(low) and present(high) else ""
    batch = f"{row.largest_batch:,.0f}, {row.largest_batch_vs_baseline:.2f}x the baseline's"
    return (f"at its largest batch ({batch}) {row.largest_speedup:.2f}x the baseline's speed at the baseline's own"
            f" largest{interval}: {ANSWER_WORDS.get(answer, answer)} (max_batch.md)")  # fmt: skip


def changes(row):
    """Whether --max-batch's rounds give this row another answer at its largest batch than at the bench's batch."""
    row = SummaryRow.of(row)
    answer = row.largest_answer
    return isinstance(answer, str) and answer != "unsettled" and answer != row.speed_answer


def aside(row):
    """' (1.21x at its largest batch: faster)' where its answer there is another than at the bench's batch, else ''."""
    row = SummaryRow.of(row)
    return (
        f" ({row.largest_speedup:.2f}x at its largest batch: {ANSWER_WORDS[row.largest_answer]})"
        if changes(row)
        else ""
    )


def mark(row):
    """'largest batch 1,024 (4.00x)' beside a row's memory bars where the search found its largest batch, else ''."""
    row = SummaryRow.of(row)
    batch, times = row.largest_batch_found, row.largest_batch_found_x
    if batch is None or pd.isna(batch):
        return ""
    return f"largest batch {batch:,.0f}" + (f" ({times:.2f}x)" if pd.notna(times) else "")


# a bench's summary in the same folder: each row's speed at its largest batch in its column and its words, said in
# the answer first where it answers otherwise there, and the largest batch found beside its memory bars
JOINS = Joins(numbers, column=("at its largest batch (--max-batch)", cell), said=words, aside=aside, mark=mark,
              marked="largest batch: --max-batch, x the baseline's",
              fields=("largest_batch_found", "largest_batch_found_x"))  # fmt: skip


PROBE_S = dict(cpu=15, gpu=25)  # --max-batch: a probe (CPU: measured here, 9-15 s), a compile apart


def estimate_s(runs, gpu, probes):
    """--max-batch: probes probes of a variant and one measured run, each a new process at a new batch (a new
    shape), so a compiled variant compiles cold in every one of them."""
    where = "gpu" if gpu else "cpu"
    return sum((probes + 1) * (PROBE_S[where] + cost.compile_s(r, gpu, repeat=1)) for r in runs)


MODE = Registration("max_batch", run, asked=lambda flags: flags.max_batch, add_flags=add_flags,
                    check_flags=check_flags, own=read(Flags), outputs=("max_batch.csv", "max_batch.md",
                    "max_batch.png"), executes=MaxBatch, only=("memory_limit",), joins=JOINS,
                    shows=SHOWS)  # fmt: skip
