"""Building a plan's runs: the rows asked for in their priority order, a training or loader run of a row with its
flags (its command built last: bench/stages/planning/planned.py Run), the threads and loader workers every row gets
alike, and a round of every workload (round_runs): the baseline beside the rows on a CPU, later rounds shuffled, each
round at a seed of its own, each run's estimate (bench/stages/cost.py)."""

import random
import sys
from pathlib import Path

from bench import catalogue
from bench.catalogue import LOADERS, MULTI_GPU, TRAIN, command, compiled, distributed, family
from bench.data import DATA_OF
from bench.stages import epochs
from bench.stages.cost import COST_S, run_s, saved_run_s, window_s
from bench.stages.planning import slurm
from bench.stages.planning.planned import Run
from bench.stages.statistics import rules

LOADER_WARMUP = 5  # batches a loader row reads before its window


def asked_variants(config, gpu_count):
    """The training variants asked for; by default every one, but dp where there is no GPU: there DataParallel is a
    passthrough whose row costs bench time and says nothing (make check still runs it, and says so); and the baseline
    against itself (catalogue.SELF) in a CPU's speed bench alone: it checks the speed answers' rule, which no other
    mode reads."""
    if not config.rows.default_variants:
        return config.rows.variants
    where = "on_gpu" if gpu_count else "on_cpu"
    found = [v for v in config.rows.variants if v not in TRAIN or getattr(catalogue.BY_NAME[v], where)]
    return [v for v in found if v != catalogue.SELF or config.mode == "speed"]


def asked_loaders(config, gpu_count):
    """The loader rows asked for; by default every one, but loader_nvjpeg where there is no GPU: its point is the
    decode on a GPU, which a CPU does in the process that reads the files (make check still runs it)."""
    if config.rows.default_loaders and not gpu_count:
        return [v for v in config.rows.loaders if catalogue.BY_NAME[v].on_cpu]
    return list(config.rows.loaders)


def ordered(variants, gpu_count):
    """variants in TRAIN's order; with 2 GPUs or more DP, DDP and FSDP answer a question of their own, after all."""
    order = list(TRAIN)
    if gpu_count >= 2:
        order = [v for v in order if v not in MULTI_GPU]
        order[order.index("all") + 1 : order.index("all") + 1] = [v for v in TRAIN if v in MULTI_GPU]
    return sorted(variants, key=lambda v: (order.index(family(v)), v != family(v), variants.index(v)))


def rounds(runs):
    """The runs grouped by (repeat, workload), in plan order: each group one complete round of a workload."""
    groups = {}
    for run in runs:
        groups.setdefault((run.repeat, run.workload), []).append(run)
    return list(groups.values())


def synthetic_spec(info):
    return f"synthetic:{info['image_size']}:{len(info['classes'])}"


def default_workers(cores, processes, gpu):
    """Loader processes per training process. On a GPU every core but one per process feeds the GPUs; on a
    CPU the cores are shared with the model itself (half each), eight at most."""
    if gpu:
        return max(1, cores // processes - 1)
    return max(1, min(8, cores // (2 * processes)))


def training_run(
    variant, repeat, *, path, info, chosen, gpu_count, nproc, workers, cores, workload, prefix="", cache=None
):
    """A training run of variant in round repeat on a workload's work (chosen: its Work; path, info: its data and what
    loader.py found there), its processes and threads as the machine gives them; cache: the bench's log folder, where
    a compiled row keeps its compile cache; prefix: the workload's, where a bench has several."""
    device = "cuda" if gpu_count else "cpu"
    processes = nproc if distributed(variant) else 1
    workers = workers if workers is not None else default_workers(cores, processes, bool(gpu_count))
    script = [sys.executable, *(part.format(nproc=nproc, synthetic=synthetic_spec(info)) for part in command(variant))]
    flags = {} if "--data" in script else {"--data": path}
    flags.update({"--model": chosen.model, "--batch-size": chosen.batch_size, "--optimizer": chosen.optimizer})
    flags.update({"--steps": chosen.steps})  # None: the script's --epochs
    flags.update({"--warmup-steps": chosen.warmup_steps, "--workers": workers, "--eval-samples": chosen.eval_samples})
    flags.update({"--device": device, "--seed": chosen.seed, "--no-progress": None, "--no-data-check": None})
    flags = {flag: value for flag, value in flags.items() if value is not None or flag.startswith("--no-")}
    run = Run(f"{prefix}{variant}-{repeat}", variant, "train", repeat, processes, script, workload)
    run = run.with_flags(flags=flags, batch_size=int(chosen.batch_size), model=str(chosen.model))  # data: checked once
    run.env["OMP_NUM_THREADS"] = str(threads(cores, processes))
    if compiled(variant) and cache is not None:
        # a row over another loader (all:no-ddp+nvjpeg) compiles the same model as its row: their cache is one
        row = catalogue.with_loader(variant)[0]
        run.env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(cache) / "compile-cache" / f"{prefix}{row}")
    return run


def loader_run(variant, repeat, *, path, chosen, gpu_count, workers, cores, workload, prefix=""):
    """A loader run of variant in round repeat: as many batches as the training runs time (inside the first epoch,
    where it holds them), at the workload's batch."""
    workers = workers if workers is not None else default_workers(cores, 1, bool(gpu_count))
    steps = chosen.loader_steps
    if steps is None:  # as many batches as the training runs time, inside the first epoch where it holds them
        steps = "auto" if chosen.steps == "auto" else chosen.steps - chosen.warmup_steps
        epoch = epochs.epoch_steps(chosen.train_size, chosen.batch_size)
        if isinstance(steps, int) and epoch and not chosen.steps_given and epoch - LOADER_WARMUP >= epochs.MIN_TIMED:
            steps = min(steps, epoch - LOADER_WARMUP)
    flags = {
        "--bench": None,
        "--data": path,
        "--batch-size": chosen.batch_size,
        "--steps": steps,
        "--warmup-steps": LOADER_WARMUP,
    }
    flags.update({"--workers": workers, "--device": "cuda" if gpu_count else "cpu"})
    flags["--no-data-check"] = None  # describe() checked every file, once for the bench
    run = Run(f"{prefix}{variant}-{repeat}", variant, "loader", repeat, 1, [sys.executable, LOADERS[variant]], workload)
    run = run.with_flags(flags=flags, batch_size=int(chosen.batch_size))
    run.env["OMP_NUM_THREADS"] = str(threads(cores, 1))
    return run


def threads(cores, processes):
    """torch's threads per process, set for every row alike (OMP_NUM_THREADS): the cores shared by its processes.
    Left alone, torch takes every core in each process, and torchrun gives each of its processes one thread."""
    return max(1, cores // processes)


def first_rounds(repeats):
    """The rounds planned before the bench starts: --repeats N, or with auto the rounds before the first look."""
    return rules.MIN_ROUNDS if repeats == "auto" else repeats


# a CPU's round runs the baseline first, then again after every this many other rows, and last; a GPU's once, first:
# a GPU's speed held within 2% from round to round (the fourth H200 run's baseline: 1,877 to 1,914 samples/s) where a
# 2-core VM's baseline moved 15% within one (2026-11-27: 154, 181 and 158 samples/s in three rounds), and a GPU's run
# costs 25-35 s outside its window: a baseline beside every other row would spend a third more of its rounds' time
BASELINE_EVERY = dict(cpu=2, gpu=None)


def beside_baselines(order, repeat, prefix="", every=2):
    """[(variant, run name)] of a round's training rows with the baseline beside every other row: first, then after
    every `every` others and last (baseline-R, then baseline-R.2, baseline-R.3, ...), each row read against the
    baseline interpolated at its time between the runs before and after it (bench/stages/statistics/summarize.py
    paired). Where the machine's speed drifts within a round, a row measured minutes from the round's one baseline
    carried the drift into its ratio; beside a baseline run it does not. Without a baseline, or every None: the rows as
    they are (the baseline once)."""
    if "baseline" not in order or len(order) == 1 or every is None:
        return [(variant, f"{prefix}{variant}-{repeat}") for variant in order]
    others = [variant for variant in order if variant != "baseline"]
    found = [("baseline", f"{prefix}baseline-{repeat}")]
    for i, variant in enumerate(others, 1):
        found.append((variant, f"{prefix}{variant}-{repeat}"))
        if i % every == 0 or i == len(others):
            found.append(("baseline", f"{prefix}baseline-{repeat}.{sum(v == 'baseline' for v, _ in found) + 1}"))
    return found


def round_runs(repeat, works, context, saved=None):
    """One round of every workload: its training rows, then its loader rows. After the first round the training
    rows run in an order shuffled by the seed and the round (kept in plan.json with the runs), so that no row always
    runs next to the same ones (a round's first round keeps the priority order: a first round cut short by --chunk
    or Ctrl-C has run the rows a user needs first). Every row of round r trains at
    seed --seed + r - 1: the rows of a round start alike (a paired comparison), and the rounds differ as reruns at
    other seeds do, so that the spread of the final losses over the rounds is what the learning check reads a
    difference against (bench/stages/statistics/rules.py learning), where rounds at one seed would replay the same
    numbers on a deterministic machine and show no spread at all.

    Which rounds evaluate: the first round of every row evaluates the workload's fixed sample, the same for every
    row (its validation accuracy is the verdict's check that the row learns alike: a broken technique shows a wrong
    accuracy); a later round evaluates nothing (--eval-samples 0): no answer reads a second accuracy, and evaluation
    cost a GPU run 3.3 to 3.7 s of its 28 to 50 (2026-11-27), a CPU run 0.5 to 1.3 s of its 9 to 15. context: the
    machine and the rows (its variants and loaders: the round's); saved: {workload: {variant: Saved}}, the rows whose
    estimates come from saved GPU runs."""
    runs, c = [], context
    for workload, chosen in works.items():
        path, info = chosen.data, dict(image_size=chosen.image_size, classes=range(chosen.classes))
        prefix = f"{workload}-" if len(works) > 1 else ""
        order = chosen.rows(ordered(c.variants, c.gpu_count))
        if repeat > 1:
            random.Random(f"{chosen.seed}-{repeat}").shuffle(order)
        every = BASELINE_EVERY["gpu" if c.gpu_count else "cpu"]
        for variant, name in beside_baselines(order, repeat, prefix, every):
            run = training_run(variant, repeat, path=path, info=info, chosen=chosen, gpu_count=c.gpu_count,
                               nproc=c.nproc, workers=c.workers, cores=c.cores, workload=workload, prefix=prefix,
                               cache=c.log)  # fmt: skip
            run = run.with_flags(name=name, beside=name != f"{prefix}{variant}-{repeat}")
            run = run.with_flags(flags={"--seed": chosen.seed + repeat - 1})  # every row of a round at one seed
            if repeat > 1 or run.beside:  # the accuracy is the first round's first run's:
                run = run.with_flags(flags={"--eval-samples": 0})  # the others time the speed alone
            runs.append(slurm.on_nodes(run, c.nodes) if c.nodes and distributed(variant) else run)
        for variant in c.loaders if workload not in DATA_OF or not c.default_loaders else []:
            runs.append(loader_run(variant, repeat, path=path, chosen=chosen, gpu_count=c.gpu_count,
                                   workers=c.workers, cores=c.cores, workload=workload, prefix=prefix))  # fmt: skip
    gpu = bool(c.gpu_count)
    for run in runs:
        chosen = works[run.workload]
        timed = chosen.steps - chosen.warmup_steps if not chosen.steps_auto else None
        fastest = c.window_s if gpu or timed is None else COST_S["cpu"]["window"] * timed / 20  # the CPU's: 20
        known = (saved or {}).get(run.workload, {}).get(run.variant) if run.kind == "train" else None
        run.estimate_s = saved_run_s(run, known) if known else run_s(run, fastest, gpu, c.bf16_native)
        if run.kind == "train":
            timed = int(run.flags["--steps"]) - int(run.flags["--warmup-steps"]) if known else None
            run.window_estimate_s = known.step_s * timed if known else window_s(run, fastest, gpu, c.bf16_native)
    return runs
