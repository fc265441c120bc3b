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
enough steps for that row's timed window to last WINDOW_S seconds (bench/stages/calibrate.py runs it; the planner
launches nothing itself). What the runs should take is bench/stages/cost.py's. The plan is stored with the bench
(plan.json in its log folder) so that `--resume` can finish it.
"""

import contextlib
import dataclasses
import io
import json
import math
import random
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import BenchError, catalogue, data, write_whole
from bench.catalogue import (
    CNN_ONLY,
    LOADERS,
    MULTI_GPU,
    TRAIN,
    TRANSFORMER_ONLY,
    command,
    compiled,
    distributed,
    family,
)
from bench.data import DATA_OF, data_workload
from bench.observe.machine import ROOT
from bench.stages import epochs, slurm, summarize
from bench.stages.cost import (
    COST_S,
    FIRST_WARM_COMPILE_S,
    WARMUP_STEADY,
    WINDOW_MIN_S,
    WINDOW_S,
    budget_s,
    data_s,
    first_step_s,
    run_s,
    saved_run_s,
    timeout_s,
    window_s,
)

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
LOADER_WARMUP = 5  # batches a loader row reads before its window


@dataclass
class Work:
    """A workload's work: what every run of it trains on and for how long, the user's flags where given and the
    machine's defaults elsewhere (saved in plan.json: --resume and the modes read it back)."""

    model: str = ""
    batch_size: int = 0  # global
    steps: int | str | None = None  # "auto" until the calibration; None: the script's --epochs
    warmup_steps: int = 0
    eval_samples: int = 0
    optimizer: str | None = None  # None: the script's default
    seed: int = 0
    loader_steps: int | None = None  # None: as many batches as the training runs time
    timeout: int = 0  # seconds a run may take (bench/stages/cost.py)
    data: str = ""  # its data folder (or synthetic:SIZE:CLASSES)
    data_workload: str = ""  # the generated data it trains on (vit trains on another workload's)
    generated: bool = False  # --to-accuracy: the bench made its data (made again if gone before --resume)
    image_size: int = 0
    classes: int = 0
    train_size: int | None = None  # its data's training images: its windows lie inside an epoch; --max-batch sizes
    # its runs by the epoch
    steps_auto: bool = False  # its steps were calibrated
    variants: list | None = None  # the rows it runs (None: every row asked for)
    real: str = ""  # the real data set it stands for (bench/stages/epochs.py), and its training images
    real_images: int | None = None
    steps_given: bool = False  # --steps: the user's, kept whatever epoch starts they put in the windows
    steps_cut_from: int | None = None  # the steps before the planner cut them to end inside the first epoch

    @classmethod
    def saved(cls, fields):
        """A Work from plan.json (a field a newer bench added and this one does not know is passed over)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in fields.items() if name in known})

    def rows(self, variants):
        """The rows of variants this workload runs."""
        return [v for v in variants if self.variants is None or v in self.variants]

    def window(self):
        """Where its timed windows lie against its epochs (bench/stages/epochs.py); None where its runs train
        epochs, or their steps are not calibrated yet."""
        if not isinstance(self.steps, int):
            return None
        real = epochs.Real(self.real, self.real_images) if self.real_images else None
        return epochs.window(self.warmup_steps, self.steps, self.train_size, self.batch_size, real,
                             self.steps_given, self.steps_cut_from)  # fmt: skip


@dataclass
class Context:
    """What a round of runs is made from beside each workload's work: the machine, the processes and the rows (kept
    with the bench's options in plan.json: --repeats auto adds its rounds from it, after a --resume too)."""

    gpu_count: int = 0
    nproc: int = 2  # the processes of a DDP row
    workers: int | None = None  # --workers; None: the machine's default (default_workers)
    cores: int = 1
    log: str | None = None  # the bench's log folder (the compile caches live there)
    bf16_native: bool = True
    window_s: float = WINDOW_S  # the fastest row's timed window
    variants: list = field(default_factory=list)  # the training rows a round runs
    loaders: list = field(default_factory=list)  # the loader rows
    nodes: int = 0  # --launcher slurm: the nodes of its DDP rows
    default_loaders: bool = False  # the loaders not asked for by name: a workload on another's data runs none

    @classmethod
    def saved(cls, fields):
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in fields.items() if name in known})


@dataclass
class Fit:
    """How the plan fits its budget, for print_estimate and the executor."""

    budget_s: float | None
    window_s: float | None  # the fastest row's window (a GPU's; a CPU's steps are fixed)
    rounds_asked: int
    auto: bool  # --repeats auto
    left_out: list  # the rows left out to fit
    context: Context
    rounds: int  # the rounds that fit
    overhead_s: float  # the calibrations
    gpu: bool
    total_s: float
    round_s: list  # each round's estimate
    sources: list = field(default_factory=list)  # where the estimates come from: saved runs, or assumed
    generated: list = field(default_factory=list)  # the data the bench makes before its first run, and its time


@dataclass
class Run:
    """One run of a bench: its command is built last (cmd), from the script and the work's flags, so that a mode
    that changes a flag (--max-batch's batch, --to-accuracy's epochs) replaces it rather than appending another."""

    name: str  # unique within the bench, e.g. "amp-2" (with several workloads "imagenet-amp-2")
    variant: str  # a key of TRAIN or LOADERS, or a combination (all:no-compile, ...)
    kind: str  # "train" or "loader"
    repeat: int
    processes: int
    script: list = field(default_factory=list)  # python, the launcher, the script and the technique's own flags
    workload: str = "custom"
    env: dict = field(default_factory=dict)  # set for the run, e.g. TORCHINDUCTOR_CACHE_DIR
    estimate_s: float = 0.0  # the planned estimate of its wall time (see COST_S)
    window_estimate_s: float = 0.0  # the part of it inside its timed window (a training run's)
    nodes: int = 0  # --launcher slurm: the nodes its torchrun agents run on (bench/stages/slurm.py); 0: this machine
    batch_size: int = 0  # the global batch its command trains or loads (0: a run planned without one, a probe)
    model: str = ""  # the model its command trains ("": a loader's run)
    flags: dict = field(default_factory=dict)  # the work's flags in order, --flag: value (None: a flag alone)
    beside: bool = False  # a baseline run beside the rows of its round, after its first (round_runs)

    @property
    def cmd(self):
        """The command line: the script, then the flags."""
        return [
            *self.script,
            *(part for flag, value in self.flags.items() for part in (flag, value) if part is not None),
        ]

    def with_flags(self, **changes):
        """A copy of the run with some fields changed and flags set (flags: {"--batch-size": 512, ...})."""
        flags = {flag: None if value is None else str(value) for flag, value in changes.pop("flags", {}).items()}
        return dataclasses.replace(self, **changes, flags={**self.flags, **flags})


def asked_variants(config, gpu_count):
    """The training variants asked for; by default every one, but dp where there is no GPU: there DataParallel is a
    passthrough whose row costs bench time and says nothing (make check still runs it, and says so)."""
    if config.rows.default_variants and not gpu_count:
        return [v for v in config.rows.variants if v not in TRAIN or catalogue.BY_NAME[v].on_cpu]
    return config.rows.variants


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


def fit_window(budget_s, variants, loaders, names, repeats, gpu, bf16_native, known=None, overhead_s=0.0):
    """The fastest row's window (GPU, steps auto) that lets min(repeats, 3) rounds fit the budget, within
    WINDOW_MIN_S..WINDOW_S. known: {workload: Known} where the rows' costs come from saved runs; overhead_s: what the
    bench spends before its rounds (the data it generates)."""
    if budget_s is None or not gpu:
        return WINDOW_S
    known = known or {}
    fixed = weight = first = calibrations = 0.0
    for name in names:
        if name in known:  # a round after the first: no evaluation, a warm compile; the first's extras apart
            f, w, extra = known[name].round_costs(variants)
            fixed, weight, first = fixed + f, weight + w, first + extra
            continue
        probe = [Run("", v, "train", 2, 1, workload=name) for v in variants]
        probe += [Run("", v, "loader", 2, 1, workload=name) for v in loaders]
        fixed += sum(run_s(r, 0, gpu, bf16_native) for r in probe)
        weight += sum(run_s(r, 1, gpu, bf16_native) - run_s(r, 0, gpu, bf16_native) for r in probe)
        first += sum(COST_S["gpu"]["cold"] - COST_S["gpu"]["warm"] for v in variants if compiled(v))
        calibrations += 1
    for name in known:
        fixed += sum(run_s(Run("", v, "loader", 2, 1, workload=name), 0, gpu, bf16_native) for v in loaders)
    wanted = min(repeats, SETTLING_ROUNDS)
    spare = 0.97 * budget_s - COST_S["gpu"]["calibrate"] * calibrations - first - wanted * fixed - overhead_s
    if weight <= 0:  # loader rows alone: no training window to fit
        return WINDOW_S
    return max(WINDOW_MIN_S, min(WINDOW_S, spare / (wanted * weight)))


SETTLING_ROUNDS = 3  # rounds whose paired interval can settle a GPU's answer: a budget keeps them before more rows


@dataclass
class Known:
    """A GPU workload whose rows' costs come from saved GPU runs (bench/stages/cost.py's saved_costs): the steps
    follow from their step times (no calibration run), the estimates from every part of their runs."""

    saved: dict  # {variant: Saved} of the rows planned that have saved runs
    warmup_steps: int
    eval_images: int

    def fastest_step_s(self):
        return min(s.step_s for s in self.saved.values())

    def round_costs(self, variants):
        """(seconds of a later round besides the fastest row's window, seconds per second of that window, the first
        round's extra seconds: its evaluations and cold compiles) of the rows that have saved runs."""
        fixed = weight = extra = 0.0
        for variant in variants:
            s = self.saved.get(variant)
            if s is None:
                continue
            warm_first = first_step_s(s, variant, repeat=2)  # a later round's
            fixed += s.start_s + warm_first + s.warm_step_s * max(0, self.warmup_steps - 1)
            weight += s.step_s / self.fastest_step_s()
            extra += (s.first_s - warm_first) + s.eval_s * self.eval_images / 1000
        return fixed, weight, extra


def known_costs(config, gpu_count, names, variants, saved):
    """{workload: Known} for the GPU workloads whose planned rows have saved runs at their model and batch, and whose
    steps are auto: their steps come from those runs instead of a calibration run."""
    if not gpu_count or not saved:
        return {}
    known = {}
    for name in names:
        chosen = work(config, gpu_count, name)
        rows = {v: saved[(chosen.model, int(chosen.batch_size), v)] for v in variants
                if (chosen.model, int(chosen.batch_size), v) in saved}  # fmt: skip
        if chosen.steps != "auto" or not rows:
            continue
        fastest = min(rows.values(), key=lambda s: s.step_s)
        warmup = min(chosen.warmup_steps, WARMUP_STEADY) if fastest.steady else chosen.warmup_steps
        needed = [s.needed for s in rows.values()]
        if None not in needed:  # the saved runs' own warm-up steps said how many each needed: the most of them
            warmup = min(warmup, max(2, *needed))
        images = chosen.eval_samples if isinstance(chosen.eval_samples, int) else 1000
        known[name] = Known(rows, warmup, images)
    return known


def fit_budget(runs, budget_s, overhead_s, wanted=1):
    """(the runs that fit the budget, the variants left out): whole rounds (every workload's round r before any
    r + 1), as many as fit. Where fewer than wanted rounds fit (min(rounds asked, SETTLING_ROUNDS): an answer needs
    rounds to settle, and a round of every row with no interval settles nothing), the baseline runs beside the rows
    are left out first (the baseline once a round), then rows from the end of the priority order until wanted rounds
    fit, two training rows kept at least (one compared with the baseline); if not even the first round fits, rows are
    left out until it does."""
    if budget_s is None:
        return runs, []
    order = list(dict.fromkeys(r.variant for r in runs if r.kind == "train"))
    trained = len(order)
    order += list(dict.fromkeys(r.variant for r in runs if r.kind == "loader"))
    left_out = []
    kept = whole_rounds(runs, budget_s, overhead_s)
    if len({r.repeat for r in kept}) < wanted:  # the baseline beside every other row goes before a row does
        runs = [r for r in runs if not r.beside]
        kept = whole_rounds(runs, budget_s, overhead_s)
    while len({r.repeat for r in kept}) < wanted and len(order) > 1 and len(order) - 1 >= min(2, trained):
        left_out.insert(0, order.pop())
        kept = whole_rounds([r for r in runs if r.variant not in left_out], budget_s, overhead_s)
    while sum(r.estimate_s for r in kept) + overhead_s > budget_s and len(order) > 1:
        left_out.insert(0, order.pop())
        kept = [r for r in kept if r.variant != left_out[0] and not r.beside]
    return kept, left_out


def whole_rounds(runs, budget_s, overhead_s):
    """The runs of as many whole rounds as fit the budget (the first one always)."""
    kept, spent = [], overhead_s
    by_repeat = {}
    for run in runs:
        by_repeat.setdefault(run.repeat, []).append(run)
    for _, group in sorted(by_repeat.items()):
        cost = sum(r.estimate_s for r in group)
        if spent + cost > budget_s and kept:
            break
        kept, spent = kept + group, spent + cost
    return kept


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


def folder(config, workload, generate=True, gpu=False):
    """The data folder of a workload: the user's, or the generated one (made when missing, unless only planning)."""
    if workload == "custom":
        path = Path(config.work.data).resolve()
        if not path.exists():
            raise BenchError(f"data folder {config.work.data} does not exist")
        return str(path)
    workload = data_workload(workload, gpu)
    return data.ensure(workload) if generate else str(ROOT / "data" / workload)


def describe(path, workload):
    """What loader.py finds in the data folder (checked here once, not in every run): image_size, classes, ...
    A generated workload not made yet is described from its parameters. loader.open_data() runs in this process
    (torch is imported once, where a process of its own would import it again): its one-line error is the bench's."""
    spec = data.HARD if workload == "hard" else data.WORKLOADS.get(workload)
    if not Path(path).exists() and spec is not None:
        size = spec["size"]
        return dict(image_size=size if size <= 64 else 224, classes=data.CLASSES, dataset="generated",
                    train_size=spec["train"] * len(data.CLASSES))  # fmt: skip
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import loader  # torch and torchvision: imported only when a data folder is read

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            info = loader.open_data(str(path))[2]
    except SystemExit:  # checks.die(): one line on stderr
        lines = said.getvalue().strip().splitlines() or ["no output"]
        raise BenchError(f"the data cannot be used: {lines[-1].split('error: ', 1)[-1]}") from None
    except Exception as e:  # a dataset library's own error, as a run of loader.py would end with it
        raise BenchError(f"the data cannot be used: {type(e).__name__}: {e}") from None
    return json.loads(json.dumps(info._asdict()))  # as the runs' metrics give it: plain JSON


def check_model(model, info):
    """A model of the user's own (FILE.py:FACTORY, module:FACTORY) tried once on the workload's shape, two steps on
    the CPU, before any run: a bad one is one line here rather than a failed row in every run."""
    if ":" not in model:
        return  # a torchvision name: every script checks it in its first second
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["train.py", "--data", synthetic_spec(info), "--model", model, "--batch-size", "2", "--steps", "2"]
        cmd += ["--warmup-steps", "1", "--workers", "0", "--device", "cpu", "--no-progress"]
        probe = subprocess.run([sys.executable, *cmd, "--metrics-out", str(Path(tmp) / "probe.json")],
                               cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["no output"]
        raise BenchError(f"the model cannot be used: {lines[-1].split('error: ', 1)[-1]}")


def synthetic_spec(info):
    return f"synthetic:{info['image_size']}:{len(info['classes'])}"


def default_workers(cores, processes, gpu):
    """Loader processes per training process. On a GPU every core but one per process feeds the GPUs; on a
    CPU the cores are shared with the model itself (half each), eight at most."""
    if gpu:
        return max(1, cores // processes - 1)
    return max(1, min(8, cores // (2 * processes)))


def training_run(
    variant, repeat, path, info, chosen, gpu_count, nproc, workers, cores, workload, prefix="", cache=None
):
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


def loader_run(variant, repeat, path, chosen, gpu_count, workers, cores, workload, prefix=""):
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
    return summarize.MIN_ROUNDS if repeats == "auto" else repeats


# a CPU's round runs the baseline first, then again after every this many other rows, and last; a GPU's once, first:
# a GPU's speed held within 2% from round to round (the fourth H200 run's baseline: 1,877 to 1,914 samples/s) where a
# 2-core VM's baseline moved 15% within one (2026-11-27: 154, 181 and 158 samples/s in three rounds), and a GPU's run
# costs 25-35 s outside its window: a baseline beside every other row would spend a third more of its rounds' time
BASELINE_EVERY = dict(cpu=2, gpu=None)


def beside_baselines(order, repeat, prefix="", every=2):
    """[(variant, run name)] of a round's training rows with the baseline beside every other row: first, then after
    every `every` others and last (baseline-R, then baseline-R.2, baseline-R.3, ...), each row read against the
    baseline interpolated at its time between the runs before and after it (bench/stages/summarize.py paired).
    Where the machine's speed drifts within a round, a row measured minutes from the round's one baseline carried
    the drift into its ratio; beside a baseline run it does not. Without a baseline, or every None: the rows as they
    are (the baseline once)."""
    if "baseline" not in order or len(order) == 1 or every is None:
        return [(variant, f"{prefix}{variant}-{repeat}") for variant in order]
    others = [variant for variant in order if variant != "baseline"]
    found = [("baseline", f"{prefix}baseline-{repeat}")]
    for i, variant in enumerate(others, 1):
        found.append((variant, f"{prefix}{variant}-{repeat}"))
        if i % every == 0 or i == len(others):
            found.append(("baseline", f"{prefix}baseline-{repeat}.{sum(v == 'baseline' for v, _ in found) + 1}"))
    return found


def round_runs(repeat, works, variants, loaders, context, saved=None):
    """One round of every workload: its training rows, then its loader rows. After the first round the training
    rows run in an order shuffled by the seed and the round, so that no row always runs next to the same ones
    (a round's first round keeps the priority order: the budget cuts it from the end). Every row of round r trains at
    seed --seed + r - 1: the rows of a round start alike (a paired comparison), and the rounds differ as reruns at
    other seeds do, so that the spread of the final losses over the rounds is what the learning check reads a
    difference against (bench/stages/summarize.py learning), where rounds at one seed would replay the same numbers
    on a deterministic machine and show no spread at all.

    Which rounds evaluate: the first round of every row evaluates the workload's fixed sample, the same for every
    row (its validation accuracy is the verdict's check that the row learns alike: a broken technique shows a wrong
    accuracy); a later round evaluates nothing (--eval-samples 0): no answer reads a second accuracy, and evaluation
    cost a GPU run 3.3 to 3.7 s of its 28 to 50 (2026-11-27), a CPU run 0.5 to 1.3 s of its 9 to 15. saved: {workload:
    {variant: Saved}}, the rows whose estimates come from saved GPU runs."""
    runs, c = [], context
    for workload, chosen in works.items():
        path, info = chosen.data, dict(image_size=chosen.image_size, classes=range(chosen.classes))
        prefix = f"{workload}-" if len(works) > 1 else ""
        order = chosen.rows(ordered(variants, c.gpu_count))
        if repeat > 1:
            random.Random(f"{chosen.seed}-{repeat}").shuffle(order)
        every = BASELINE_EVERY["gpu" if c.gpu_count else "cpu"]
        for variant, name in beside_baselines(order, repeat, prefix, every):
            where = (path, info, chosen, c.gpu_count, c.nproc, c.workers, c.cores, workload, prefix)
            run = training_run(variant, repeat, *where, c.log)
            run = run.with_flags(name=name, beside=name != f"{prefix}{variant}-{repeat}")
            run = run.with_flags(flags={"--seed": chosen.seed + repeat - 1})  # every row of a round at one seed
            if repeat > 1 or run.beside:  # the accuracy is the first round's first run's:
                run = run.with_flags(flags={"--eval-samples": 0})  # the others time the speed alone
            runs.append(slurm.on_nodes(run, c.nodes) if c.nodes and distributed(variant) else run)
        for variant in loaders if workload not in DATA_OF or not c.default_loaders else []:
            where = (path, chosen, c.gpu_count, c.workers, c.cores, workload, prefix)
            runs.append(loader_run(variant, repeat, *where))
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


def make_plan(config, gpu_count, cores, log=None, bf16_native=True, calibrate=None, saved=None):
    """The runs of the bench for the configuration (bench/config.py) on a machine with gpu_count GPUs, what each
    workload's work is
    ({workload: Work}) and how the plan fits its budget (a Fit, for print_estimate). In order: what is asked and what
    it may cost (asked: reads the saved runs and the data folders), then prepare (the data made, read, the model
    tried: the only writes and script imports), calibrate (steps "auto", unless --dry-run, by calibrate: the caller's,
    bench/stages/calibrate.py's steps, so that planning launches nothing itself), then plan: the runs, pure (the same
    inputs give the same plan). Rounds run repeat after repeat, each workload's round whole, rows in priority order."""
    ask = asked(config, gpu_count, cores, bf16_native, saved)
    found = prepare(config, gpu_count, ask.names)
    steps = calibrated(config, gpu_count, cores, ask, found, calibrate, log)
    return plan(config, gpu_count, cores, ask, found, steps, log, bf16_native)


@dataclass(frozen=True)
class Asked:
    """What a plan is asked for, before any data is read: its workloads, the rows in priority order, the DDP rows'
    processes, the budget, what the saved runs know of each workload, the data still to make and its seconds, the
    fastest row's window."""

    names: list
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
    gpu, variants = bool(gpu_count), ordered(asked_variants(config, gpu_count), gpu_count)
    budget = budget_s(config.limits.budget, gpu)
    known = known_costs(config, gpu_count, names, variants, saved)
    making = to_generate(config, names, gpu, cores)  # {generated workload: seconds}: data not made yet, made first
    loaders, rounds = asked_loaders(config, gpu_count), first_rounds(config.limits.repeats)
    window = fit_window(budget, variants, loaders, names, rounds, gpu, bf16_native, known, sum(making.values()))
    return Asked(names, variants, nproc, budget, known, making, window)


def prepare(config, gpu_count, names):
    """{workload: (its Work as the flags and the machine give it, its data folder, what loader.py finds there)}: the
    data made where missing (unless --dry-run), read by the scripts' loader, and a model of one's own tried (unless
    --dry-run). A batch larger than the training set is refused here."""
    dry_run = config.dry_run
    found = {}
    for workload in names:
        chosen = work(config, gpu_count, workload)
        path = folder(config, workload, generate=not dry_run, gpu=bool(gpu_count))
        info = describe(path, data_workload(workload, bool(gpu_count)))
        if chosen.batch_size > info.get("train_size", math.inf):
            raise BenchError(f"--batch-size {chosen.batch_size} is larger than the training set of {path} "
                             f"({info['train_size']} images)")  # fmt: skip
        if not dry_run:
            check_model(chosen.model, info)
        found[workload] = (chosen, path, info)
    return found


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
    imported, the same inputs giving the same plan."""
    gpu, works = bool(gpu_count), {}
    calibrations = 0
    for workload, (chosen, path, info) in found.items():
        auto = chosen.steps == "auto"
        calibrations += auto and workload not in ask.known  # its estimate counts one (a dry run's too)
        warmup, total = steps.get(workload, (chosen.warmup_steps, chosen.steps))
        real, given = epochs.real_set(workload, gpu, info.get("train_size")), isinstance(config.work.steps, int)
        cut_from = None
        if isinstance(total, int):  # inside an epoch, where the bench chose the steps and an epoch holds them
            fitted = epochs.fit(warmup, total, info.get("train_size"), chosen.batch_size, real, given)
            total, cut_from = fitted.steps, fitted.cut_from
        works[workload] = dataclasses.replace(
            chosen,
            warmup_steps=warmup,
            steps=total,
            data=path,
            image_size=info["image_size"],
            classes=len(info["classes"]),
            train_size=info.get("train_size"),
            steps_auto=auto,
            variants=default_rows(workload, ask.variants, config.rows.default_variants),
            data_workload=data_workload(workload, gpu),
            real=real.name if real else "",
            real_images=real.images if real else None,
            steps_given=given,
            steps_cut_from=cut_from,
        )
    context = Context(
        gpu_count,
        ask.nproc,
        config.work.workers,
        cores,
        log and str(log),
        bf16_native,
        ask.window,
        ask.variants,
        asked_loaders(config, gpu_count),
        config.launch.nodes or 0,
        config.rows.default_loaders,
    )
    runs = []
    for repeat in range(1, first_rounds(config.limits.repeats) + 1):
        runs += round_runs(
            repeat, works, ask.variants, context.loaders, context, {w: k.saved for w, k in ask.known.items()}
        )
    overhead = COST_S["gpu" if gpu else "cpu"]["calibrate"] * calibrations + sum(ask.making.values())
    kept, left_out = fit_budget(runs, ask.budget, overhead, min(first_rounds(config.limits.repeats), SETTLING_ROUNDS))
    context.variants = [v for v in ask.variants if v not in left_out]  # rounds added later: the rows kept
    context.loaders = [v for v in asked_loaders(config, gpu_count) if v not in left_out]
    rounds_asked = first_rounds(config.limits.repeats)
    fit = Fit(budget_s=ask.budget, window_s=ask.window if gpu else None, rounds_asked=rounds_asked,
              auto=config.limits.repeats == "auto", left_out=left_out, context=context,
              rounds=len({r.repeat for r in kept}), overhead_s=overhead, gpu=gpu,
              total_s=overhead + sum(r.estimate_s for r in kept),
              round_s=[sum(r.estimate_s for r in group) for group in rounds(kept)],
              sources=sources(ask.known, kept, gpu), generated=generating(ask.making, cores))  # fmt: skip
    return kept, works, fit


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
    return [f"the data, generated first: {said} on {plural(cores, 'core')} (bench/stages/cost.py's measured rates)"]


def sources(known, runs, gpu):
    """Where a GPU plan's estimates come from, row by row: saved runs (which), or assumed."""
    if not gpu or not known:
        return []
    said, assumed = [], []
    for workload, k in known.items():
        planned = dict.fromkeys(r.variant for r in runs if r.workload == workload and r.kind == "train")
        for variant, s in k.saved.items():
            if variant in planned:
                said.append(f"{workload} {variant}: {plural(s.runs, 'saved run')} of {s.where}")
        assumed += [f"{workload} {v}" for v in planned if v not in k.saved]
        warm = [v for v in planned if compiled(v) and (v not in k.saved or k.saved[v].later_first_s is None)]
        if warm and len({r.repeat for r in runs}) > 1:
            assumed.append(
                f"a compiled row's first step from a warm cache ({FIRST_WARM_COMPILE_S:.0f} s: no saved run)"
            )
    loaders = dict.fromkeys(r.variant for r in runs if r.kind == "loader")
    assumed += [f"{v} ({COST_S['gpu']['loader']:.0f} s a run)" for v in loaders]
    return [f"from saved runs: {'; '.join(said)}"] + ([f"assumed: {'; '.join(assumed)}"] if assumed else [])


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def print_estimate(fit, runs):
    """The plan's estimate, before the first run (and with --dry-run)."""
    where = "GPU: as one round on an H100 measured them" if fit.gpu else "CPU: as measured on a 2-core CPU"
    budget = f"{fit.budget_s / 60:.0f} min" if fit.budget_s else "none"
    rounds = f"{fit.rounds} round(s)" + (f" of the {fit.rounds_asked} asked" if fit.rounds < fit.rounds_asked else "")
    if fit.auto:
        rounds += (
            f", then more for the rows whose interval is still wider than +-{summarize.PRECISION:.0%}, while the"
            f" budget allows ({summarize.MAX_ROUNDS} rounds at most)"
        )
    longest = max(fit.round_s, default=0) / 60
    inside = sum(r.window_estimate_s for r in runs) / max(1e-9, sum(r.estimate_s for r in runs))
    print(f"estimate: {fit.total_s / 60:.0f} min for {len(runs)} runs in {rounds} (budget {budget}); the longest"
          f" round of a workload about {longest:.1f} min; {inside:.0%} of the runs' time in their windows")  # fmt: skip
    window = f"the fastest row's window {fit.window_s:.1f} s, " if fit.window_s else ""
    cost = COST_S["gpu" if fit.gpu else "cpu"]
    if fit.sources:  # a GPU plan from its saved runs: each row's parts as they measured them
        print(f"  from: {window}each row's start, first step, warm-up, steps and evaluation as its saved GPU runs"
              " measured them (medians); once a round has run, its measured times")  # fmt: skip
    else:
        print(f"  from: {window}{cost['fixed']:.0f} s a run outside its window, a compile {cost['cold']:.0f} s cold"
              f" and {cost['warm']:.0f} s warm ({where}); once a round has run, its measured times")  # fmt: skip
    for line in fit.sources + fit.generated:
        print(f"  {line}")
    if fit.left_out:
        print(f"  left out to fit the budget: {', '.join(fit.left_out)} (--budget none, or a larger one, keeps them)")


def save(path, bench_id, machine_class, runs, works, mode="bench", options=None, config=None):
    """plan.json: what --resume needs to finish a bench of any mode as it was planned: its runs, the work of each
    workload, the mode's options (the bench's: with --repeats auto, the context to add rounds from) and the
    configuration it was asked (bench/config.py saved(): --resume rebuilds it)."""
    works = {name: asdict(work) for name, work in works.items()}
    plan = dict(bench_id=bench_id, machine_class=machine_class, works=works, runs=[asdict(run) for run in runs])
    plan.update(mode=mode, options=options or {}, config=config)
    write_whole(path, lambda tmp: Path(tmp).write_text(json.dumps(plan, indent=1) + "\n"))


def saved_run(fields):
    """A Run from a saved plan; one saved before runs kept their flags (its whole command a script) or their batch and
    model gets them from its command."""
    if "cmd" in fields:
        fields = {("script" if name == "cmd" else name): value for name, value in fields.items()}
    run = Run(**fields)
    if "batch_size" not in fields and "--batch-size" in run.cmd:
        run.batch_size = int(run.cmd[run.cmd.index("--batch-size") + 1])
    if "model" not in fields and "--model" in run.cmd:
        run.model = run.cmd[run.cmd.index("--model") + 1]
    return run


def load(path):
    """The plan saved by save(); a damaged one is a BenchError naming it (the bench's rows are in runs.csv: --summarize
    still reads them)."""
    try:
        plan = json.loads(Path(path).read_text())
        plan["works"] = {name: Work.saved(fields) for name, fields in plan["works"].items()}
        return plan, [saved_run(run) for run in plan["runs"]]
    except (ValueError, KeyError, TypeError) as e:  # not JSON, or not a plan: nothing --resume can trust
        raise BenchError(
            f"{path} is damaged ({type(e).__name__}: {str(e)[:80]}): --resume cannot finish that bench; --summarize"
            " still reads its finished rows, and a new bench starts afresh"
        ) from None
