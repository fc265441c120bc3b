"""Saved baselines: reference summaries that a new bench is compared with, one folder per machine class.

`make baseline` (python -m bench --save-baseline) copies the latest summary, its plots, its runs
(commands, versions, every metric) and the machine's description to baseline/<machine class>/, and the tables and
plots of --to-accuracy, --max-batch, --scaling, --parity and --tune-loader where they are in the results folder.
A later bench on the same class of machine prints each variant's change against the saved one,
where the work was the same (the schema's workload fields). A baseline saved by an older version
is read with its columns renamed (bench/schema.py).
"""

import json
import shutil
from pathlib import Path

import pandas as pd

from bench import BenchError, check_folder, logs_of, schema, write_whole
from bench.config import Outputs
from bench.stages.records import record

BASELINE_DIR = Outputs.baseline_dir  # the configuration's default (--baseline-dir)
OUTPUTS = ["summary.csv", "summary.md", "report.html", "throughput.png", "memory.png", "tradeoff.png", "time.png"]
OUTPUTS += ["curves.json", "curves.png"]  # the learning curves: the logs they come from stay behind
OUTPUTS += ["profiles.json"]  # --profile: each run's operators (its trace stays behind with the logs)


def save(results_dir, name, machine, outputs, baseline_dir=BASELINE_DIR):
    """Copy the outputs in results_dir (the summary's, and a mode's tables: --to-accuracy, --max-batch, --scaling, ...;
    runs.csv apart: the last bench's rows) to baseline_dir/name; return that folder."""
    folder = baseline_dir / name
    check_folder(folder, "the baseline folder")
    for output in outputs:
        if (results_dir / output).exists():
            write_whole(folder / output, lambda tmp, source=results_dir / output: shutil.copy2(source, tmp))
    runs_kept = (results_dir / "runs.csv").exists()
    if runs_kept:  # the rows of the bench summarized: the last one
        runs = record.read_runs(results_dir / "runs.csv")
        runs = runs[runs["bench_id"] == runs["bench_id"].iloc[-1]]
        write_whole(folder / "runs.csv", lambda tmp: runs.to_csv(tmp, index=False))
        rounds = logs_of(results_dir, runs["bench_id"].iloc[-1]) / "rounds.txt"  # why its rounds stopped
        if rounds.exists():
            write_whole(folder / "rounds.txt", lambda tmp: shutil.copy2(rounds, tmp))
    if runs_kept or not (folder / "machine.json").exists():  # the machine of the runs kept (a mode alone keeps it)
        write_whole(folder / "machine.json", lambda tmp: Path(tmp).write_text(json.dumps(machine, indent=1) + "\n"))
    return folder


def load(name, baseline_dir=BASELINE_DIR):
    path = baseline_dir / name / "summary.csv"
    if not path.exists():
        return None
    try:
        return schema.upgrade(record.load_csv(path, needed=("variant",)))
    except schema.VersionError as e:
        raise BenchError(f"{path}: {e}") from None


def compare(summary, saved):
    """One line per variant found in both with the same work: rate and memory against the saved ones."""
    workload = [c for c in schema.WORKLOAD if c in summary and c in saved]
    matched = summary.merge(saved, on=workload, suffixes=("", "_saved"))
    lines = []
    for _, row in matched.iterrows():
        if not row.rate_median_saved or pd.isna(row.rate_median) or pd.isna(row.rate_median_saved):
            continue
        unit = "samples/s" if row.kind == "train" else "images/s"
        change = row.rate_median / row.rate_median_saved - 1
        line = f"{row.variant}: {row.rate_median:,.1f} {unit}, {change:+.1%} against {row.rate_median_saved:,.1f}"
        if row.get("runs_diverged") or row.get("runs_diverged_saved"):
            line += " (a run DIVERGED: not a fair comparison)"
        for column, label in ("nvml_peak_mib", "GPU memory (NVML)"), ("peak_host_mem_mib", "host memory"):
            if pd.notna(row.get(column)) and pd.notna(row.get(f"{column}_saved")):
                line += f", {label} {row[column] / row[f'{column}_saved']:.2f}x"
                break
        lines.append(line)
    return lines


def gpu_runs(baseline_dir=BASELINE_DIR):
    """Every saved GPU training run (each saved runs.csv's rows on cuda), with the folder it is saved in: what a GPU
    plan's estimates are made from (bench/stages/cost.py's saved_costs). An empty table where none is saved."""
    found = []
    for path in sorted(Path(baseline_dir).glob("*/runs.csv")):
        try:
            runs = record.load_csv(path, needed=("variant",))
            runs = schema.upgrade(runs)
        except (BenchError, schema.VersionError):
            continue  # a damaged or unknown table: the plan's constants stand in for it
        if "device" in runs and (runs["device"] == "cuda").any():
            found.append(runs[runs["device"] == "cuda"].assign(folder=f"{Path(baseline_dir).name}/{path.parent.name}"))
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame()
