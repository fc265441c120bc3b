"""What a plan is made of: the typed records the planner hands the stages after it (bench/stages/planning/plan.py makes
them).

Work     a workload's work: what every run of it trains on and for how long (saved in plan.json)
Context  what a round of runs is made from beside each workload's work: the machine, the processes, the rows
Fit      how the plan fits its budget (bench/stages/planning/fit.py), for the estimate and the executor
Run      one run: its script, its flags in order (its command built last), its estimate, and what its estimate
         reads of its catalogue row (whether it compiles, trains under autocast, how much slower its window is)
"""

import dataclasses
from dataclasses import dataclass, field

from bench import catalogue
from bench.stages import epochs
from bench.stages.cost import WINDOW_S


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
    nodes: int = (
        0  # --launcher slurm: the nodes its torchrun agents run on (bench/stages/planning/slurm.py); 0: this machine
    )
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

    # what its estimate reads of its catalogue row (bench/stages/cost.py asks the run, not the catalogue)
    @property
    def compiles(self):
        """Its script compiles the model (its row's, or a combination's: all:no-compile does not)."""
        return catalogue.compiled(self.variant)

    @property
    def own_cache(self):
        """It compiles into a cache of its own, not its row's (a row over another loader, all:no-ddp+nvjpeg, shares
        the cache of its row, which runs before it)."""
        return catalogue.with_loader(self.variant)[1] is None

    @property
    def amp(self):
        """It trains under autocast: its window is emulated bf16's on a CPU without native bf16."""
        return catalogue.uses_amp(self.variant)

    def slower(self, machine):
        """Its timed window against the fastest row's on a kind of machine (gpu, gpu-vit, cpu): its row's measured
        factor, 1 where none was measured."""
        return catalogue.slower(self.variant, machine)

    def with_flags(self, **changes):
        """A copy of the run with some fields changed and flags set (flags: {"--batch-size": 512, ...})."""
        flags = {flag: None if value is None else str(value) for flag, value in changes.pop("flags", {}).items()}
        return dataclasses.replace(self, **changes, flags={**self.flags, **flags})
