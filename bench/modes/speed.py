"""The bench itself, the default mode: every variant on the same work, in rounds, a row each in runs.csv, then
summary.csv, summary.md, the plots and report.html from them (written again by --summarize and --readme).

Speed is the mode as bench/stages/running/execute.py runs it; with --repeats auto it adds rounds for the rows whose
interval is still wide (next_round). write_outputs summarizes a bench's rows and writes every output; report prints
them, and each row's change against the saved baseline of this machine's class."""

import dataclasses
import importlib.util
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from bench import BenchError, catalogue, logs_of, schema, write_whole
from bench.modes import Registration, joined, new_id, shown, this_machine
from bench.observe.machine import where as machine_where
from bench.outputs import markdown, plots, verdicts
from bench.outputs import report as html_report
from bench.outputs.plots import plot_memory, plot_throughput, plot_time, plot_tradeoff
from bench.stages import cost
from bench.stages.planning import build, fit, plan, planned, slurm
from bench.stages.records import baseline, profiles, record
from bench.stages.running import calibrate, execute
from bench.stages.statistics import causes, rules, summarize


def title(summary, machine, workload=None):
    train = summary[summary["kind"] == "train"].dropna(subset=["model"])
    if workload is not None:
        train = train[train["workload"] == workload]
    where = machine_where(machine)
    if train.empty:
        return where
    r = train.iloc[0]
    return (
        f"{where}; {r.model} on {r.workload} ({r.image_size:.0f} px), global batch {r.global_batch_size:.0f}, "
        f"{r.steps_timed:.0f} steps timed"
    )


def margin(config):
    """The margin a bench's speed answers are read against: --margin, else bench/stages/statistics/rules.py MARGIN."""
    return rules.MARGIN if config.limits.margin is None else config.limits.margin


def summary_of(runs, out=None, profiled=None, margin=rules.MARGIN):
    """The summary every output is drawn from, down one way: the statistics of the runs
    (bench/stages/statistics/summarize.py), with what each mode's table in the results folder out adds (a registration's
    joins, their numbers: --parity's verdicts, --max-batch's speeds at the largest batches, --tune-loader's answer; none
    without out); each row's derived fields (rules.derived) and causes (bench/stages/statistics/causes.py, with the
    operators of a bench with --profile: profiled, from bench/stages/records/profiles.py); then the words
    (bench/outputs/verdicts.py), a verdict for every row, what the modes' tables add said in it. summary.csv holds its
    columns in_order."""
    numbers = summarize.summarize(runs, margin)
    for joins in joined():
        numbers = joins.numbers(numbers, out) if out is not None else numbers
        numbers = numbers.assign(**{field: None for field in joins.fields if field not in numbers})
    rows = causes.with_causes(rules.derived(causes.with_profiles(numbers, profiled)))
    return summarize.in_order(verdicts.with_verdicts(rows, joined()), derived=True)


def write_outputs(out, bench_id, machine, margin=rules.MARGIN):
    """summary.csv, summary.md and both plots from the rows of bench_id, its speed answers against margin; return the
    summary. A run tried again (--resume) counts by its last row."""
    runs = record.read_runs(out / "runs.csv")
    runs = runs[runs["bench_id"] == bench_id].drop_duplicates("run", keep="last")
    if runs.empty:
        return None
    profiled = profiles.gather(out, bench_id, runs)  # --profile: each technique's operators, read by the causes
    summary = summary_of(runs, out, profiled, margin)
    when = runs["time_utc"].iloc[0]
    headings = {w: title(summary, machine, w) for w in summary["workload"].unique()}
    table = summarize.in_order(summary)  # summary.csv: the numbers, causes and verdicts, not each row's derived fields
    write_whole(out / "summary.csv", lambda tmp: table.to_csv(tmp, index=False))
    rounds = [logs_of(out, bench_id) / "rounds.txt", out / "rounds.txt"]  # why --repeats auto stopped adding rounds
    notes = [path.read_text().strip() for path in rounds if path.exists()][:1]
    text = markdown.markdown(summary, headings, f"{when}, bench {bench_id}", notes, joined())
    write_whole(out / "summary.md", lambda tmp: Path(tmp).write_text(text))
    plot_throughput(summary, out / "throughput.png", headings)
    plot_memory(summary, out / "memory.png", headings, joined())
    plot_tradeoff(summary, out / "tradeoff.png", headings)
    plot_time(summary, out / "time.png", headings)
    learned = plots.gather_curves(out, bench_id, runs)
    if learned:
        plots.plot_curves(learned, out / "curves.png", headings)
    notes = [verdicts.settled_note(summary), *notes, verdicts.diverged_note(summary), verdicts.busy_note(summary)]
    pages = shown()  # the page and plot of every mode that ran in out too: report.html holds them
    html_report.write(out, summary, runs, machine, headings, (when, bench_id), notes, profiles.shown(profiled), pages,
                      joined())  # fmt: skip
    return summary


def report(summary, out, machine, baseline_dir):
    if summary is None:
        print("no finished runs: nothing to summarize")
        return
    print()
    print((out / "summary.md").read_text())
    saved = baseline.load(machine["machine_class"], baseline_dir)
    if saved is not None:
        lines = baseline.compare(summary, saved)
        where = baseline_dir / machine["machine_class"]
        print(f"against the saved {where}:" if lines else f"{where} holds no run of the same work")
        for line in lines:
            print("  " + line)
    plots = "throughput.png, memory.png, tradeoff.png, time.png" + (
        ", curves.png" if (out / "curves.png").exists() else ""
    )
    print(f"tables and plots: {out}/summary.csv, summary.md, {plots}; every run: {out}/runs.csv")
    print(f"all of it in one page, with each technique's code beside its numbers: {out}/report.html")


def plain(value):
    """A value read back from a csv as Python's own (numpy's bool and integers do not go into JSON)."""
    return None if pd.isna(value) else getattr(value, "item", lambda: value)()


def saved_machine(folder, runs):
    """The machine a saved bench ran on: its machine.json, else the machine fields of its last run."""
    if (folder / "machine.json").exists():
        return json.loads((folder / "machine.json").read_text())
    fields = {f.name for f in schema.FIELDS if f.source == "machine"}
    last = runs.iloc[-1]
    info = {name: plain(last.get(name)) for name in fields}
    for name in "gpu_count", "cpu_cores":  # read back from a csv as floats
        info[name] = int(info[name] or 0)
    for name in "cpu_bf16_native", "gpu_bf16_native", "gpu_tf32":
        if info.get(name) is not None and not isinstance(info[name], bool):
            info[name] = str(info[name]).lower() == "true"
    return info


FEWEST_TIMED = 5  # the fewest steps a later round's run of a slow row times (Speed.sized)


def next_round(out, bench_id, works, context, repeat, margin=rules.MARGIN):
    """--repeats auto: (the runs of round `repeat`, None, what the round holds and why), or (None, why no round is
    added, ""). A round holds the reference rows and every row that needs one (rules.needs_rounds: its interval
    still too wide to decide with, and not beyond what the bench's rounds could settle): the statistics alone decide
    (bench/stages/statistics/summarize.py), not the words drawn from them."""
    if repeat > rules.MAX_ROUNDS:
        return None, f"{rules.MAX_ROUNDS} rounds is the most --repeats auto runs", ""
    rows = record.read_runs(out / "runs.csv")
    summary = summarize.summarize(rows[rows["bench_id"] == bench_id].drop_duplicates("run", keep="last"), margin)
    asked = summary[summary["speed_answer"].notna() & (summary["runs_ok"] > 0)]
    needs = {r.variant: rules.needs_rounds(r._asdict()) for r in asked.itertuples(index=False)}
    open_rows = [row for _, row in asked.iterrows() if needs[row.variant][0]]
    techniques = [r.variant for r in asked.itertuples(index=False) if technique_row(r._asdict())]
    decided = f"{sum(needs[v][1] == 'decided' for v in techniques)} of {len(techniques)} technique rows decided"
    if not open_rows:
        return None, (f"{decided} (faster, slower or within +-{margin:.0%}), the rest as narrow as"
                      f" +-{rules.PRECISION:.0%} or beyond {rules.MAX_ROUNDS} rounds at this"
                      " noise"), ""  # fmt: skip
    left = {row.variant: rules.rounds_to_settle(row) - schema.num(row.rounds_paired) for row in open_rows}
    open_rows.sort(key=lambda row: -math.inf if math.isnan(left[row.variant]) else -left[row.variant])  # most first
    wide = {row.variant for row in open_rows}
    context = planned.Context.saved(context)  # as plan.json keeps it
    variants = [v for v in context.variants if v == "baseline" or v in wide]
    loaders = [v for v in context.loaders if v in wide]
    loaders = [v for v in context.loaders if v == "loader" or v in loaders] if loaders else []
    if variants == ["baseline"]:
        variants = []
    closed = [f"{v} ({why})" for v, (more, why) in needs.items() if not more]
    said = "; ".join(
        [decided]
        + [", ".join(f"{row.variant} open ({rounds_left(left[row.variant])})" for row in open_rows)]
        + ([f"no more rounds for {', '.join(closed)}"] if closed else [])
    )
    return build.round_runs(repeat, works, dataclasses.replace(context, variants=variants, loaders=loaders)), None, said


def technique_row(row):
    """A row whose answer is a technique's: a training row on real data, not the baseline against itself (the rule's
    check) nor a ceiling (a limit); the rows "N of M technique rows decided" counts."""
    return row.get("kind") == "train" and row.get("dataset") != "synthetic" and row.get("variant") != catalogue.SELF


def rounds_left(more):
    """'about 3 more rounds', 'one round: no estimate yet', from rounds_to_settle less the rounds run."""
    if math.isnan(more):
        return "one round: no estimate yet"
    if not math.isfinite(more):
        return "no count of rounds decides it"
    return f"about {max(1, math.ceil(more))} more round{'s' if math.ceil(more) > 1 else ''}"


class Speed(execute.Mode):
    """The bench: every variant on the same work, in rounds; a row each in runs.csv; the summary, plots, report.
    Its state: auto (--repeats auto: rounds are added after the planned ones), the plan's context to add them from,
    and --profile and --tensorboard as the bench began."""

    name = "speed"

    @dataclass(frozen=True)
    class State(execute.State):
        auto: bool = False
        context: dict | None = None
        profile: bool = False
        tensorboard: bool = False

    def groups(self, runs):
        return build.rounds(runs)

    def timeout(self, run):
        return self.works[run.workload].timeout

    def prepare(self):
        super().prepare()
        upgraded = record.prepare_runs_file(self.config.outputs.out / "runs.csv")
        if upgraded:
            print(upgraded)
        if self.state.tensorboard or self.config.outputs.tensorboard:
            print(f"the curves, as they come: tensorboard --logdir {self.logs / 'tensorboard'}", flush=True)

    def do(self, run, job):
        # --profile and --tensorboard as the bench began (a resumed bench keeps them), or as a --resume adds them
        profile = (self.state.profile or self.config.outputs.profile) and run.repeat == 1 and not run.beside
        run = self.sized(self.warmed(run))
        row = job.launch(run, tensorboard=self.state.tensorboard or self.config.outputs.tensorboard, profile=profile)
        if row is not None:
            row.update(bench_id=self.bench_id, workload=run.workload, **self.info)
        return row

    def warmed(self, run):
        """A training run of a later round warms up as long as the rows' earlier runs needed (the most of every row's
        warmup_steady_steps in its workload; 2 at least, a compiled first step and the FLOP count), its timed steps
        the same: the plan's warm-up where an earlier run did not say, never more than it. Every row of a workload
        cuts alike, so that they train the same steps, and their learning-rate schedules and last losses stay
        comparable (bench/stages/statistics/rules.py learning). Its command in runs.csv says which."""
        if run.kind != "train" or run.repeat == 1 or "--warmup-steps" not in run.flags:
            return run
        needed = [n for (workload, _), needs in self.known_needs().items() if workload == run.workload for n in needs]
        warmup, steps = int(run.flags["--warmup-steps"]), int(run.flags["--steps"])
        mine = self.known_needs().get((run.workload, run.variant))
        if not needed or not mine or None in needed or max(2, *needed) >= warmup:
            return run
        cut = max(2, *needed)
        return run.with_flags(flags={"--steps": steps - warmup + cut, "--warmup-steps": cut})

    def sized(self, run):
        """A training run of a later round times about the seconds the baseline's window takes, in whole steps: a row
        whose steps are slower (bf16 emulated, say) times fewer of them, FEWEST_TIMED at least and never more than
        planned, so that a round lasts about as long whichever rows it holds. Its rate is still images over whole
        steps; its first round ran the plan's steps (its learning and accuracy are read there, at the baseline's
        steps), and gave the step times read here. Its command in runs.csv says how many it timed."""
        if run.kind != "train" or run.repeat == 1 or "--steps" not in run.flags or run.variant == "baseline":
            return run
        windows, steps = self.known_windows(), self.known_steps()
        target = windows.get((run.workload, "baseline"))
        step_s = steps.get((run.workload, run.variant))
        if not target or not step_s:
            return run
        warmup, total = int(run.flags["--warmup-steps"]), int(run.flags["--steps"])
        timed = max(FEWEST_TIMED, math.ceil(target / step_s))
        if timed >= total - warmup:
            return run
        return run.with_flags(flags={"--steps": warmup + timed})

    def known_windows(self):
        """{(workload, variant): the median window seconds of its finished runs}."""
        return {key: statistics.median(w for w, _ in found) for key, found in self.timings().items()}

    def known_steps(self):
        """{(workload, variant): the median seconds of a timed step of its finished runs}."""
        return {key: statistics.median(s for _, s in found) for key, found in self.timings().items()}

    def timings(self):
        """{(workload, variant): [(window seconds, seconds a step)] of its finished runs that timed a window}."""
        found = {}
        for key, rows in self.finished().items():
            timed = [(r["window_s"], r["window_s"] / r["steps_timed"]) for r in rows if timed_window(r)]
            if timed:
                found[key] = timed
        return found

    def known_needs(self):
        """{(workload, variant): the warmup_steady_steps of its finished runs (None where a run did not say)}."""
        return {
            key: [None if pd.isna(r.get("warmup_steady_steps")) else int(r["warmup_steady_steps"]) for r in rows]
            for key, rows in self.finished().items()
        }

    def finished(self):
        """{(workload, variant): [its finished training rows]} of this bench: read from runs.csv the first time (a
        resumed bench's rows finished before), then noted as rows come (keep)."""
        if getattr(self, "done", None) is None:
            self.done = {}
            for row in self.recorded():
                self.note(row)
        return self.done

    def note(self, row):
        if row.get("kind") == "train" and row.get("status") == "ok":
            self.done.setdefault((row.get("workload"), row.get("variant")), []).append(row)

    def keep(self, row):
        record.append_row(self.config.outputs.out / "runs.csv", row)
        if getattr(self, "done", None) is not None:  # else read with the rest when first asked
            self.note(row)

    def recorded(self):
        if not (self.config.outputs.out / "runs.csv").exists():
            return []
        rows = record.read_runs(self.config.outputs.out / "runs.csv")
        return rows[rows["bench_id"] == self.bench_id].to_dict("records")

    def say(self, run, row):
        rate = row.get("samples_per_s")
        result = (
            f"{rate:,.1f} {'samples' if run.kind == 'train' else 'images'}/s" if rate else "FAILED: " + row["error"]
        )
        busy = f"; BUSY: {row['busy_reason']}" if row.get("busy") else ""
        diverged = f"; DIVERGED at step {row['diverged_step']}" if row.get("diverged_step") is not None else ""
        return f"{result} ({row['wall_s']:.1f} s{busy}{diverged})"

    def more(self, runs, records):
        if not self.state.auto:
            return None, None
        group, ended, said = next_round(self.config.outputs.out, self.bench_id, self.works, self.state.context,
                                        max(r.repeat for r in runs) + 1, margin(self.config))  # fmt: skip
        if group is not None:
            spent = sum(execute.took(r) or 0.0 for r in records) / 60
            print(f"round {group[0].repeat}, {len(group)} runs, after {spent:.1f} min of runs: {said}", flush=True)
        return group, ended

    def finish(self, records, unrun, how):
        out = self.config.outputs.out
        if how["ended"] or (how["paused"] and self.state.auto and not self.config.limits.chunk):
            note = f"Rounds stopped: {how['ended'] or how['paused']}."
            write_whole(self.logs / "rounds.txt", lambda tmp: Path(tmp).write_text(note + "\n"))
        summary = write_outputs(out, self.bench_id, self.info, margin(self.config))
        report(summary, out, self.info, self.config.outputs.baseline_dir)
        failed = [r for r in records if r.get("status") != "ok"]
        if failed and not how["stopped"]:
            print(
                f"{len(failed)} of {len(records)} runs failed: see the error column of {out}/runs.csv and {self.logs}/"
            )
            return 1
        return 0


def timed_window(row):
    """Whether a finished run timed a window: its seconds and steps recorded."""
    window, steps = row.get("window_s"), row.get("steps_timed")
    return bool(window) and bool(steps) and not pd.isna(window)


def run(config):
    """Plan the bench for this machine, store the plan, and run it."""
    started = time.monotonic()
    info = this_machine()
    gpu_count = info["gpu_count"] if config.gpus is None else config.gpus
    saved = saved_costs(config, info, gpu_count)
    bench_id = new_id()
    logs = logs_of(config.outputs.out, bench_id)
    if not config.dry_run:
        logs.mkdir(parents=True, exist_ok=True)
    native = info["cpu_bf16_native"]
    runs, works, fitted = plan.make_plan(config, gpu_count, info["cpu_cores"], logs, native, calibrate.steps, saved)
    if config.dry_run:
        plan.print_plan(runs, works, gpu_count)
        fit.print_estimate(fitted, runs)
        return
    fit.print_estimate(fitted, runs)
    recorded = dict(profile=config.outputs.profile, tensorboard=config.outputs.tensorboard)
    state = Speed.State(auto=fitted.auto, context=asdict(fitted.context), **recorded)
    bench = Speed(config, info, bench_id, runs, works, state)  # kept for --resume
    execute.start(bench)
    execute.execute(bench, fitted.budget_s, config.limits.chunk, time.monotonic() - started)


def saved_costs(config, info, gpu_count):
    """A GPU plan's costs from the saved GPU runs (baseline/): this GPU's where it has some, else every GPU's."""
    if not gpu_count:
        return {}
    runs = baseline.gpu_runs(config.outputs.baseline_dir)
    return cost.saved_costs(runs, info.get("gpu_name")) if not runs.empty else {}


def check_flags(flags, config):
    """The launcher's flags (bench/stages/planning/slurm.py), and that --tensorboard can record."""
    slurm.check_flags(config)
    if config.outputs.tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise BenchError(f"--tensorboard needs the tensorboard package: {sys.executable} -m pip install tensorboard")


# the default mode, run when no other is asked for; its own flags are the launcher's (how its DDP rows start:
# --launcher, --nodes), the flags every mode shares being cli.py's
MODE = Registration(
    "speed",
    run,
    add_flags=slurm.add_flags,
    check_flags=check_flags,
    outputs=("runs.csv", *baseline.OUTPUTS),
    executes=Speed,
    only=("tensorboard", "profile", "launcher", "nodes"),  # and --resume (the first two), --scaling (the launcher's)
)
