"""The modes on a results folder's saved runs: --resume (finish a bench of any mode), --summarize (its tables and plots
again), --save-baseline (keep them as baseline/NAME) and --readme (the README's result blocks, from the saved runs
they show). Each is a registration (RESUME, SUMMARIZE, SAVE_BASELINE, README; see bench/modes/__init__.py)."""

from dataclasses import dataclass

from bench import BenchError, check_folder
from bench.config import read
from bench.modes import Registration, joined, registered, shown, speed, this_machine
from bench.stages.records import baseline, record
from bench.stages.running import execute


def resume_flags(p):
    p.add_argument("--resume", nargs="?", const="last", metavar="BENCH", help="finish a bench (default: the last)")
    p.add_argument(
        "--allow-changed", action="store_true", help="with --resume: go on though the data or code changed, rows marked"
    )


@dataclass(frozen=True)
class ResumeFlags:
    """--resume's own flags: the bench to finish (its name, or last), and whether to go on where the data or the
    code changed (--allow-changed)."""

    resume: str = "last"
    allow_changed: bool = False


@dataclass(frozen=True)
class SaveBaselineFlags:
    """--save-baseline's own flag: the saved baseline's name ('': this machine's class)."""

    save_baseline: str = ""


def check_resume(flags, config):
    if config.mode == "resume" and config.dry_run:
        raise BenchError("--dry-run prints a new bench's plan: --resume runs a saved one (its logs/BENCH/plan.json)")


def resume(config):
    """Finish the last bench of any mode (or the one named): its planned runs with no finished record."""
    resumable = {m.executes.name: m.executes for m in registered().values() if m.executes is not None}
    execute.resume(config, this_machine(), resumable, config.own.resume, config.own.allow_changed)


def summarize_flags(p):
    p.add_argument("--summarize", action="store_true", help="tables and plots from the last bench in runs.csv")


def summarize_again(config):
    """Tables and plots again from the last bench in runs.csv."""
    out = config.outputs.out
    if not (out / "runs.csv").exists():
        raise BenchError(f"no {out}/runs.csv: run the bench first")
    runs = record.read_runs(out / "runs.csv")
    bench_id = runs["bench_id"].iloc[-1]
    info = speed.saved_machine(out, runs[runs["bench_id"] == bench_id])  # the runs' machine, not this one
    summary = speed.write_outputs(out, bench_id, info, speed.margin(config))
    speed.report(summary, out, info, config.outputs.baseline_dir)


def readme_flags(p):
    p.add_argument(
        "--readme",
        action="store_true",
        help="the README's result blocks, and every saved baseline's report, from their runs",
    )


def readme(config):
    """The result blocks of the README and docs/, from the saved runs of each folder they show
    (bench/outputs/readme.py)."""
    from bench.outputs import readme as blocks

    def resummarize(folder):
        if not (folder / "runs.csv").exists():
            raise BenchError(f"README.md or docs/ show {folder}, which holds no runs.csv")
        runs = record.read_runs(folder / "runs.csv")
        machine = speed.saved_machine(folder, runs)
        return speed.write_outputs(folder, runs["bench_id"].iloc[-1], machine, speed.margin(config))

    for folder in blocks.rewrite(resummarize, shown=shown(), joined=joined()):
        print(f"README.md and docs/: the results of {folder}, summarized again from its runs.csv")
    for folder in sorted(config.outputs.baseline_dir.glob("*/runs.csv")):  # every saved baseline gets its report too
        resummarize(folder.parent)
        print(f"{folder.parent}: summary and report.html written again from its runs.csv")


def save_baseline_flags(p):
    p.add_argument("--save-baseline", nargs="?", const="", metavar="NAME", help="save the results as a baseline")
    p.add_argument("--baseline-dir", default=str(baseline.BASELINE_DIR), help="where saved baselines are kept")


def save_baseline(config):
    """Keep results/ as the saved baseline of this machine's class (or of the name given): the bench's outputs and
    every other mode's that are there (each registration's outputs)."""
    out, saved = config.outputs.out, config.outputs.baseline_dir
    check_folder(saved, "--baseline-dir")
    others = [name for m in registered().values() if m is not speed.MODE for name in m.outputs if name != "runs.csv"]
    kept = [name for name in ["summary.csv", *others] if (out / name).exists()]
    if not kept:
        raise BenchError(f"no {out}/summary.csv (nor a table of --to-accuracy, --max-batch or --scaling) to save:"
                         " run the bench first")  # fmt: skip
    info = this_machine()  # a mode's tables alone: this machine's; a bench's rows: their machine (one from a GPU)
    if (out / "runs.csv").exists():
        runs = record.read_runs(out / "runs.csv")
        info = speed.saved_machine(out, runs[runs["bench_id"] == runs["bench_id"].iloc[-1]])
    outputs = [name for m in registered().values() for name in m.outputs if name != "runs.csv"]  # runs.csv: its own
    folder = baseline.save(out, config.own.save_baseline or info["machine_class"], info, outputs, saved)
    tables_kept = dict.fromkeys(name.split(".")[0] for name in kept if name.endswith(".csv"))
    print(f"saved {', '.join(f'{out}/{name}.*' for name in tables_kept)} as {folder}")


RESUME = Registration("resume", resume, asked=lambda flags: flags.resume, add_flags=resume_flags,
                      check_flags=check_resume, own=read(ResumeFlags), outputs=("runs.csv",),
                      only=("allow_changed", "tensorboard", "profile"))  # fmt: skip
SUMMARIZE = Registration("summarize", summarize_again, asked=lambda flags: flags.summarize, add_flags=summarize_flags)
# --readme writes README.md and the folders it shows, --save-baseline --baseline-dir: neither writes --out
README = Registration("readme", readme, asked=lambda flags: flags.readme, add_flags=readme_flags, writes_out=False,
                      locked=False)  # fmt: skip
SAVE_BASELINE = Registration("save_baseline", save_baseline, asked=lambda flags: flags.save_baseline is not None,
                             add_flags=save_baseline_flags, own=read(SaveBaselineFlags), writes_out=False)  # fmt: skip
