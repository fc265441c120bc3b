"""What the bench's work costs in time, in one place: every assumption an estimate makes before a bench has measured
anything (after its first round, a bench's own measured run times take over: bench/stages/running/execute.py), each
mode's estimate, the time a run may take before it is stopped, and --budget in seconds.

The assumptions were measured: on a CPU by the default plans on a 2-core AMD EPYC (AVX2 only, 2026-11-23); on a GPU
by the first GPU run on an H100 (2026-11-25, baseline/h100-first-run-*), what it did not reach still assumed.
"""

import math
from dataclasses import dataclass

import pandas as pd

WINDOW_S = 7.0  # the mixed-precision ceiling's timed window, at least: a compiled row up to 1.4x faster keeps 5 s
WINDOW_MIN_S = 3.0  # the shortest window a budget may ask for
# the default --budget, minutes: on a GPU two rounds of both workloads by the first GPU run's costs (about 31
# min, each workload's round under 9: a lent GPU runs it in parts, --chunk 9 and --resume)
BUDGET_MIN = dict(gpu=35, cpu=25)
# seconds a run may take before it is stopped, unless --timeout says (a cold compile on 2 cores: minutes); a run of
# --to-accuracy trains up to its epochs
TIMEOUT_S = dict(
    speed=dict(gpu=900, cpu=600), check=dict(gpu=600, cpu=600), to_accuracy=dict(gpu=6 * 3600, cpu=6 * 3600)
)


# generating a workload's data (bench/data.py), images a second per core, as measured on a 2-core Xeon (2026-11-27):
# the imagenet workload's 22,000 photos in 97 s, small's 60,000 images of 32 px in 19 s
DATA_PER_CORE = dict(photo=115.0, small=1600.0)


def data_s(spec, cores):
    """The seconds generating a workload's data (spec: bench/data.py's WORKLOADS entry) takes on cores cores."""
    images = 10 * (spec["train"] + spec["val"])  # 10 classes
    return images / (DATA_PER_CORE["photo" if spec["photo"] else "small"] * max(1, cores))


def budget_s(budget, gpu=None):
    """--budget in seconds (the one place minutes become seconds): None for none; unset, the machine's default
    (BUDGET_MIN), or None where gpu is None (a plan that fitted its own budget already)."""
    if budget == "none" or (budget is None and gpu is None):
        return None
    return 60 * (budget or BUDGET_MIN["gpu" if gpu else "cpu"])


def timeout_s(asked, gpu, mode="speed"):
    """The seconds a run may take: --timeout where given, else the mode's default on this kind of machine."""
    return asked or TIMEOUT_S[mode]["gpu" if gpu else "cpu"]


# The bench (speed, scaling): a training run's seconds outside its timed window (start-up, setup, warm-up,
# evaluation), the window (a CPU: the baseline's per 20 steps timed), a compile cold (the first repeat) and warm, a
# loader run in all, a calibration. The GPU's from the first GPU run (a row outside its window 13 to 34 s, resnet50's
# cuDNN autotuning and 15 loader workers the most; a cold compile 40 to 66 s more than the baseline's row), its warm
# compile and calibration still assumed.
COST_S = dict(
    cpu=dict(fixed=10.0, window=6.0, cold=110.0, warm=10.0, loader=9.0, calibrate=0.0),
    gpu=dict(fixed=25.0, window=WINDOW_S, cold=60.0, warm=15.0, loader=15.0, calibrate=25.0),
)
# a row's window against the fastest row's (a GPU: the mixed-precision ceiling's, which calibrates the steps; a CPU:
# the baseline's, at its fixed steps). GPU, by the step times of the first GPU run (H100, one round each): resnet50
# in fp32 (TF32 convolutions) 1.2x its bf16, channels_last 0.91x, compile 0.75x; vit_b_16 in fp32 (its matmuls without
# Tensor Cores) 5.3x its bf16, TF32 2.1x, checkpoint 6.5x; the rows it did not reach as their nearest measured one.
# CPU, as measured there: checkpoint 1.3x, the synthetic ceiling 0.75x, and bf16 where the CPU does not compute it
# natively 6x (shufflenet on the AVX2-only EPYC: 6.1x to 6.7x); the small ViT on a 2-core Xeon with AVX-512-BF16:
# bf16 matmuls (tf32) 1.6x, FSDP 1.2x DDP's window. Each row's factors are its catalogue row's `slower`
# (bench/catalogue.py): gpu a CNN (resnet50), gpu-vit a transformer (vit_b_16), cpu; 1 where none is given.
EMULATED_BF16 = 6.0


def slower(run, gpu, bf16_native=True):
    """A run's window against the fastest row's (its catalogue row's, which the run reads: Run.slower), bf16
    emulated on a CPU without it (EMULATED_BF16)."""
    factor = run.slower(("gpu-vit" if run.workload == "vit" else "gpu") if gpu else "cpu")
    if not gpu and not bf16_native and run.amp:
        factor *= EMULATED_BF16
    return factor


def compile_s(run, gpu, repeat=None):
    """A compiled run's compile: cold in its row's first round (repeat: the run's own unless given; each row and
    bench has its own cache, and a row over another loader shares its row's, which runs before it), warm after."""
    if not run.compiles:
        return 0
    cost = COST_S["gpu" if gpu else "cpu"]
    cold = (run.repeat if repeat is None else repeat) == 1 and run.own_cache
    return cost["cold"] if cold else cost["warm"]


def run_s(run, fastest_s, gpu, bf16_native=True):
    """The seconds a run of the bench should take (fastest_s: the fastest row's window)."""
    cost = COST_S["gpu" if gpu else "cpu"]
    if run.kind == "loader":
        return cost["loader"]
    return cost["fixed"] + window_s(run, fastest_s, gpu, bf16_native) + compile_s(run, gpu)


def window_s(run, fastest_s, gpu, bf16_native=True):
    """A training run's timed window: the fastest row's at its row's factor (slower: bf16 emulated)."""
    return fastest_s * slower(run, gpu, bf16_native)


def cold_compiles(runs, gpu):
    """What an estimate holds for compiling: ' (N cold compiles of about S s each in it)', or '' where none."""
    cold = [r for r in runs if r.kind == "train" and r.repeat == 1 and r.compiles]
    if not cold:
        return ""
    return f" ({len(cold)} cold compiles of about {COST_S['gpu' if gpu else 'cpu']['cold']:.0f} s each in it)"


# ----------------------------------------------------------------------------- a GPU plan from its saved runs

# A GPU row's estimate from saved GPU runs of the same model and global batch (baseline/*/runs.csv, device cuda):
# medians over its runs of what each part of a run took. Where a row has none, or a part was never measured (a warm
# compile's first step: every saved compiled run started cold), the part is assumed and the dry run says which.
WARMUP_STEADY = 10  # warm-up steps enough where the step time is steady after them (a calibration's, a saved run's)
STEADY = 1.1  # steady: the 90th percentile of the step time within 10% of its median
FIRST_WARM_COMPILE_S = 25.0  # assumed: a compiled row's first step from a warm cache (cuDNN's autotuning, the load)
EVAL_IMAGES = 1000  # the saved GPU runs' evaluation sample


@dataclass(frozen=True)
class Saved:
    """What the saved runs of one GPU row measured, medians over them (seconds)."""

    start_s: float  # the process's start and stop and its setup (other_s + setup_s)
    first_s: float  # a first round's first step: cuDNN's autotuning, CUDA's lazy loading; a compiled row's cold compile
    warm_step_s: float  # each warm-up step after the first
    eval_s: float  # an evaluation of EVAL_IMAGES images
    step_s: float  # a timed step
    steady: bool  # its timed steps were steady (STEADY) after its warm-up
    warmup: int  # the warm-up steps its runs took
    needed: int | None  # the warm-up its runs needed (warmup_steady_steps: the most of them), None where not known
    runs: int
    where: str  # the saved folders and GPUs they come from
    later_first_s: float | None = None  # a later round's first step (what a row's first run paid once; a compile
    # cache warm): the fourth GPU run's eager rows took up to 22 s in their first round, 5-9 s later


def command_flag(command, flag, default):
    """The value of flag in a saved run's command line, or default."""
    parts = str(command).split()
    return parts[parts.index(flag) + 1] if flag in parts[:-1] else default


def saved_costs(runs, gpu_name=None):
    """{(model, global batch, variant): Saved} from saved GPU training runs (a DataFrame of runs.csv rows, with a
    `folder` column); runs on a GPU named gpu_name where that GPU has some, else every GPU's."""
    runs = runs[(runs["device"] == "cuda") & (runs["status"] == "ok") & (runs["kind"] == "train")]
    if gpu_name is not None and (runs["gpu_name"] == gpu_name).any():
        runs = runs[runs["gpu_name"] == gpu_name]
    found = {}
    for (model, batch, variant), group in runs.groupby(["model", "global_batch_size", "variant"]):
        warmup = group["command"].map(lambda c: int(command_flag(c, "--warmup-steps", 5)))
        warm = (group["warmup_s"] - group["first_step_s"]) / (warmup - 1).clip(lower=1)
        evaluated = group["val_samples"].where(group["val_samples"] > 0)
        eval_s = (group["eval_s"] / evaluated * EVAL_IMAGES).median()
        where = ", ".join(f"{f} ({g})" for f, g in sorted(set(zip(group["folder"], group["gpu_name"]))))
        later = group["repeat"] > 1 if "repeat" in group else pd.Series(False, index=group.index)
        first = group.loc[~later, "first_step_s"] if (~later).any() else group["first_step_s"]
        found[(model, int(batch), variant)] = Saved(
            start_s=(group["other_s"] + group["setup_s"]).median(),
            first_s=first.median(),
            later_first_s=group.loc[later, "first_step_s"].median() if later.any() else None,
            warm_step_s=warm.median(),
            eval_s=0.0 if math.isnan(eval_s) else eval_s,
            step_s=group["step_time_median_ms"].median() / 1e3,
            steady=bool((group["step_time_p90_ms"] <= STEADY * group["step_time_median_ms"]).all()),
            warmup=int(warmup.min()),
            needed=needed_warmup(group),
            runs=len(group),
            where=where,
        )
    return found


def needed_warmup(runs):
    """The most warm-up steps any of the runs needed (their warmup_steady_steps), or None where one did not say."""
    if "warmup_steady_steps" not in runs or runs["warmup_steady_steps"].isna().any():
        return None
    return int(runs["warmup_steady_steps"].max())


def first_step_s(saved, run):
    """A run's first step by its row's saved runs: the first round's, or a later round's where it is later (a
    compiled row's from a warm cache: assumed where no saved run has one)."""
    if run.repeat <= 1:
        return saved.first_s
    if saved.later_first_s is not None:
        return saved.later_first_s
    return FIRST_WARM_COMPILE_S if run.compiles else saved.first_s


def saved_run_s(run, saved):
    """A GPU training run's seconds from its row's saved costs: its start, its first step (first_step_s), its
    warm-up, its timed steps and its evaluation, as its command asks."""
    steps, warmup = int(run.flags["--steps"]), int(run.flags["--warmup-steps"])
    evaluated = run.flags.get("--eval-samples")
    images = 0 if evaluated in (None, "0", 0) else EVAL_IMAGES if evaluated == "all" else int(evaluated)
    first = first_step_s(saved, run)
    return (
        saved.start_s
        + first
        + saved.warm_step_s * max(0, warmup - 1)
        + saved.step_s * (steps - warmup)
        + saved.eval_s * images / EVAL_IMAGES
    )
