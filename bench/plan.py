"""Plan a bench: which runs, with which command lines, all on the same work.

Every training run gets the same model, data, global batch, step count and warm-up; DDP splits
the global batch over its processes, DataParallel over its GPUs. The synthetic rows train on
batches made once on the device, with the data's image size and classes: the speed limit of the
model on this machine, which the real rows of the same precision are read against. Repeats are
interleaved (baseline, dp, ..., baseline, dp, ...) so that drift in the machine's speed touches
every variant alike.
"""

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench import BenchError
from bench.machine import ROOT

TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "{nproc}"]
# variant -> the command after `python`: the script and the flags that make the technique
TRAIN = {
    "baseline": ["train.py"],
    "dp": ["train_dp.py"],
    "ddp": [*TORCHRUN, "train_ddp.py"],
    "amp": ["train_amp.py"],
    "dali": ["train.py", "--loader", "dali"],
    "synthetic": ["train.py", "--data", "{synthetic}"],
    "amp-synthetic": ["train_amp.py", "--data", "{synthetic}"],
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


def fill_defaults(args, gpu_count):
    """The flags left unset take this machine's defaults (a GPU's, or a CPU's)."""
    for name, value in (GPU_DEFAULTS if gpu_count else CPU_DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.warmup_steps >= args.steps:
        raise BenchError(f"--warmup-steps {args.warmup_steps} leaves none of the {args.steps} steps to time")


def describe(data):
    """What loader.py finds in the data folder (checked here once, not in every run): its DataInfo as a dict."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "info.json"
        probe = subprocess.run(
            [sys.executable, "loader.py", "--data", data, "--workers", "0", "--metrics-out", str(out)],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        if probe.returncode != 0:
            lines = probe.stderr.strip().splitlines() or ["no output"]
            raise BenchError(f"the data cannot be used: {lines[-1].split('error: ', 1)[-1]}")
        return json.loads(out.read_text())


def default_workers(cores, processes):
    """Loader processes per training process: the cores shared out, one at least, eight at most."""
    return max(1, min(8, cores // (2 * processes)))


def make_plan(args, gpu_count, cores, info):
    """The list of runs for the parsed bench arguments on a machine with gpu_count GPUs; info: describe()."""
    device = "cuda" if gpu_count else "cpu"
    nproc = args.nproc or gpu_count or 2
    synthetic = f"synthetic:{info['image_size']}:{len(info['classes'])}"
    runs = []
    for repeat in range(1, args.repeats + 1):
        for variant in args.variants:
            processes = nproc if variant == "ddp" else 1
            workers = args.workers if args.workers is not None else default_workers(cores, processes)
            cmd = [sys.executable, *(part.format(nproc=nproc, synthetic=synthetic) for part in TRAIN[variant])]
            if "--data" not in cmd:
                cmd += ["--data", args.data]
            cmd += ["--model", args.model, "--batch-size", args.batch_size]
            cmd += ["--steps", args.steps, "--warmup-steps", args.warmup_steps, "--workers", workers]
            cmd += ["--device", device, "--seed", args.seed, "--no-progress"]
            runs.append(Run(f"{variant}-{repeat}", variant, "train", repeat, processes, list(map(str, cmd))))
        for variant in args.loaders:
            workers = args.workers if args.workers is not None else default_workers(cores, 1)
            cmd = [sys.executable, LOADERS[variant], "--bench", "--data", args.data, "--batch-size", args.batch_size]
            cmd += ["--steps", args.loader_steps, "--warmup-steps", 5, "--workers", workers, "--device", device]
            runs.append(Run(f"{variant}-{repeat}", variant, "loader", repeat, 1, list(map(str, cmd))))
    return runs
