"""The bench: every variant on the same work, then tables, plots and the saved baseline.

    python -m bench                                # the default plan for this machine: CPU, 1 GPU or N GPUs
    python -m bench --variants baseline,amp --repeats 5
    python -m bench --model resnet50 --batch-size 512 --steps 200 --timeout 1200
    python -m bench --dry-run                      # print the command lines and stop
    python -m bench --summarize                    # tables and plots again from the last bench in runs.csv
    python -m bench --save-baseline                # keep results/ as baseline/<machine class>/ (make baseline)

Writes results/runs.csv (one row per run, appended), results/summary.csv, results/summary.md,
results/throughput.png, results/memory.png, and each run's output under results/logs/.
"""

import argparse
import secrets
import signal
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

from bench import baseline, plan, tables
from bench.data import generate
from bench.launch import launch
from bench.machine import machine_class, machine_info
from bench.plots import plot_memory, plot_throughput


def die(message):
    print(f"bench: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_args(gpu_count):
    defaults = plan.GPU_DEFAULTS if gpu_count else plan.CPU_DEFAULTS
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data", help="data folder for every run (data/ is generated when missing)")
    p.add_argument("--out", default="results", help="folder for the tables, plots and logs")
    p.add_argument("--variants", default=",".join(plan.TRAIN), help="training variants, comma-separated")
    p.add_argument("--loaders", default=",".join(plan.LOADERS), help="loader-only benchmarks, or 'none'")
    p.add_argument("--model", default=defaults["model"], help="torchvision model for every run")
    p.add_argument("--batch-size", type=int, default=defaults["batch_size"], help="global batch of every run")
    p.add_argument("--steps", type=int, default=defaults["steps"], help="training steps of every run, warm-up included")
    p.add_argument("--warmup-steps", type=int, default=defaults["warmup_steps"], help="steps left out of the timing")
    p.add_argument("--loader-steps", type=int, default=defaults["loader_steps"], help="batches timed by --bench")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per variant")
    p.add_argument("--workers", type=int, default=None, help="loader processes per training process")
    p.add_argument("--nproc", type=int, default=None, help="DDP processes (default: the GPUs, or 2 on a CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, default=defaults["timeout"], help="seconds before a run is stopped")
    p.add_argument("--dry-run", action="store_true", help="print the plan's command lines and stop")
    p.add_argument("--summarize", action="store_true", help="tables and plots from the last bench in runs.csv")
    p.add_argument("--save-baseline", nargs="?", const="", metavar="NAME", help="save the results as a baseline")
    p.add_argument("--baseline-dir", default=str(baseline.BASELINE_DIR), help="where saved baselines are kept")
    p.error = die
    args = p.parse_args()
    args.variants = [v for v in args.variants.split(",") if v]
    args.loaders = [v for v in args.loaders.split(",") if v and v != "none"]
    for name in args.variants:
        if name not in plan.TRAIN:
            die(f"unknown variant {name!r}: choose from {', '.join(plan.TRAIN)}")
    for name in args.loaders:
        if name not in plan.LOADERS:
            die(f"unknown loader benchmark {name!r}: choose from {', '.join(plan.LOADERS)} or none")
    if min(args.batch_size, args.steps, args.repeats, args.loader_steps, args.timeout) < 1:
        die("--batch-size, --steps, --repeats, --loader-steps and --timeout must be >= 1")
    if args.warmup_steps >= args.steps:
        die(f"--warmup-steps {args.warmup_steps} leaves none of the {args.steps} steps to time")
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


def main():
    machine = machine_info()
    args = parse_args(machine["gpu_count"])
    machine["machine_class"] = machine_class(machine)
    out = Path(args.out)
    if args.save_baseline is not None:
        if not (out / "summary.csv").exists():
            die(f"no {out}/summary.csv to save: run the bench first")
        folder = baseline.save(out, args.save_baseline or machine["machine_class"], machine, Path(args.baseline_dir))
        print(f"saved {out}/summary.* as {folder}")
        return
    if args.summarize:
        if not (out / "runs.csv").exists():
            die(f"no {out}/runs.csv: run the bench first")
        bench_id = tables.read_runs(out / "runs.csv")["bench_id"].iloc[-1]
        report(write_outputs(out, bench_id, machine), out, machine, Path(args.baseline_dir))
        return

    data = Path(args.data).resolve()
    if not data.exists():
        if args.data != "data":
            die(f"data folder {args.data} does not exist")
        print("generating the default data in data/ (python -m bench.data)")
        generate(str(data))
    args.data = str(data)
    runs = plan.make_plan(args, machine["gpu_count"], machine["cpu_cores"])
    if args.dry_run:
        print("\n".join(" ".join(run.cmd) for run in runs))
        return
    bench_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)
    logs = out / "logs" / bench_id
    logs.mkdir(parents=True, exist_ok=True)
    try:
        tables.check_runs_file(out / "runs.csv")
    except tables.RunsFileError as e:
        die(str(e))
    stop = threading.Event()  # Ctrl-C and SIGTERM: stop the run in progress, keep the finished ones
    for signum in signal.SIGINT, signal.SIGTERM:
        signal.signal(signum, lambda *_: stop.set())
    print(f"bench {bench_id}: {len(runs)} runs on {machine['machine_class']}, logs in {logs}/")
    failed = 0
    for i, run in enumerate(runs, 1):
        row = None if stop.is_set() else launch(run, logs, args.timeout, stop)
        if row is None:
            print(f"interrupted during {run.name}: the {i - 1} finished runs are in {out}/runs.csv")
            break
        row.update(bench_id=bench_id, **machine)
        tables.append_row(out / "runs.csv", row)
        failed += row["status"] != "ok"
        rate = row.get("samples_per_s") or row.get("images_per_s")
        result = (
            f"{rate:,.1f} {'samples' if run.kind == 'train' else 'images'}/s" if rate else "FAILED: " + row["error"]
        )
        print(f"[{i}/{len(runs)}] {run.name}: {result} ({row['wall_s']:.1f} s)", flush=True)
    report(write_outputs(out, bench_id, machine), out, machine, Path(args.baseline_dir))
    if stop.is_set():
        raise SystemExit(130)
    if failed:
        print(f"{failed} of {len(runs)} runs failed: see the error column of {out}/runs.csv and {logs}/")
        raise SystemExit(1)


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
