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
Six modes, one function each: run (the default), resume, summarize, save_baseline, check, readme. The arguments
are parsed before the machine is looked at; every error is a BenchError, printed once by __main__.
"""

import argparse
import difflib
import importlib.util
import os
import secrets
import shlex
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import filelock

from bench import BenchError, catalogue, check_folder, data, logs_of
from bench.modes import accuracy, maxbatch, parity, scaling, speed, tuneloader
from bench.modes import check as check_mode  # the --check mode (cli.check is its entry)
from bench.observe.machine import machine_class, machine_info
from bench.stages import baseline, calibrate, cost, execute, plan, record, slurm

MAX_TIMEOUT = 7 * 24 * 3600
LOCK = ".bench.lock"  # in --out: held while a bench uses the folder (see lock())
OUTPUTS = [
    "runs.csv",
    "summary.csv",
    "summary.md",
    "report.html",
    "throughput.png",
    "memory.png",
    "tradeoff.png",
    "time.png",
    "curves.json",
    "curves.png",
    "profiles.json",
    "max_batch.csv",
    "max_batch.md",
    "max_batch.png",
    "accuracy.csv",
    "accuracy.md",
    "accuracy_curves.png",
    "parity.csv",
    "parity.md",
    "parity_curves.png",
    "tune_loader.csv",
    "tune_loader.md",
    "tune_loader.png",
    "scaling.csv",
    "scaling.md",
    "scaling.png",
]


def fail(message):
    raise BenchError(message)


def close(name, names):
    """' (did you mean 'amp'?)' for a misspelt name, '' where none of names is close."""
    match = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def check_outputs(args):
    """Before any work: the output folder (and for --save-baseline the baseline folder) can be written,
    and nothing of the same name as an output file is a folder."""
    if args.mode == "save_baseline":
        check_folder(args.baseline_dir, "--baseline-dir")
        return
    if args.mode == "readme":  # writes README.md and the folders it shows, not --out
        return
    check_folder(args.out, "--out")
    for name in OUTPUTS:
        if (args.out / name).is_dir():
            fail(f"{args.out / name} is a folder: the bench writes a file of that name")
    runs = args.out / "runs.csv"
    if args.mode in ("run", "resume") and runs.is_file() and runs.stat().st_size:
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


def parse_args(argv=None):
    """The flags; those whose default depends on the machine and the workload stay None (see plan.DEFAULTS). The
    flags of a mode live with its mode (add_flags, check_flags); a bad one is a BenchError, one line."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    work_flags(p)
    run_flags(p)
    check_mode.add_flags(p)
    p.add_argument(
        "--readme",
        action="store_true",
        help="the README's result blocks, and every saved baseline's report, from their runs",
    )
    for mode in maxbatch, accuracy, parity, scaling, tuneloader, slurm:
        mode.add_flags(p)
    p.add_argument("--save-baseline", nargs="?", const="", metavar="NAME", help="save the results as a baseline")
    p.add_argument("--baseline-dir", default=str(baseline.BASELINE_DIR), help="where saved baselines are kept")
    p.error = fail
    args = p.parse_args(argv)
    rows_asked(args)
    check_work(args)
    args.mode = mode_of(args)
    for mode in accuracy, parity, scaling, tuneloader, slurm, check_mode, maxbatch:
        mode.check_flags(args)
    check_run(args)
    args.out, args.baseline_dir = Path(args.out), Path(args.baseline_dir)
    return args


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
        help="rounds (fresh processes per variant), or auto: 2, then more for the rows whose 95%% interval is wider"
        " than +-5%%, while the budget allows (10 at most)",
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
    p.add_argument("--resume", nargs="?", const="last", metavar="BENCH", help="finish a bench (default: the last)")
    p.add_argument(
        "--allow-changed", action="store_true", help="with --resume: go on though the data or code changed, rows marked"
    )
    p.add_argument("--summarize", action="store_true", help="tables and plots from the last bench in runs.csv")


def rows_asked(args):
    """--variants and --loaders as lists of known rows (the catalogue's, or train_all.py's combinations)."""
    args.default_variants = args.variants is None  # every variant; dp is left out where there is no GPU (plan.py)
    args.variants = list(catalogue.TRAIN) if args.variants is None else [v for v in args.variants.split(",") if v]
    args.default_loaders = args.loaders is None  # both; none for vit, whose data is another workload's (plan.py)
    args.loaders = [v for v in (args.loaders or ",".join(catalogue.LOADERS)).split(",") if v and v != "none"]
    for name in args.variants:
        if name not in catalogue.TRAIN and not catalogue.combination(name):  # a bad combination is its own error
            fail(
                f"unknown variant {name!r}{close(name, catalogue.TRAIN)}: choose from {', '.join(catalogue.TRAIN)},"
                " or all:SWITCH[:SWITCH...]"
            )
    if len(set(args.variants)) < len(args.variants):
        fail(f"--variants names a row twice: {','.join(args.variants)}")
    for name in args.loaders:
        if name not in catalogue.LOADERS:
            fail(
                f"unknown loader benchmark {name!r}{close(name, catalogue.LOADERS)}: choose from"
                f" {', '.join(catalogue.LOADERS)} or none"
            )


def check_work(args):
    """The counts in their ranges, and the data named once."""
    counts = dict(batch_size=args.batch_size, steps=args.steps, repeats=args.repeats, eval_samples=args.eval_samples)
    counts.update(loader_steps=args.loader_steps, timeout=args.timeout, nproc=args.nproc)
    for name, value in counts.items():
        if value not in (None, "auto") and value < 1:
            fail(f"--{name.replace('_', '-')} must be >= 1")
    for name, value in dict(warmup_steps=args.warmup_steps, workers=args.workers, gpus=args.gpus).items():
        if value is not None and value < 0:
            fail(f"--{name.replace('_', '-')} must be >= 0")
    cores = os.cpu_count() or 1
    if args.workers is not None and args.workers > 8 * cores:
        fail(f"--workers {args.workers}: at most 8 loading processes per core ({8 * cores} here)")
    if not 0 <= args.seed < 2**31:
        fail(f"--seed {args.seed}: must be from 0 to 2**31 - 1")
    if args.timeout is not None and args.timeout > MAX_TIMEOUT:
        fail(f"--timeout {args.timeout}: at most {MAX_TIMEOUT} s (a week)")
    if args.chunk is not None and not 0 < args.chunk <= MAX_TIMEOUT / 60:
        fail(f"--chunk {args.chunk:g}: minutes above 0, at most a week")
    if args.gpus is not None and not args.dry_run:
        fail("--gpus plans for another machine: it goes with --dry-run")
    if args.data is not None and args.workload is not None:
        fail("--data names your own folder, --workload a generated one: give one of them")
    if args.data is not None and args.data.startswith("synthetic"):
        fail("--data synthetic is what the ceiling rows train on: name a folder of images (or a --workload)")
    if not args.variants and not args.loaders:
        fail("nothing to run: --variants and --loaders are both empty")


def mode_of(args):
    """The one mode the flags ask for ("run": the bench); two are refused."""
    modes = [("resume", args.resume), ("summarize", args.summarize), ("check", args.check), ("readme", args.readme)]
    modes += [("max_batch", args.max_batch), ("to_accuracy", args.to_accuracy is not None)]
    modes += [("parity", args.parity), ("scaling", args.scaling is not None), ("tune_loader", args.tune_loader)]
    modes = [name for name, on in modes if on]
    modes += ["save_baseline"] if args.save_baseline is not None else []
    if len(modes) > 1:
        fail(f"--{modes[0].replace('_', '-')} and --{modes[1].replace('_', '-')} are two modes: give one")
    return modes[0] if modes else "run"


def check_run(args):
    """The flags that go with a bench or --resume alone."""
    if args.allow_changed and args.mode != "resume":
        fail("--allow-changed goes with --resume")
    if args.tensorboard and args.mode not in ("run", "resume"):
        fail(f"--tensorboard goes with a bench or --resume, not --{args.mode.replace('_', '-')}")
    if args.profile and args.mode not in ("run", "resume"):
        fail(f"--profile goes with a bench or --resume, not --{args.mode.replace('_', '-')}")
    if args.tensorboard and importlib.util.find_spec("tensorboard") is None:
        fail(f"--tensorboard needs the tensorboard package: {sys.executable} -m pip install tensorboard")


def machine():
    info = machine_info()
    info["machine_class"] = machine_class(info)
    return info


def planned_for(args):
    """This machine, with the GPUs --gpus plans for (a dry run for another machine) where it is given."""
    info = machine()
    return info if args.gpus is None else {**info, "gpu_count": args.gpus}


def save_baseline(args):
    """Keep results/ as the saved baseline of this machine's class (or of the name given)."""
    kept = [name for name in ["summary.csv", *baseline.MODE_OUTPUTS] if (args.out / name).exists()]
    if not kept:
        fail(f"no {args.out}/summary.csv (nor a table of --to-accuracy, --max-batch or --scaling) to save: run the"
             " bench first")  # fmt: skip
    info = machine()  # a mode's tables alone: this machine's; a bench's rows: their machine (one brought from a GPU)
    if (args.out / "runs.csv").exists():
        runs = record.read_runs(args.out / "runs.csv")
        info = speed.saved_machine(args.out, runs[runs["bench_id"] == runs["bench_id"].iloc[-1]])
    folder = baseline.save(args.out, args.save_baseline or info["machine_class"], info, args.baseline_dir)
    tables_kept = dict.fromkeys(name.split(".")[0] for name in kept if name.endswith(".csv"))
    print(f"saved {', '.join(f'{args.out}/{name}.*' for name in tables_kept)} as {folder}")


def readme(args):
    """The result blocks of the README and docs/, from the saved runs of each folder they show
    (bench/outputs/readme.py)."""
    from bench.outputs import readme as blocks

    def resummarize(folder):
        if not (folder / "runs.csv").exists():
            fail(f"README.md or docs/ show {folder}, which holds no runs.csv")
        runs = record.read_runs(folder / "runs.csv")
        speed.write_outputs(folder, runs["bench_id"].iloc[-1], speed.saved_machine(folder, runs))

    for folder in blocks.rewrite(resummarize):
        print(f"README.md and docs/: the results of {folder}, summarized again from its runs.csv")
    for folder in sorted(args.baseline_dir.glob("*/runs.csv")):  # every saved baseline gets its report too
        resummarize(folder.parent)
        print(f"{folder.parent}: summary and report.html written again from its runs.csv")


def summarize_again(args):
    """Tables and plots again from the last bench in runs.csv."""
    if not (args.out / "runs.csv").exists():
        fail(f"no {args.out}/runs.csv: run the bench first")
    runs = record.read_runs(args.out / "runs.csv")
    bench_id = runs["bench_id"].iloc[-1]
    info = speed.saved_machine(args.out, runs[runs["bench_id"] == bench_id])  # the runs' machine, not this one
    speed.report(speed.write_outputs(args.out, bench_id, info), args.out, info, args.baseline_dir)


def run(args):
    """Plan the bench for this machine, store the plan, and run it."""
    info = machine()
    gpu_count = info["gpu_count"] if args.gpus is None else args.gpus
    bench_id = new_id()
    logs = logs_of(args.out, bench_id)
    if not args.dry_run:
        logs.mkdir(parents=True, exist_ok=True)
    native = info["cpu_bf16_native"]
    started = time.monotonic()
    saved = saved_costs(args, info, gpu_count)
    runs, works, fit = plan.make_plan(
        args, gpu_count, info["cpu_cores"], logs, args.dry_run, native, calibrate.steps, saved
    )
    if args.dry_run:
        speed.print_plan(runs, works, gpu_count)
        plan.print_estimate(fit, runs)
        return
    plan.print_estimate(fit, runs)
    options = dict(auto=fit.auto, context=asdict(fit.context), profile=args.profile, tensorboard=args.tensorboard)
    bench = speed.Bench(args, info, bench_id, runs, works, options)  # the options kept for --resume
    execute.start(bench)
    execute.execute(bench, fit.budget_s, args.chunk, time.monotonic() - started)


def saved_costs(args, info, gpu_count):
    """A GPU plan's costs from the saved GPU runs (baseline/): this GPU's where it has some, else every GPU's."""
    if not gpu_count:
        return {}
    runs = baseline.gpu_runs(args.baseline_dir)
    return cost.saved_costs(runs, info.get("gpu_name")) if not runs.empty else {}


def new_id():
    """A bench's name: when it started (UTC), and 4 hex digits that tell two started in the same second apart."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def resume(args):
    """Finish the last bench of any mode (or the one named): its planned runs with no finished record."""
    modes = (speed.Bench, check_mode.Check, maxbatch.MaxBatch, accuracy.ToAccuracy, parity.Parity, scaling.Scaling,
             tuneloader.TuneLoader)  # fmt: skip
    resumable = {m.name: m for m in modes}
    execute.resume(args, machine(), resumable)


def check(args):
    """Does every technique work on this machine? (bench/modes/check.py)"""
    check_mode.main(args, machine(), new_id())


def max_batch(args):
    """The largest batch each training variant affords (bench/modes/maxbatch.py): the plan's runs at other batches."""
    info = machine()
    gpu_count = info["gpu_count"] if args.gpus is None else args.gpus
    if not gpu_count and not args.memory_limit:
        fail("--max-batch on a CPU needs --memory-limit MIB: without it a probe would take all of the machine's memory")
    if gpu_count and args.memory_limit:
        fail("--memory-limit is a CPU's stand-in for a GPU's memory: on a GPU the device's memory is the limit")
    logs = logs_of(args.out, new_id())
    whole = argparse.Namespace(**{**vars(args), "budget": "none"})  # the budget is the mode's, not the bench's plan's
    runs, works, _ = plan.make_plan(
        whole, gpu_count, info["cpu_cores"], logs, args.dry_run, info["cpu_bf16_native"], calibrate.steps
    )
    if args.dry_run:
        train = [r for r in runs if r.kind == "train" and r.repeat == 1 and "synthetic" not in r.variant]
        budget_s = cost.budget_s(args.budget, gpu_count)
        rounds = args.repeats if isinstance(args.repeats, int) else maxbatch.ROUNDS
        print(f"{maxbatch.say_estimate(train, bool(gpu_count), budget_s, rounds)}:")
        for r in train:
            print(f"  {r.variant}: {shlex.join(r.with_flags(flags={'--batch-size': 'N'}).cmd)}")
        return
    try:
        maxbatch.main(args, info, runs, logs, works)
    finally:
        redraw(args.out, info)


def redraw(out, info):
    """After --max-batch: the bench's plots again, memory.png gaining each row's largest batch."""
    if (out / "runs.csv").exists() and (out / "max_batch.csv").exists():
        try:
            speed.write_outputs(out, record.read_runs(out / "runs.csv")["bench_id"].iloc[-1], info)
        except BenchError as e:  # the mode's own table is written: say why the bench's plots are not redrawn
            print(f"warning: the bench's plots in {out} are as they were: {e}", file=sys.stderr)


def to_accuracy(args):
    """Time to a validation accuracy for each training variant (bench/modes/accuracy.py)."""
    info = planned_for(args)
    bench_id = new_id()
    logs = logs_of(args.out, bench_id)
    if args.dry_run:
        runs, epochs = accuracy.runs_of(args, info, info["gpu_count"], logs, generate=False)
        estimate = cost.accuracy_s(runs, epochs, info["gpu_count"], info["cpu_bf16_native"])
        print(f"to accuracy {args.to_accuracy:g}: {len(runs)} variants, at most {epochs} epochs each, at most about"
              f" {estimate / 60:.0f} min:")  # fmt: skip
        for r in runs:
            print(f"  {r.variant}: {shlex.join(r.cmd)}")
        return
    accuracy.main(args, info, bench_id)


def learns_the_same(args):
    """Does each technique learn the same as the baseline's seeds? (bench/modes/parity.py)"""
    info = planned_for(args)
    bench_id = new_id()
    if args.dry_run:
        runs = parity.runs_of(args, info, info["gpu_count"], logs_of(args.out, bench_id), generate=False)
        parity.say(runs, bool(info["gpu_count"]), info, cost.budget_s(args.budget, info["gpu_count"]))
        for r in runs:
            print(f"  {r.name}: {shlex.join(r.cmd)}")
        return
    parity.main(args, info, bench_id)


def scale(args):
    """DDP's rows at each process count: speed-up and efficiency (bench/modes/scaling.py)."""
    info = planned_for(args)
    gpu_count = info["gpu_count"]
    logs = logs_of(args.out, new_id())
    counts = args.scaling
    scaling.check_counts(counts, gpu_count, info["cpu_cores"], args.nodes)
    one = argparse.Namespace(**{**vars(args), "variants": args.scaling_variants, "loaders": [], "repeats": 1})
    one.budget = "none"  # the plan gives the work; the budget is the mode's
    one.nproc = min(counts[-1], gpu_count) if args.nodes and gpu_count else counts[-1]  # per node
    one.workload = args.workload or (None if args.data else "small")
    _, works, _ = plan.make_plan(
        one, gpu_count, info["cpu_cores"], logs, args.dry_run, info["cpu_bf16_native"], calibrate.steps
    )
    work = next(iter(works.values()))
    runs = scaling.runs_of(args, counts, gpu_count, info["cpu_cores"], work, logs)
    if args.dry_run:
        gpu = bool(gpu_count)
        minutes = cost.scaling_s(runs, gpu, info["cpu_bf16_native"]) / 60
        print(
            f"scaling ({args.scaling_mode}): {len(runs)} runs, about {minutes:.0f} min{cost.cold_compiles(runs, gpu)}:"
        )
        for r in runs:
            print(f"  round {r.repeat}: {r.variant} x{r.processes}: {shlex.join(slurm.launched(r))}")
        return
    scaling.main(args, info, runs, logs, counts, works)


def tune_loader(args):
    """The loader's settings for this machine (bench/modes/tuneloader.py): the plan's loader and baseline rows."""
    info = planned_for(args)
    gpu_count = info["gpu_count"]
    logs = logs_of(args.out, new_id())
    loaders = [name for name in args.loaders if name == "loader" or importlib.util.find_spec("nvidia.dali")]
    if "loader" not in loaders:
        fail(
            "--tune-loader trains at the torchvision loader's settings: --loaders needs loader (DALI's threads beside)"
        )
    one = argparse.Namespace(**{**vars(args), "variants": ["synthetic", "baseline"], "loaders": loaders})
    one.repeats, one.budget, one.default_variants, one.default_loaders = 1, "none", False, False
    runs, works, _ = plan.make_plan(
        one, gpu_count, info["cpu_cores"], logs, args.dry_run, info["cpu_bf16_native"], calibrate.steps
    )
    first = next(iter(works))  # one workload: the default's, or the one asked for
    planned = {r.variant: r for r in runs if r.repeat == 1 and r.workload == first}
    if args.dry_run:
        tuneloader.say(args, info, planned)
        for r in tuneloader.runs_of(planned, tuneloader.most(args, info), bool(gpu_count)):
            print(f"  {r.name}: {shlex.join(r.cmd)}")
        print(f"  then rounds of: {shlex.join(planned['baseline'].cmd)} (and the ceiling, synthetic)")
        return
    tuneloader.main(args, info, planned, logs, works)


MODES = dict(run=run, resume=resume, summarize=summarize_again, save_baseline=save_baseline, check=check, readme=readme)
MODES.update(max_batch=max_batch, to_accuracy=to_accuracy, parity=learns_the_same, scaling=scale)
MODES.update(tune_loader=tune_loader)


LOCKED = {
    "run",
    "resume",
    "summarize",
    "save_baseline",
    "check",
    "max_batch",
    "to_accuracy",
    "parity",
    "scaling",
    "tune_loader",
}  # the modes that read or write --out


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
    args = parse_args(argv)
    if not args.dry_run:
        check_outputs(args)
    held = lock(args.out) if not args.dry_run and args.mode in LOCKED and args.out.is_dir() else None
    try:
        MODES[args.mode](args)
    finally:
        if held is not None:
            held.release()
