"""python -m bench --tune-loader: the data pipeline's settings for this machine. The most common speed problem is no
technique at all: the model waits for its data. The sweep says which loader settings to use here, with the flags to
copy, or that the loader is not the limit.

1. The loader alone (loader.py --bench, the bench's loader row) at every setting of the grid: --workers from 0 to the
   cores or --workers (0, then the powers of two below it, and it), and for each count above 0 --prefetch-factor 2
   and 4, and on a GPU --pin-memory on and off; every other loader row of the catalogue at its --workers counts alike
   (DALI's threads, loader_dali.py --workers, where DALI is installed: the row's `needs`). One run each: a first look,
   which picks the candidates. --persistent-workers stays on (the scripts' default): it changes only an epoch's start,
   where off starts every loading process again, which costs time and saves nothing but the processes' memory between
   epochs; a loader run alone does not reach an epoch's end.
2. Training at the CANDIDATES settings the loader alone delivered most images/s at (other than the bench's own), and
   at the bench's own, in --repeats paired rounds (3 with auto) as the speed bench's rounds (the order reversed every
   other round), each round with the ceiling (training on synthetic data: no loading at all). Each setting's speed
   against the bench's own is paired by round: the geometric mean, its 95% interval and the bench's answer
   (bench/stages/statistics/summarize.py); beside it its data wait, and on a CPU the cores the loader took from the
   model.

The recommendation (recommend()): the fastest setting whose answer is faster, with its flags; else, where the bench's
own settings wait for data less than WAIT_LITTLE of the window or train at NEAR_CEILING of the ceiling or more, "the
loader is not the limit here"; else "keep the defaults": no setting tried trains measurably faster.

Writes tune_loader.csv (a row per setting and phase), tune_loader.md and tune_loader.png to --out; each run's log is
under logs/<bench>/tune-loader/.
"""

import dataclasses
import importlib.util
import math
import shlex
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from bench import BenchError, catalogue, write_whole
from bench.config import varied
from bench.modes import Registration, planned_bench, table_in
from bench.observe import machine
from bench.outputs import render
from bench.outputs.declared import Bars, Figure, Joins, Rows, Shows
from bench.outputs.verdicts import fmt, plural, present
from bench.schema import SummaryRow
from bench.stages import cost
from bench.stages.planning import build, plan, planfile, planned
from bench.stages.running import calibrate, execute
from bench.stages.statistics import intervals, rules

CANDIDATES = 2  # the settings the loader alone ranks first, trained against the bench's own
ROUNDS = 3  # the paired rounds of training with --repeats auto
NEAR_CEILING = 0.95  # a baseline at this share of its ceiling or more has little to win from its loader
WAIT_LITTLE = rules.WAIT_LITTLE  # ... nor one that waits for data less than this share of its window
TRAIN = "-train-r"  # a training run is named SETTING-train-rROUND
COLUMNS = ["phase", "loader", "setting", "flags", "samples_per_s", "runs", "speedup", "speedup_low",
           "speedup_high", "answer", "data_wait_frac", "cpu_loader_cores", "cpu_model_cores", "ceiling_pct",
           "ceiling_low_pct", "ceiling_high_pct", "error"]  # fmt: skip


def add_flags(p):
    p.add_argument(
        "--tune-loader",
        action="store_true",
        help="the loader's settings for this machine: a sweep of the loader alone, then the best few in training",
    )


def check_flags(flags, config):
    if config.mode != "tune_loader":
        return
    if not config.rows.default_variants:
        raise BenchError("--tune-loader sweeps the loader's settings of the baseline: --variants is not its (--loaders"
                         " picks the loaders it sweeps)")  # fmt: skip
    if not config.rows.loaders:
        raise BenchError("--tune-loader sweeps a loader: --loaders names none")


def counts(cores):
    """The worker counts tried: 0, the powers of two below the cores, and the cores."""
    return sorted({0, cores, *(2**k for k in range(8) if 2**k < cores)})


def grid(cores, gpu):
    """The torchvision loader's settings tried: {flag: value} each, the flags a script takes."""
    settings = [{"--workers": 0}]
    for workers in counts(cores)[1:]:
        for prefetch in (2, 4):
            for pin in ("on", "off") if gpu else (None,):
                setting = {"--workers": workers, "--prefetch-factor": prefetch}
                settings.append(setting | ({"--pin-memory": pin} if pin else {}))
    return settings


def workers_grid(cores):
    """Another loader's --workers counts tried (DALI's threads: loader_dali.py --workers)."""
    return [{"--workers": threads} for threads in counts(cores)[1:]]


def name_of(setting):
    """'w2-p4' (and '-pin' or '-nopin' on a GPU): a setting as a run's name."""
    name = f"w{setting['--workers']}"
    if "--prefetch-factor" in setting:
        name += f"-p{setting['--prefetch-factor']}"
    if "--pin-memory" in setting:
        name += "-pin" if setting["--pin-memory"] == "on" else "-nopin"
    return name


def flags_of(setting):
    """The flags to copy: '--workers 2 --prefetch-factor 4'."""
    return " ".join(f"{flag} {value}" for flag, value in setting.items())


def own_setting(run):
    """The bench's own settings, as its baseline run has them: its --workers and the scripts' defaults."""
    return {"--workers": int(run.flags["--workers"])}


def same(setting, own, gpu):
    """Whether a setting of the grid is the bench's own (the scripts' defaults: prefetch 2, persistent, pinned on a
    GPU)."""
    defaults = {"--workers": own["--workers"]}
    if own["--workers"]:
        defaults |= {"--prefetch-factor": 2} | ({"--pin-memory": "on"} if gpu else {})
    return setting == defaults


def recommend(own, candidates):
    """(what, words): 'use' the fastest candidate whose answer is faster, with its flags; 'not the limit' where the
    bench's own settings wait for data less than WAIT_LITTLE or train at NEAR_CEILING of the ceiling or more (the
    lower end of its interval); else 'keep'. own, candidates: the training rows of the table (dicts)."""
    faster = [c for c in candidates if c.get("answer") == "faster"]
    wait, ceiling = own.get("data_wait_frac"), own.get("ceiling_low_pct")
    if faster:
        best = max(faster, key=lambda c: c["speedup"])
        return "use", words("use", own, candidates, best)
    if (present(wait) and wait < WAIT_LITTLE) or (present(ceiling) and ceiling >= 100 * NEAR_CEILING):
        return "not the limit", words("not the limit", own, candidates)
    return "keep", words("keep", own, candidates)


def training_rows(records, names, reference):
    """A row per setting trained: its median rate, data wait and cores, its speed against reference's (paired by
    round) and the share of the ceiling it trains at (paired with the round's synthetic run)."""
    ok = pd.DataFrame([r for r in records if r.get("status") == "ok" and r.get("phase") == "train"])
    if ok.empty:
        return []
    rows = []
    by_setting = ok.drop(columns=["variant"], errors="ignore").rename(columns={"setting": "variant"})
    ratios = intervals.paired(by_setting, "samples_per_s", reference)
    ceiling = intervals.paired(by_setting, "samples_per_s", "ceiling")
    for setting, group in ok.groupby("setting", sort=False):
        if setting == "ceiling":
            continue
        row = dict(phase="train", loader="torchvision", setting=setting, flags=names.get(setting, ""))
        row.update(samples_per_s=group["samples_per_s"].median(), runs=len(group))
        for column in ("data_wait_frac", "cpu_loader_cores", "cpu_model_cores"):
            row[column] = group[column].median() if column in group and group[column].notna().any() else math.nan
        if setting != reference:
            estimate, low, high = intervals.interval(ratios.get(setting, []))
            row.update(speedup=estimate, speedup_low=low, speedup_high=high, answer=rules.classify(low, high))
        pct, low, high = intervals.interval(ceiling.get(setting, []))
        row.update(ceiling_pct=100 * pct, ceiling_low_pct=100 * low, ceiling_high_pct=100 * high)
        rows.append(row)
    return rows


class TuneLoader(execute.Mode):
    """The mode as the executor runs it: the loader runs of the grid, then (more()) the rounds of training.
    Its state: rounds, own (the bench's own setting), train (the baseline's and ceiling's runs as planned), besides
    the timeout."""

    name, what, subfolder = "tune_loader", "runs", "tune-loader"

    @dataclasses.dataclass(frozen=True)
    class State(execute.State):
        rounds: int = ROUNDS
        own: dict | None = None
        train: tuple = ()

    def more(self, runs, records):
        made = max((r.repeat for r in runs if TRAIN in r.name), default=0)
        if made >= self.state.rounds:
            return None, f"{made} rounds of training"
        settings = self.chosen(records)
        if settings is None:
            return None, "no loader run finished: no setting to train"
        kept = [planned.Run(**run) for run in self.state.train]  # as plan.json keeps them: checked as its runs are
        base, ceiling = planfile.trusted(kept, self.config.outputs.out)
        group = [ceiling.with_flags(name=f"ceiling{TRAIN}{made + 1}", repeat=made + 1)]
        for setting in settings:
            name = "own" if setting is None else name_of(setting)
            run = base.with_flags(name=f"{name}{TRAIN}{made + 1}", repeat=made + 1, flags=dict(setting or {}))
            group.append(run)
        return (group if made % 2 == 0 else group[::-1]), None

    def chosen(self, records):
        """None (the bench's own) and the CANDIDATES settings the torchvision loader alone ranked first; None where no
        loader run finished."""
        loaders = [r for r in records if r.get("phase") == "loader" and r.get("loader") == "torchvision"]
        ok = sorted((r for r in loaders if r.get("status") == "ok"), key=lambda r: -r["samples_per_s"])
        if not ok:
            return None
        gpu = bool(self.info["gpu_count"])
        best = [r["grid"] for r in ok if not same(r["grid"], self.state.own, gpu)][:CANDIDATES]
        return [None, *best]

    def do(self, run, job):
        row = job.launch(run)
        if row is None:
            return None
        training = TRAIN in run.name
        setting = run.name.split(TRAIN)[0] if training else run.name
        result = dict(phase="train" if training else "loader", setting=setting, status=row["status"])
        result.update(loader=loader_of(run), error=row.get("error"))
        result.update({k: row.get(k) for k in ("samples_per_s", "data_wait_frac", "cpu_loader_cores",
                                               "cpu_model_cores")})  # fmt: skip
        result["grid"] = grid_of(run) if not training else None
        result["run_s"] = row.get("wall_s")
        return result

    def say(self, run, record):
        if record["status"] != "ok":
            return f"FAILED: {record.get('error')}"
        if record["phase"] == "loader":  # alone, a loader waits for its batches all the time: not said
            return f"{record['samples_per_s']:,.1f} images/s, the loader alone"
        wait = f", data wait {record['data_wait_frac']:.0%}" if present(record.get("data_wait_frac")) else ""
        return f"{record['samples_per_s']:,.1f} samples/s{wait}"

    def finish(self, records, unrun, how):
        names = {r["setting"]: flags_of(r["grid"]) for r in records if r.get("grid")}
        names["own"] = f"{flags_of(self.state.own)} (the bench's own)"
        table = write(self.config.outputs.out, records, names, self.info)
        spent = sum(r.get("run_s") or 0 for r in records)
        print(f"tune loader: {spent / 60:.1f} min in runs; {self.config.outputs.out}/tune_loader.md, tune_loader.csv,"
              " tune_loader.png")  # fmt: skip
        print(table.attrs["recommendation"])
        return 0


def grid_of(run):
    """The setting a loader run was made with ({flag: value}, in the grid's order of flags)."""
    return {flag: (int(value) if flag in ("--workers", "--prefetch-factor") else value) for flag, value in
            run.flags.items() if flag in ("--workers", "--prefetch-factor", "--persistent-workers", "--pin-memory")
            and value is not None}  # fmt: skip


def runs_of(planned, cores, gpu):
    """The loader runs of the grid from the plan's loader rows (loader.py, and every other the catalogue has: planned,
    {name: run}), up to cores loading processes: loader.py's whole grid, the others' --workers counts, each named
    after its --loader (dali-w2)."""
    runs = []
    for name, row in catalogue.loaders().items():
        if name not in planned:
            continue
        settings = grid(cores, gpu) if name == catalogue.ALONE[catalogue.DEFAULT_LOADER] else workers_grid(cores)
        prefix = "" if row.measures in ("", catalogue.DEFAULT_LOADER) else f"{row.measures}-"
        for setting in settings:
            runs.append(planned[name].with_flags(name=f"{prefix}{name_of(setting)}", flags=setting))
    return runs


def loader_of(run):
    """The --loader a tune-loader run times: its loader row's (by its script), torchvision for training runs."""
    for row in catalogue.loaders().values():
        if row.script in run.cmd:
            return row.measures or catalogue.DEFAULT_LOADER
    return catalogue.DEFAULT_LOADER


def most(config, info):
    """The most loading processes the sweep tries: --workers where given, else the cores."""
    return config.work.workers if config.work.workers is not None else info["cpu_cores"]


def say(config, info, planned):
    """The plan in a line (by --dry-run too): the loader runs, the rounds of training, the estimate and the budget."""
    gpu = bool(info["gpu_count"])
    runs = runs_of(planned, most(config, info), gpu)
    rounds = config.limits.repeats if isinstance(config.limits.repeats, int) else ROUNDS
    train_s = planned["synthetic"].estimate_s + (CANDIDATES + 1) * planned["baseline"].estimate_s
    total = sum(planned[r.variant].estimate_s for r in runs) + rounds * train_s
    budget_s = cost.budget_s(config.limits.budget, gpu)
    print(f"tune loader: {len(runs)} loader settings alone, then {plural(rounds, 'round')} of training at the bench's"
          f" own and the {CANDIDATES} best with the ceiling, about {total / 60:.0f} min"
          f"{f' (budget {budget_s / 60:g} min)' if budget_s else ''}", flush=True)  # fmt: skip


def run(config):
    """The loader's settings for this machine: the plan's loader and baseline rows."""
    info, logs = planned_bench(config)
    gpu_count = info["gpu_count"]
    asked = build.asked_loaders(config, gpu_count)  # by default, those that do something here
    needs = {name: catalogue.BY_NAME[name].needs for name in asked}  # a module its script needs (DALI)
    loaders = [name for name in asked if not needs[name] or importlib.util.find_spec(needs[name])]
    if "loader" not in loaders:
        raise BenchError(
            "--tune-loader trains at the torchvision loader's settings: --loaders needs loader (DALI's threads beside)"
        )
    one = varied(config, variants=("synthetic", "baseline"), loaders=tuple(loaders), repeats=1, budget="none",
                 default_variants=False, default_loaders=False)  # fmt: skip
    runs, works, _ = plan.make_plan(one, gpu_count, info["cpu_cores"], logs, info["cpu_bf16_native"], calibrate.steps)
    first = next(iter(works))  # one workload: the default's, or the one asked for
    planned = {r.variant: r for r in runs if r.repeat == 1 and not r.beside and r.workload == first}
    if config.dry_run:
        say(config, info, planned)
        for r in runs_of(planned, most(config, info), bool(gpu_count)):
            print(f"  {r.name}: {shlex.join(r.cmd)}")
        print(f"  then rounds of: {shlex.join(planned['baseline'].cmd)} (and the ceiling, synthetic)")
        return
    main(config, info, planned, logs, works)


def main(config, info, planned, logs, works):
    """planned: the plan's runs by variant (baseline, synthetic, loader, and the other loader rows that run here)."""
    gpu = bool(info["gpu_count"])
    say(config, info, planned)
    runs = runs_of(planned, most(config, info), gpu)
    for run in runs:
        run.estimate_s = planned[run.variant].estimate_s
    rounds = config.limits.repeats if isinstance(config.limits.repeats, int) else ROUNDS
    budget_s = cost.budget_s(config.limits.budget, gpu)
    own = own_setting(planned["baseline"])
    train = (dataclasses.asdict(planned["baseline"]), dataclasses.asdict(planned["synthetic"]))
    state = TuneLoader.State(rounds=rounds, own=own, train=train, timeout=cost.timeout_s(config.limits.timeout, gpu))
    mode = TuneLoader(config, info, logs.name, runs, works, state)
    execute.start(mode)
    execute.execute(mode, budget_s, config.limits.chunk)


def write(out, records, names, info):
    """tune_loader.csv, .md and .png; the table, its recommendation in its attrs."""
    out = Path(out)
    loaders = [dict(phase="loader", loader=r["loader"], setting=r["setting"], flags=names.get(r["setting"], ""),
                    samples_per_s=r.get("samples_per_s"), runs=1, error=r.get("error"))
               for r in records if r.get("phase") == "loader"]  # fmt: skip
    trained = training_rows(records, names, "own")
    table = pd.DataFrame([*loaders, *trained]).reindex(columns=COLUMNS)
    own = next((r for r in trained if r["setting"] == "own"), None)
    candidates = [r for r in trained if r["setting"] != "own"]
    what, answer = recommend(own, candidates) if own else ("none", "no training run finished: no recommendation")
    table.attrs["recommendation"] = f"tune loader: {answer}"
    write_whole(out / "tune_loader.csv", lambda tmp: table.to_csv(tmp, index=False))
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    spent = sum(r.get("run_s") or 0 for r in records)
    title = f"The loader's settings: {machine.where(info)} ({when}, {spent / 60:.1f} min)"
    render.write(SHOWS, out, table, title, answer=answer, loaders=loaders, trained=trained)
    return table


# ----------------------------------------------------------------------------- what it shows: its words, its page
# (tune_loader.md) and its plot (tune_loader.png), rendered by bench/outputs/


def words(what, own, candidates, best=None):
    """The answer (what: use, not the limit or keep; best: the setting to use) in a sentence, with where the bench's
    own settings leave the baseline (own, candidates: the training rows of its table, dicts)."""
    wait, where = own.get("data_wait_frac"), []
    if present(wait):
        where.append(f"waits for data {wait:.0%} of its window")
    if present(own.get("ceiling_pct")):
        where.append(f"trains at {own['ceiling_pct']:.0f}% of its ceiling")
    where = f" (with the bench's own settings the baseline {' and '.join(where)})" if where else ""
    if what == "use":
        return (f"use {best['flags']}: {best['speedup']:.2f}x the speed of the bench's own settings (95%"
                f" interval {best['speedup_low']:.2f}x to {best['speedup_high']:.2f}x){where}")  # fmt: skip
    if what == "not the limit":
        return f"the loader is not the limit here{where}: keep the bench's own settings"
    said = ", ".join(f"{c['flags']} {c['speedup']:.2f}x ({c['answer']})" for c in candidates if present(c["speedup"]))
    return f"keep the bench's own settings: no setting tried trains measurably faster ({said}){where}"


def interval_cell(row):
    return f"{row['speedup_low']:.2f}x to {row['speedup_high']:.2f}x" if present(row.get("speedup_low")) else ""


def cores_cell(row):
    if not present(row.get("cpu_model_cores")) or not present(row.get("cpu_loader_cores")):
        return ""
    return f"{row['cpu_model_cores']:.2f} / {row['cpu_loader_cores']:.2f}"


LOADERS = (
    ("loader", lambda r: r["loader"]),
    ("flags", lambda r: f"`{r['flags']}`"),
    ("images/s", lambda r: fmt(r["samples_per_s"], "{:,.1f}") or f"failed: {r['error']}"),
)
TRAINED = (
    ("flags", lambda r: f"`{r['flags']}`"),
    ("samples/s", lambda r: fmt(r["samples_per_s"], "{:,.1f}")),
    ("vs the bench's own", lambda r: fmt(r.get("speedup"), "{:.2f}x")),
    ("95% interval", interval_cell),
    ("answer", lambda r: fmt(r.get("answer"), "{}")),
    ("data wait", lambda r: fmt(r["data_wait_frac"], "{:.1%}")),
    ("of ceiling", lambda r: fmt(r["ceiling_pct"], "{:.0f}%")),
    ("cores: model / loader", cores_cell),
)


def blocks(table, answer, loaders, trained):
    """tune_loader.md: the answer (words), the loader alone at each setting (loaders) and the settings trained
    (trained: the table's rows, dicts)."""
    rounds = max((r["runs"] for r in trained), default=0)
    return [
        f"**The answer**: {answer}.",
        "The loader alone (one run each: a first look, which picks the settings trained):",
        Rows(sorted(loaders, key=lambda r: -(r["samples_per_s"] or 0)), LOADERS),
        f"Training, in {plural(rounds, 'paired round')} (each with the ceiling, no loading at all):",
        Rows(trained, TRAINED),
    ]


def figure(table, title, answer, loaders, trained):
    """tune_loader.png: the loader alone at each setting, and each setting trained, in samples/s."""
    ranked = sorted(loaders, key=lambda r: r["samples_per_s"] or 0)
    alone = Bars([r["samples_per_s"] or 0 for r in ranked], [f"{r['loader']}: {r['flags']}" for r in ranked],
                 "images/s, the loader alone", title="the loader alone", top_first=False, fontsize=7)  # fmt: skip
    training = Bars([r["samples_per_s"] for r in trained], [textwrap.fill(r["flags"], 40) for r in trained],
                    "samples/s, training (median of the rounds)", title="in training", colour="tab:green",
                    fontsize=7)  # fmt: skip
    return Figure([alone, training], (11, 0.32 * max(len(loaders), 4) + 1.8), title, wrap=120, title_above=True)


SHOWS = Shows("tune_loader.md", "tune_loader.png", "the loader alone at each setting, and the best in training", blocks,
              figure)  # fmt: skip


def numbers(summary, out):
    """A bench's summary with the answer of a --tune-loader run in the same results folder (tune_loader.csv: its
    training rows) as each row's loader_sweep, which a row waiting for its data is told (on_data)."""
    table = table_in(out, "tune_loader.csv", ("phase", "setting", "flags", "answer"), "--tune-loader's answer")
    if table is None:
        return summary
    trained = [row for row in table.to_dict("records") if row["phase"] == "train"]
    own = next((row for row in trained if row["setting"] == "own"), None)
    if own is None:
        return summary
    return summary.assign(loader_sweep=recommend(own, [row for row in trained if row is not own])[1])


def on_data(row):
    """ "The loader's sweep in this folder (--tune-loader) says: ..." to a row waiting for its data, '' without one."""
    row = SummaryRow.of(row)
    tuned = row.loader_sweep
    return (
        f"The loader's sweep in this folder (--tune-loader) says: {tuned}" if isinstance(tuned, str) and tuned else ""
    )


# a bench's summary in the same folder: the sweep's answer, to a row it helps; a data-bound row is sent here
JOINS = Joins(numbers, on_data=on_data, fields=("loader_sweep",), points=(("loader", "python -m bench --tune-loader"),))


MODE = Registration("tune_loader", run, asked=lambda flags: flags.tune_loader, add_flags=add_flags,
                    check_flags=check_flags, outputs=("tune_loader.csv", "tune_loader.md", "tune_loader.png"),
                    executes=TuneLoader, joins=JOINS, shows=SHOWS)  # fmt: skip
