"""Plan a bench: which runs, with which command lines, all on the same work.

Every training run gets the same model, data, global batch, step count and warm-up; DDP splits
the global batch over its processes, DataParallel over its GPUs. Repeats are interleaved
(baseline, dp, ..., baseline, dp, ...) so that drift in the machine's speed touches every
variant alike.
"""

import sys
from dataclasses import dataclass, field

# variant -> the command after `python`: the script and the flags that make the technique
TRAIN = {
    "baseline": ["train.py"],
    "dp": ["train_dp.py"],
    "ddp": ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "{nproc}", "train_ddp.py"],
    "amp": ["train_amp.py"],
    "dali": ["train.py", "--loader", "dali"],
}
LOADERS = {"loader": "loader.py", "loader_dali": "loader_dali.py"}

# the default work, by machine: seconds per run on a GPU, a few minutes in all on a 2-core CPU
GPU_DEFAULTS = dict(model="resnet18", batch_size=256, steps=110, warmup_steps=10, loader_steps=100, timeout=600)
CPU_DEFAULTS = dict(model="shufflenet_v2_x0_5", batch_size=64, steps=25, warmup_steps=5, loader_steps=50, timeout=300)


@dataclass
class Run:
    name: str  # unique within the bench, e.g. "amp-2"
    variant: str  # a key of TRAIN or LOADERS
    kind: str  # "train" or "loader"
    repeat: int
    processes: int
    cmd: list = field(default_factory=list)


def default_workers(cores, processes):
    """Loader processes per training process: the cores shared out, one at least, eight at most."""
    return max(1, min(8, cores // (2 * processes)))


def make_plan(args, gpu_count, cores):
    """The list of runs for the parsed bench arguments on a machine with gpu_count GPUs."""
    device = "cuda" if gpu_count else "cpu"
    nproc = args.nproc or gpu_count or 2
    runs = []
    for repeat in range(1, args.repeats + 1):
        for variant in args.variants:
            processes = nproc if variant == "ddp" else 1
            workers = args.workers if args.workers is not None else default_workers(cores, processes)
            cmd = [sys.executable, *(part.format(nproc=nproc) for part in TRAIN[variant])]
            cmd += ["--data", args.data, "--model", args.model, "--batch-size", args.batch_size]
            cmd += ["--steps", args.steps, "--warmup-steps", args.warmup_steps, "--workers", workers]
            cmd += ["--device", device, "--seed", args.seed, "--no-progress"]
            runs.append(Run(f"{variant}-{repeat}", variant, "train", repeat, processes, list(map(str, cmd))))
        for variant in args.loaders:
            workers = args.workers if args.workers is not None else default_workers(cores, 1)
            cmd = [sys.executable, LOADERS[variant], "--bench", "--data", args.data, "--batch-size", args.batch_size]
            cmd += ["--steps", args.loader_steps, "--warmup-steps", 5, "--workers", workers, "--device", device]
            runs.append(Run(f"{variant}-{repeat}", variant, "loader", repeat, 1, list(map(str, cmd))))
    return runs
