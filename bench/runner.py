"""The bench: every variant on the same work, then tables, plots and the saved baseline.

    python -m bench                                # the default plan for this machine: CPU, 1 GPU or N GPUs
    python -m bench --variants baseline,amp --repeats 5
    python -m bench --model resnet50 --batch-size 512 --steps 200 --timeout 1200
    python -m bench --dry-run                      # print the command lines and stop
    python -m bench --summarize                    # tables and plots again from the last bench in runs.csv
    python -m bench --save-baseline                # keep results/ as baseline/<machine class>/ (make baseline)

Writes results/runs.csv (one row per run, appended), results/summary.csv, results/summary.md,
results/throughput.png, results/memory.png, and each run's output under results/logs/.
Three modes, one function each: run (the default), summarize, save_baseline. The arguments are
parsed before the machine is looked at; every error is a BenchError, printed once by __main__.
"""

import argparse
import secrets
import signal
import threading
from datetime import datetime, timezone
from pathlib import Path

from bench import BenchError, baseline, plan, tables
from bench.data import generate
from bench.launch import launch
from bench.machine import machine_class, machine_info
from bench.plots import plot_memory, plot_throughput


def fail(message):
    raise BenchError(message)


def parse_args(argv=None):
    """The flags; those whose default depends on the machine stay None until plan.fill_defaults()."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data", help="data folder for every run (data/ is generated when missing)")
    p.add_argument("--out", default="results", help="folder for the tables, plots and logs")
    p.add_argument("--variants", default=",".join(plan.TRAIN), help="training variants, comma-separated")
    p.add_argument("--loaders", default=",".join(plan.LOADERS), help="loader-only benchmarks, or 'none'")
    p.add_argument("--model", help="torchvision model for every run (CPU: shufflenet_v2_x0_5, GPU: resnet18)")
    p.add_argument("--batch-size", type=int, help="global batch of every run (CPU: 64, GPU: 256)")
    p.add_argument("--steps", type=int, help="training steps of every run, warm-up included (CPU: 25, GPU: 110)")
    p.add_argument("--warmup-steps", type=int, help="steps left out of the timing (CPU: 5, GPU: 10)")
    p.add_argument("--loader-steps", type=int, help="batches timed by --bench (CPU: 50, GPU: 100)")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per variant")
    p.add_argument("--workers", type=int, default=None, help="loader processes per training process")
    p.add_argument("--nproc", type=int, default=None, help="DDP processes (default: the GPUs, or 2 on a CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, help="seconds before a run is stopped (CPU: 300, GPU: 600)")
    p.add_argument("--dry-run", action="store_true", help="print the plan's command lines and stop")
    p.add_argument("--summarize", action="store_true", help="tables and plots from the last bench in runs.csv")
    p.add_argument("--save-baseline", nargs="?", const="", metavar="NAME", help="save the results as a baseline")
    p.add_argument("--baseline-dir", default=str(baseline.BASELINE_DIR), help="where saved baselines are kept")
    p.error = fail
    args = p.parse_args(argv)
    args.variants = [v for v in args.variants.split(",") if v]
    args.loaders = [v for v in args.loaders.split(",") if v and v != "none"]
    for name in args.variants:
        if name not in plan.TRAIN:
            fail(f"unknown variant {name!r}: choose from {', '.join(plan.TRAIN)}")
    for name in args.loaders:
        if name not in plan.LOADERS:
            fail(f"unknown loader benchmark {name!r}: choose from {', '.join(plan.LOADERS)} or none")
    counts = dict(batch_size=args.batch_size, steps=args.steps, repeats=args.repeats)
    counts.update(loader_steps=args.loader_steps, timeout=args.timeout, nproc=args.nproc)
    for name, value in counts.items():
        if value is not None and value < 1:
            fail(f"--{name.replace('_', '-')} must be >= 1")
    for name, value in dict(warmup_steps=args.warmup_steps, workers=args.workers).items():
        if value is not None and value < 0:
            fail(f"--{name.replace('_', '-')} must be >= 0")
    args.mode = "save_baseline" if args.save_baseline is not None else "summarize" if args.summarize else "run"
    args.out, args.baseline_dir = Path(args.out), Path(args.baseline_dir)
    return args


def title(summary, machine):
    train = summary[summary["kind"] == "train"].dropna(subset=["model"])
    if machine["gpu_count"]:
        where = f"{machine['gpu_count']}x {machine['gpu_name']}"
    else:
        where = f"CPU only: {machine['cpu_model']}, {machine['cpu_cores']} cores"
    if train.empty:
        return where
    r = train.iloc[0]
    return (
        f"{where}; {r.model} on {r.dataset} ({r.image_size:.0f} px), global batch {r.global_batch_size:.0f}, "
        f"{r.steps_timed:.0f} steps timed"
    )


def write_outputs(out, bench_id, machine):
    """summary.csv, summary.md and both plots from the rows of bench_id; return the summary."""
    runs = tables.read_runs(out / "runs.csv")
    runs = runs[runs["bench_id"] == bench_id]
    if runs.empty:
        return None
    summary = tables.summarize(runs)
    heading = title(summary, machine)
    when = runs["time_utc"].iloc[0]
    summary.to_csv(out / "summary.csv.tmp", index=False)
    Path(out / "summary.csv.tmp").replace(out / "summary.csv")
    (out / "summary.md").write_text(tables.markdown(summary, f"{heading} ({when}, bench {bench_id})"))
    plot_throughput(summary, out / "throughput.png", heading)
    plot_memory(summary, out / "memory.png", heading)
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
    print(f"tables and plots: {out}/summary.csv, summary.md, throughput.png, memory.png; every run: {out}/runs.csv")


def machine():
    info = machine_info()
    info["machine_class"] = machine_class(info)
    return info


def save_baseline(args):
    """Keep results/ as the saved baseline of this machine's class (or of the name given)."""
    if not (args.out / "summary.csv").exists():
        fail(f"no {args.out}/summary.csv to save: run the bench first")
    info = machine()
    folder = baseline.save(args.out, args.save_baseline or info["machine_class"], info, args.baseline_dir)
    print(f"saved {args.out}/summary.* as {folder}")


def summarize(args):
    """Tables and plots again from the last bench in runs.csv."""
    if not (args.out / "runs.csv").exists():
        fail(f"no {args.out}/runs.csv: run the bench first")
    info = machine()
    bench_id = tables.read_runs(args.out / "runs.csv")["bench_id"].iloc[-1]
    report(write_outputs(args.out, bench_id, info), args.out, info, args.baseline_dir)


def run(args):
    """Run every planned run, appending a row for each; then the tables, plots and the baseline comparison."""
    info = machine()
    plan.fill_defaults(args, info["gpu_count"])
    data = Path(args.data).resolve()
    if not data.exists() and not args.data.startswith("synthetic"):
        if args.data != "data":
            fail(f"data folder {args.data} does not exist")
        print("generating the default data in data/ (python -m bench.data)")
        generate(str(data))
    args.data = str(data) if data.exists() else args.data
    runs = plan.make_plan(args, info["gpu_count"], info["cpu_cores"], plan.describe(args.data))
    if args.dry_run:
        print("\n".join(" ".join(run.cmd) for run in runs))
        return
    out = args.out
    bench_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)
    logs = out / "logs" / bench_id
    logs.mkdir(parents=True, exist_ok=True)
    upgraded = tables.prepare_runs_file(out / "runs.csv")
    if upgraded:
        print(upgraded)
    stop = threading.Event()  # Ctrl-C and SIGTERM: stop the run in progress, keep the finished ones
    for signum in signal.SIGINT, signal.SIGTERM:
        signal.signal(signum, lambda *_: stop.set())
    print(f"bench {bench_id}: {len(runs)} runs on {info['machine_class']}, logs in {logs}/")
    failed = 0
    for i, run in enumerate(runs, 1):
        row = None if stop.is_set() else launch(run, logs, args.timeout, stop)
        if row is None:
            print(f"interrupted during {run.name}: the {i - 1} finished runs are in {out}/runs.csv")
            break
        row.update(bench_id=bench_id, **info)
        tables.append_row(out / "runs.csv", row)
        failed += row["status"] != "ok"
        rate = row.get("samples_per_s")
        result = (
            f"{rate:,.1f} {'samples' if run.kind == 'train' else 'images'}/s" if rate else "FAILED: " + row["error"]
        )
        busy = f"; BUSY: {row['busy_reason']}" if row.get("busy") else ""
        print(f"[{i}/{len(runs)}] {run.name}: {result} ({row['wall_s']:.1f} s{busy})", flush=True)
    report(write_outputs(out, bench_id, info), out, info, args.baseline_dir)
    if stop.is_set():
        raise SystemExit(130)
    if failed:
        print(f"{failed} of {len(runs)} runs failed: see the error column of {out}/runs.csv and {logs}/")
        raise SystemExit(1)


MODES = dict(run=run, summarize=summarize, save_baseline=save_baseline)


def main(argv=None):
    args = parse_args(argv)
    MODES[args.mode](args)
