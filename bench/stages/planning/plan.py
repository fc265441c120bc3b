"""Plan a bench: which runs, with which command lines, all on the same work.

Every training run of a workload gets the same model, data, global batch, step count and warm-up;
DDP splits the global batch over its processes, DataParallel over its GPUs. The synthetic rows
train on batches made once on the device, with the data's image size and classes: the speed limit
of the model on this machine, which the real rows of the same precision are read against. Repeats
are interleaved (baseline, dp, ..., baseline, dp, ...) so that drift in the machine's speed touches
every variant alike.

The defaults depend on the machine and the workload (DEFAULTS). On a GPU the steps are calibrated
(--steps auto): a short run of the fastest row, the mixed-precision ceiling (without ceilings, the
first row that is not compiled), run as a row runs, gives its step time, and every row then runs
enough steps for that row's timed window to last WINDOW_S seconds (bench/stages/running/calibrate.py runs it, through
the function the caller passes in). What the runs should take is bench/stages/cost.py's. The plan is stored with the
bench (plan.json in its log folder: bench/stages/planning/planfile.py) so that `--resume` can finish it.

By role: this module is the planner's four steps (make_plan) and the defaults; bench/stages/planning/planned.py the
records it makes (Work, Context, Fit, Run), bench/stages/planning/prepare.py the data and model checks (the one step
that writes, imports the scripts or launches), bench/stages/planning/build.py the runs, bench/stages/planning/fit.py the
budget."""

import dataclasses
import math
from dataclasses import dataclass

from bench import BenchError, data
from bench.catalogue import (
    CNN_ONLY,
    TRANSFORMER_ONLY,
    distributed,
    family,
)
from bench.data import data_workload
from bench.observe.machine import ROOT
from bench.stages import epochs
from bench.stages.cost import COST_S, budget_s, data_s, timeout_s
from bench.stages.planning import build, fit, prepare, slurm
from bench.stages.planning.planned import Context, Fit, Work

# the default work, by machine and workload; steps "auto": calibrated on the machine (GPU only). vit: a vision
# transformer trained as transformers are (AdamW, warmed up), on the 224 px photos on a GPU, the 32 px images on a CPU
DEFAULTS = {
    ("gpu", "vit"): dict(
        model="vit_b_16", optimizer="adamw", batch_size=128, steps="auto", warmup_steps=20, eval_samples=1000
    ),
    ("cpu", "vit"): dict(
        model="examples/vit_small.py:vit_small",
        optimizer="adamw",
        batch_size=64,
        steps=20,
        warmup_steps=3,
        eval_samples=500,
    ),
    ("gpu", "small"): dict(model="resnet18", batch_size=256, steps="auto", warmup_steps=30, eval_samples=2000),
    ("gpu", "imagenet"): dict(model="resnet50", batch_size=256, steps="auto", warmup_steps=20, eval_samples=1000),
    ("gpu", "custom"): dict(model="resnet50", batch_size=256, steps="auto", warmup_steps=20, eval_samples=1000),
    ("cpu", "small"): dict(model="shufflenet_v2_x0_5", batch_size=64, steps=30, warmup_steps=5, eval_samples=500),
    ("cpu", "imagenet"): dict(model="shufflenet_v2_x0_5", batch_size=16, steps=20, warmup_steps=3, eval_samples=100),
    ("cpu", "custom"): dict(model="shufflenet_v2_x0_5", batch_size=64, steps=30, warmup_steps=5, eval_samples=500),
}
LOADER_ONLY_STEPS = 200  # batches a loader row times where steps are auto and no training row calibrates them


def workloads(config, gpu_count):
    """The workloads of this bench: --data DIR is one of the user's own ("custom")."""
    if config.work.data is not None:
        return ["custom"]
    if config.work.workload == "all":
        return [*data.WORKLOADS, "vit"]
    if config.work.workload is None and gpu_count:  # a GPU's default: a CNN on photos and a transformer
        named = [] if config.rows.default_variants else [family(v) for v in config.rows.variants]
        techniques = [v for v in named if v not in ("baseline", "synthetic")]
        if techniques:  # a few rows asked for by name (make compare): one workload, the transformer where all are its
            return ["vit" if all(v in TRANSFORMER_ONLY for v in techniques) else "imagenet"]
        return ["imagenet", "vit"]
    return [config.work.workload or "small"]


def default_rows(workload, variants, default):
    """The rows a workload runs: with the default variants, those of its kind of model (see TRANSFORMER_ONLY)."""
    if not default:
        return variants
    out = CNN_ONLY if workload == "vit" else TRANSFORMER_ONLY
    return [v for v in variants if family(v) not in out]


PROFILE_STEPS = 4  # --profile: the steps a run records after its window (meter.PROFILE_WARMUP + PROFILE_ACTIVE)


def work(config, gpu_count, workload):
    """The flags of a workload's runs: the user's where given, this machine's defaults elsewhere."""
    defaults = DEFAULTS[("gpu" if gpu_count else "cpu", workload)]
    given = {name: getattr(config.work, name, None) for name in defaults}  # the optimizer: the workload's, no flag
    chosen = Work(**{name: defaults[name] if value is None else value for name, value in given.items()})
    if chosen.steps != "auto" and chosen.warmup_steps >= chosen.steps:
        raise BenchError(f"--warmup-steps {chosen.warmup_steps} leaves none of the {chosen.steps} steps to time")
    tail = PROFILE_STEPS if config.outputs.profile else 0
    if tail and chosen.steps != "auto" and chosen.warmup_steps + tail >= chosen.steps:
        raise BenchError(
            f"--profile records {tail} steps after the window: --warmup-steps {chosen.warmup_steps} and --steps"
            f" {chosen.steps} leave none to time"
        )
    chosen.timeout = timeout_s(config.limits.timeout, gpu_count)
    chosen.seed, chosen.loader_steps = config.work.seed, config.work.loader_steps
    return chosen


def make_plan(config, gpu_count, cores, log=None, bf16_native=True, calibrate=None, saved=None):
    """The runs of the bench for the configuration (bench/config.py) on a machine with gpu_count GPUs, what each
    workload's work is ({workload: Work}) and how the plan fits its budget (a Fit, for print_estimate). Four named
    steps, in order:

    1. asked: what is asked and what it may cost (each workload's work as the flags and the machine give it, the
       saved runs, the data folders' state read; nothing written, imported or launched);
    2. prepare.prepare: the data and model checks (the data made where missing, read by the scripts' loader, a model
       of one's own tried in a process of its own: the one step that writes, imports the scripts or launches);
    3. calibrated: steps "auto", unless --dry-run, from saved runs or by calibrate (the caller's: bench/stages/
       calibrate.py's run);
    4. plan: the runs, pure (the same inputs give the same plan): built by bench/stages/planning/build.py, fitted to the
       budget by bench/stages/planning/fit.py. Rounds run repeat after repeat, each workload's round whole, rows in
       priority order."""
    ask = asked(config, gpu_count, cores, bf16_native, saved)
    found = prepare.prepare(config, gpu_count, ask.works)
    steps = calibrated(config, gpu_count, cores, ask, found, calibrate, log)
    return plan(config, gpu_count, cores, ask, found, steps, log, bf16_native)


@dataclass(frozen=True)
class Asked:
    """What a plan is asked for, before any data is read: its workloads and each one's work as the flags and the
    machine give it, the rows in priority order, the DDP rows' processes, the budget, what the saved runs know of each
    workload, the data still to make and its seconds, the fastest row's window."""

    names: list
    works: dict
    variants: list
    nproc: int
    budget: float | None
    known: dict
    making: dict
    window: float


def asked(config, gpu_count, cores, bf16_native=True, saved=None):
    """The Asked of the flags on this machine (nothing launched, written or imported)."""
    names = workloads(config, gpu_count)
    nproc = config.launch.nproc or gpu_count or 2
    if gpu_count and nproc > gpu_count:
        raise BenchError(f"--nproc {nproc}: DDP runs one process per GPU and this machine has {gpu_count} GPU(s)")
    gpu, variants = bool(gpu_count), build.ordered(build.asked_variants(config, gpu_count), gpu_count)
    budget = budget_s(config.limits.budget, gpu)
    works = {name: work(config, gpu_count, name) for name in names}
    known = fit.known_costs(works, gpu_count, variants, saved)
    making = to_generate(config, names, gpu, cores)  # {generated workload: seconds}: data not made yet, made first
    loaders, rounds = build.asked_loaders(config, gpu_count), build.first_rounds(config.limits.repeats)
    window = fit.fit_window(budget, variants, loaders, names, rounds, gpu, bf16_native, known, sum(making.values()))
    return Asked(names, works, variants, nproc, budget, known, making, window)


def calibrated(config, gpu_count, cores, ask, found, calibrate=None, log=None):
    """{workload: (warm-up steps, steps)} where steps are "auto": from the saved runs' step times (enough steps for
    the fastest row's window), else calibrated on this machine (calibrate, launched by the caller's function), else a
    loader row's default; none in a dry run."""
    steps, dry_run = {}, config.dry_run
    for workload, (chosen, path, info) in found.items():
        if chosen.steps != "auto":
            continue
        if workload in ask.known:
            split = ask.nproc if gpu_count and any(distributed(v) for v in ask.variants) else 1
            timed = max(50, math.ceil(ask.window * split / ask.known[workload].fastest_step_s()))
            steps[workload] = (ask.known[workload].warmup_steps, ask.known[workload].warmup_steps + timed)
        elif not dry_run and ask.variants:
            if calibrate is None:
                raise BenchError("--steps auto: this mode plans no calibration run; give --steps N")
            made = calibrate(path, info, chosen, gpu_count, ask.variants, log, ask.nproc, ask.window,
                             config.work.workers, cores)  # fmt: skip
            steps[workload] = (chosen.warmup_steps, made)
        elif not dry_run:  # loader rows alone: no training row to calibrate on
            steps[workload] = (chosen.warmup_steps, chosen.warmup_steps + LOADER_ONLY_STEPS)
    return steps


def plan(config, gpu_count, cores, ask, found, steps, log=None, bf16_native=True):
    """(runs, {workload: Work}, Fit) from what was asked, found and calibrated: pure, nothing launched, written or
    imported, the same inputs giving the same plan: each workload's work settled (settled), the first rounds built
    (bench/stages/planning/build.py round_runs) and as many of them kept as the budget holds
    (bench/stages/planning/fit.py fit_budget)."""
    gpu, works = bool(gpu_count), settled(config, gpu_count, ask, found, steps)
    loaders, first = build.asked_loaders(config, gpu_count), build.first_rounds(config.limits.repeats)
    context = Context(gpu_count=gpu_count, nproc=ask.nproc, workers=config.work.workers, cores=cores,
                      log=log and str(log), bf16_native=bf16_native, window_s=ask.window, variants=ask.variants,
                      loaders=loaders, nodes=config.launch.nodes or 0,
                      default_loaders=config.rows.default_loaders)  # fmt: skip
    saved = {w: k.saved for w, k in ask.known.items()}
    runs = [run for repeat in range(1, first + 1) for run in build.round_runs(repeat, works, context, saved)]
    calibrations = sum(w.steps_auto and name not in ask.known for name, w in works.items())  # a dry run's too
    overhead = COST_S["gpu" if gpu else "cpu"]["calibrate"] * calibrations + sum(ask.making.values())
    kept, left_out = fit.fit_budget(runs, ask.budget, overhead, min(first, fit.SETTLING_ROUNDS))
    context.variants = [v for v in ask.variants if v not in left_out]  # rounds added later: the rows kept
    context.loaders = [v for v in loaders if v not in left_out]
    fitted = Fit(budget_s=ask.budget, window_s=ask.window if gpu else None, rounds_asked=first,
                 auto=config.limits.repeats == "auto", left_out=left_out, context=context,
                 rounds=len({r.repeat for r in kept}), overhead_s=overhead, gpu=gpu,
                 total_s=overhead + sum(r.estimate_s for r in kept),
                 round_s=[sum(r.estimate_s for r in group) for group in build.rounds(kept)],
                 sources=fit.sources(ask.known, kept, gpu), generated=generating(ask.making, cores))  # fmt: skip
    return kept, works, fitted


def settled(config, gpu_count, ask, found, steps):
    """{workload: its Work as it runs}: the flags' and machine's (found), with its steps (calibrated, and cut to end
    inside the first epoch where the bench chose them), its data and what loader.py found there, its rows."""
    gpu, works = bool(gpu_count), {}
    for workload, (chosen, path, info) in found.items():
        warmup, total = steps.get(workload, (chosen.warmup_steps, chosen.steps))
        real, given = epochs.real_set(workload, gpu, info.get("train_size")), isinstance(config.work.steps, int)
        cut_from = None
        if isinstance(total, int):  # inside an epoch, where the bench chose the steps and an epoch holds them
            inside = epochs.fit(warmup, total, info.get("train_size"), chosen.batch_size, real, given)
            total, cut_from = inside.steps, inside.cut_from
        works[workload] = dataclasses.replace(
            chosen,
            warmup_steps=warmup,
            steps=total,
            data=path,
            image_size=info["image_size"],
            classes=len(info["classes"]),
            train_size=info.get("train_size"),
            steps_auto=chosen.steps == "auto",
            variants=default_rows(workload, ask.variants, config.rows.default_variants),
            data_workload=data_workload(workload, gpu),
            real=real.name if real else "",
            real_images=real.images if real else None,
            steps_given=given,
            steps_cut_from=cut_from,
        )
    return works


def to_generate(config, names, gpu, cores):
    """{generated workload: its estimated seconds} for each one whose folder is not made yet (or was made with other
    parameters): the bench makes it before its first run, inside its budget."""
    if config.work.data is not None:
        return {}
    found = {}
    for name in dict.fromkeys(data_workload(w, gpu) for w in names):
        spec = data.WORKLOADS.get(name)
        if spec and data.generated_with(ROOT / "data" / name) != data.parameters(seed=0, **spec):
            found[name] = data_s(spec, cores)
    return found


def generating(making, cores):
    """The estimate's line for the data it generates first, or none."""
    if not making:
        return []
    said = ", ".join(f"{name} about {seconds:.0f} s" for name, seconds in making.items())
    return [f"the data, generated first: {said} on {fit.plural(cores, 'core')} (bench/stages/cost.py's measured rates)"]


def print_plan(runs, works, gpu_count):
    """The plan as --dry-run prints it: each workload's work and where its windows lie, then its runs' commands."""
    for workload, w in works.items():
        steps = "auto (calibrated on the machine before the first run)" if w.steps == "auto" else w.steps
        gpus = f"{gpu_count or 'no'} GPU{'' if gpu_count == 1 else 's'}"
        print(f"# {workload}: {w.model} on {w.data} ({w.image_size} px, {w.classes} classes), "
              f"global batch {w.batch_size}, steps {steps}, {w.warmup_steps} of them warm-up, "
              f"{w.eval_samples} validation images; for {gpus}")  # fmt: skip
        if w.window() is not None:
            print(f"  windows: {w.window().words()}")
        for run in runs:
            if run.workload == workload:
                print(" ".join(slurm.launched(run)))
