"""The bench: every variant on the same work, then tables, plots and the saved baseline.

    python -m bench                                # the default plan for this machine: CPU, 1 GPU or N GPUs
    python -m bench --workload imagenet            # ImageNet-like photos (data/imagenet, made when missing)
    python -m bench --variants baseline,amp --repeats 5   # 5 rounds, not auto (the default: until the answers settle)
    python -m bench --data ~/my_images --model resnet50 --batch-size 512 --steps 200
    python -m bench --dry-run                      # print the plan's command lines and stop
    python -m bench --dry-run --gpus 8             # ... as it would be on a machine with 8 GPUs
    python -m bench --resume                       # finish the last bench: its runs with no finished row
    python -m bench --summarize                    # tables and plots again from the last bench in runs.csv
    python -m bench --save-baseline                # keep results/ as baseline/<machine class>/ (make baseline)
    python -m bench --check                        # does every technique work on this machine? (make check)
    python -m bench --readme                       # the README's result blocks, from the saved runs they show

Writes results/runs.csv (one row per run, appended), results/summary.csv, results/summary.md,
results/throughput.png, memory.png, tradeoff.png, time.png, curves.json and curves.png (the learning curves),
results/report.html, and each run's output under results/logs/<bench>/.
Every mode (the bench, the default, and --resume, --check, --max-batch and the rest) is one registration in
bench/modes/: this module parses the flags every mode shares, asks the registrations for theirs, picks the one mode
asked for, builds the configuration (bench/config.py: one typed record, never changed) and runs the mode on it. The
arguments are parsed before the machine is looked at; every error is a BenchError, printed once by __main__.
"""

import argparse
import dataclasses
import difflib
import os
from pathlib import Path

import filelock

from bench import BenchError, catalogue, check_folder, config, data
from bench.modes import goes_with, registered
from bench.stages.planning import slurm
from bench.stages.records import record

MAX_TIMEOUT = 7 * 24 * 3600
LOCK = ".bench.lock"  # in --out: held while a bench uses the folder (see lock())


def fail(message):
    raise BenchError(message)


def close(name, names):
    """' (did you mean 'amp'?)' for a misspelt name, '' where none of names is close."""
    match = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def check_outputs(asked):
    """Before any work, for a mode that writes in --out: the folder can be written, and nothing of the same name as
    an output file of any mode is a folder; a runs.csv the mode appends to reads."""
    mode, out = registered()[asked.mode], asked.outputs.out
    if not mode.writes_out:
        return
    check_folder(out, "--out")
    for name in dict.fromkeys(name for m in registered().values() for name in m.outputs):
        if (out / name).is_dir():
            fail(f"{out / name} is a folder: the bench writes a file of that name")
    runs = out / "runs.csv"
    if "runs.csv" in mode.outputs and runs.is_file() and runs.stat().st_size:
        record.read_runs(runs)  # a damaged file is named before the data is generated, not after


def count_or_auto(what):
    """An argparse type: a whole number of `what`, or auto."""

    def parse(text):
        if text == "auto":
            return text
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: a number of {what}, or auto") from None

    return parse


def budget_flag(text):
    if text == "none":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: minutes, or none") from None
    if not 0 < value <= MAX_TIMEOUT / 60:
        raise argparse.ArgumentTypeError(f"{text}: minutes above 0, at most a week")
    return value


def margin_flag(text):
    """An argparse type: a margin above 0, at most 1 (0.1: +-10%)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: a share such as 0.1 (+-10%)") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: a margin above 0 and at most 1 (0.1 is +-10%)")
    return value


def parse_args(argv=None):
    """The configuration the command line asks for (bench/config.py); the fields whose default depends on the machine
    and the workload stay None (see plan.DEFAULTS). The flags every mode shares are here; a mode's own live with it
    (its registration's add_flags, check_flags and own); a bad one is a BenchError, one line. The parsed flags go no
    further than this function and the registrations' checks."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    work_flags(p)
    run_flags(p)
    for mode in registered().values():
        if mode.add_flags is not None:
            mode.add_flags(p)
    p.error = fail
    flags = p.parse_args(argv)
    rows = rows_asked(flags)
    check_work(flags, rows)
    asked = mode_of(flags)
    given = [dest for dest, value in vars(flags).items() if value != p.get_default(dest)]
    if (refused := goes_with(given, asked, set(vars(flags)))) is not None:
        fail(refused)
    shared = config.of(flags, asked, **rows, out=Path(flags.out), baseline_dir=Path(flags.baseline_dir))
    for mode in registered().values():
        if mode.check_flags is not None:
            mode.check_flags(flags, shared)
    # with the Slurm launcher, the nodes are its allocation's, read once the flags are checked
    checked = config.varied(shared, nodes=slurm.nodes_of(shared.launch))
    own = registered()[asked].own
    return dataclasses.replace(checked, own=own(flags, checked)) if own is not None else checked


def work_flags(p):
    """The work every run does: the data, the rows, the model and the steps."""
    p.add_argument(
        "--workload",
        choices=[*data.WORKLOADS, "vit", "all"],
        help="generated data (CPU: small; GPU: all); vit: a vision transformer on small (CPU) or imagenet (GPU)",
    )
    p.add_argument("--data", help="a data folder of your own for every run, instead of a workload")
    p.add_argument("--out", default="results", help="folder for the tables, plots and logs")
    p.add_argument(
        "--variants",
        help="training variants, comma-separated (default: every one; on a machine without a GPU every one but dp, a"
        " passthrough there); all:no-compile and the like: train_all.py with blocks switched off"
        f" (switches {', '.join(catalogue.SWITCHES)})",
    )
    p.add_argument(
        "--loaders",
        help=f"loader-only benchmarks, or 'none' (default: {','.join(catalogue.LOADERS)}; vit: none, its data's)",
    )
    p.add_argument(
        "--model",
        help="model of every run: torchvision's or FILE.py:FACTORY (CPU: shufflenet_v2_x0_5; GPU: resnet18, resnet50)",
    )
    p.add_argument("--batch-size", type=int, help="global batch of every run (CPU: 64, imagenet 16; GPU: 256)")
    p.add_argument(
        "--steps",
        type=count_or_auto("steps"),
        help="steps of every run, warm-up included, or auto (CPU: 30; GPU: auto)",
    )
    p.add_argument("--warmup-steps", type=int, help="steps left out of the timing (CPU: 5; GPU: 20-30)")
    p.add_argument("--eval-samples", type=int, help="validation images evaluated (a fixed sample; CPU: 500)")
    p.add_argument("--loader-steps", type=int, help="batches timed by --bench (default: the steps timed)")


def run_flags(p):
    """How the bench runs: rounds, budget, processes, what each run also records, and the modes that read runs."""
    p.add_argument(
        "--repeats",
        type=count_or_auto("rounds"),
        default="auto",
        help="rounds (fresh processes per variant), or auto: 2, then more for the rows still open (neither faster,"
        " slower nor within --margin), while the budget allows (10 at most)",
    )
    p.add_argument(
        "--margin",
        type=margin_flag,
        help="the speed-up a row must exceed to count: 0.1 (the default) reads a 90%% interval inside 1/1.1x..1.1x as"
        " within the margin (not worth adopting for speed here); faster and slower need the 98%% interval beyond 1",
    )
    p.add_argument("--budget", type=budget_flag, help="minutes the bench may take, or none (default: CPU 25, GPU 35)")
    p.add_argument("--chunk", type=float, help="minutes for this part: stop after the last whole round that fits")
    p.add_argument("--workers", type=int, default=None, help="loader processes per training process")
    p.add_argument("--nproc", type=int, default=None, help="DDP processes (default: the GPUs, or 2 on a CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, help="seconds before a run is stopped (CPU: 600, GPU: 900)")
    p.add_argument(
        "--tensorboard",
        action="store_true",
        help="each training run also writes its curves for TensorBoard, under logs/BENCH/tensorboard/RUN",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="round 1's training runs also record 4 steps after their timed window with torch.profiler: a trace beside"
        " each run's log (logs/BENCH/RUN.pt.trace.json.gz), and each technique's changed operators in the report",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan's command lines and stop")
    p.add_argument("--gpus", type=int, help="with --dry-run: plan for a machine with this many GPUs")


def rows_asked(flags):
    """--variants and --loaders as lists of known rows (the catalogue's, or train_all.py's combinations): the fields
    of the configuration's rows (bench/config.py Rows)."""
    default_variants = flags.variants is None  # every variant; dp is left out where there is no GPU (plan.py)
    variants = catalogue.DEFAULT if flags.variants is None else tuple(v for v in flags.variants.split(",") if v)
    default_loaders = flags.loaders is None  # both; none for vit, whose data is another workload's (plan.py)
    loaders = tuple(v for v in (flags.loaders or ",".join(catalogue.LOADERS)).split(",") if v and v != "none")
    for name in variants:
        row = catalogue.with_loader(name)[0]  # ROW+LOADER: a bad one is its own error
        if row not in catalogue.TRAIN and not catalogue.combination(row):  # a bad combination is its own error
            fail(
                f"unknown variant {name!r}{close(name, catalogue.TRAIN)}: choose from {', '.join(catalogue.TRAIN)},"
                " all:SWITCH[:SWITCH...], or ROW+LOADER"
            )
    if len(set(variants)) < len(variants):
        fail(f"--variants names a row twice: {','.join(variants)}")
    for name in loaders:
        if name not in catalogue.LOADERS:
            fail(
                f"unknown loader benchmark {name!r}{close(name, catalogue.LOADERS)}: choose from"
                f" {', '.join(catalogue.LOADERS)} or none"
            )
    return dict(variants=variants, loaders=loaders, default_variants=default_variants, default_loaders=default_loaders)


def check_work(flags, rows):
    """The counts in their ranges, and the data named once (flags: the flags as parsed; rows: rows_asked's)."""
    counts = dict(
        batch_size=flags.batch_size, steps=flags.steps, repeats=flags.repeats, eval_samples=flags.eval_samples
    )
    counts.update(loader_steps=flags.loader_steps, timeout=flags.timeout, nproc=flags.nproc)
    for name, value in counts.items():
        if value not in (None, "auto") and value < 1:
            fail(f"--{name.replace('_', '-')} must be >= 1")
    for name, value in dict(warmup_steps=flags.warmup_steps, workers=flags.workers, gpus=flags.gpus).items():
        if value is not None and value < 0:
            fail(f"--{name.replace('_', '-')} must be >= 0")
    cores = os.cpu_count() or 1
    if flags.workers is not None and flags.workers > 8 * cores:
        fail(f"--workers {flags.workers}: at most 8 loading processes per core ({8 * cores} here)")
    if not 0 <= flags.seed < 2**31:
        fail(f"--seed {flags.seed}: must be from 0 to 2**31 - 1")
    if flags.timeout is not None and flags.timeout > MAX_TIMEOUT:
        fail(f"--timeout {flags.timeout}: at most {MAX_TIMEOUT} s (a week)")
    if flags.chunk is not None and not 0 < flags.chunk <= MAX_TIMEOUT / 60:
        fail(f"--chunk {flags.chunk:g}: minutes above 0, at most a week")
    if flags.gpus is not None and not flags.dry_run:
        fail("--gpus plans for another machine: it goes with --dry-run")
    if flags.data is not None and flags.workload is not None:
        fail("--data names your own folder, --workload a generated one: give one of them")
    if flags.data is not None and flags.data.startswith("synthetic"):
        fail("--data synthetic is what the ceiling rows train on: name a folder of images (or a --workload)")
    if not rows["variants"] and not rows["loaders"]:
        fail("nothing to run: --variants and --loaders are both empty")


def mode_of(flags):
    """The one mode the flags ask for (the default, the bench, where none is); two are refused."""
    modes = [name for name, mode in registered().items() if mode.asked is not None and mode.asked(flags)]
    if len(modes) > 1:
        fail(f"--{modes[0].replace('_', '-')} and --{modes[1].replace('_', '-')} are two modes: give one")
    return modes[0] if modes else next(name for name, mode in registered().items() if mode.asked is None)


def lock(folder):
    """Hold folder's lock until this bench ends: a second bench, --resume, --summarize, --check or --save-baseline on
    the same results is refused in one line. The lock is the kernel's (flock, through filelock), so a bench that was
    killed leaves none behind to block the next."""
    held = filelock.FileLock(os.path.join(folder, LOCK), timeout=0)
    try:
        held.acquire()
    except filelock.Timeout:
        fail(f"another bench is using {folder} (its lock {folder / LOCK}): wait for it to end, or give --out another")
    return held


def main(argv=None):
    asked = parse_args(argv)
    mode = registered()[asked.mode]
    if not asked.dry_run:
        check_outputs(asked)
    out = asked.outputs.out
    held = lock(out) if not asked.dry_run and mode.locked and out.is_dir() else None
    try:
        mode.run(asked)
    finally:
        if held is not None:
            held.release()
