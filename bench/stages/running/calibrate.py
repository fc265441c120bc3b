"""Calibration: on a GPU (--steps auto) the steps of every row, from one short run of the fastest row, launched as a
row is launched. The planner asks for them (plan.make_plan(..., calibrate=steps)); it launches nothing itself."""

import math
import threading
from dataclasses import replace
from pathlib import Path

from bench import BenchError
from bench.catalogue import compiled, distributed
from bench.stages.cost import STEADY, WARMUP_STEADY, WINDOW_S
from bench.stages.planning.build import training_run
from bench.stages.running import launch


def calibration_variant(variants):
    """The row that calibrates: the fastest, a ceiling, where one is planned; else the first row that is not compiled
    (a cold compile inside the calibration would take minutes); else the first."""
    ceilings = [v for v in ("amp-synthetic", "synthetic") if v in variants]
    return (ceilings or [v for v in variants if not compiled(v)] or variants)[0]


def steps(path, info, chosen, gpu_count, variants, log, nproc=1, window_s=WINDOW_S, workers=None, cores=1):
    """Steps for every row: enough for the fastest one to time window_s seconds. The fastest single process is the
    mixed-precision ceiling; DDP rows on nproc GPUs split each step over them, so they may be up to nproc times
    faster still, and the steps are multiplied by nproc where such rows are planned. The calibration run warms up
    for WARMUP_STEADY steps: where its steps are steady after them (STEADY), chosen's warm-up is cut to that.
    It runs as a row runs (bench/stages/running/launch.py): the loader workers a one-process row gets, the run time
    limit (a hung calibration ends the bench with one line), its log in log/calibration-VARIANT-0.log."""
    variant = calibration_variant(variants)
    warmup = min(chosen.warmup_steps, WARMUP_STEADY)
    run = training_run(variant, 0, path=path, info=info, chosen=replace(chosen, steps=warmup + 60, warmup_steps=warmup),
                       gpu_count=gpu_count, nproc=1, workers=workers, cores=cores, workload="custom",
                       prefix="calibration-")  # fmt: skip
    log = Path(log)
    log.mkdir(parents=True, exist_ok=True)
    row = launch.launch(run, log, chosen.timeout, threading.Event())
    if row["status"] != "ok":
        raise BenchError(f"calibration ({variant}) failed: {row['error']} (its log: {log / run.name}.log)")
    step_s = row["step_time_median_ms"] / 1e3
    if row["step_time_p90_ms"] > STEADY * row["step_time_median_ms"]:  # not steady yet: the full warm-up
        warmup = chosen.warmup_steps
    chosen.warmup_steps = warmup
    split = nproc if gpu_count and any(distributed(v) for v in variants) else 1
    timed = max(50, math.ceil(window_s * split / step_s))
    over = f" ({split} DDP processes may split a step)" if split > 1 else ""
    print(f"calibrated: {variant} takes {step_s * 1e3:.1f} ms a step: {timed} steps timed after {warmup}{over}"
          f" (90th percentile {row['step_time_p90_ms']:.1f} ms)", flush=True)  # fmt: skip
    return warmup + timed
