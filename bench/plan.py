"""Plan a bench: which runs, with which command lines, all on the same work.

Every training run of a workload gets the same model, data, global batch, step count and warm-up;
DDP splits the global batch over its processes, DataParallel over its GPUs. The synthetic rows
train on batches made once on the device, with the data's image size and classes: the speed limit
of the model on this machine, which the real rows of the same precision are read against. Repeats
are interleaved (baseline, dp, ..., baseline, dp, ...) so that drift in the machine's speed touches
every variant alike.

The defaults depend on the machine and the workload (DEFAULTS). On a GPU the steps are calibrated
(--steps auto): a short run of the fastest row, the mixed-precision ceiling, gives its step time,
and every row then runs enough steps for that row's timed window to last WINDOW_S seconds. The plan
is stored with the bench (plan.json in its log folder) so that `--resume` can finish it.
"""

import json
import math
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import BenchError, data, write_whole
from bench.machine import ROOT

TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "{nproc}"]
# variant -> the command after `python`: the script and the flags that make the technique
TRAIN = {
    "baseline": ["train.py"],
    "dp": ["train_dp.py"],
    "ddp": [*TORCHRUN, "train_ddp.py"],
    "amp": ["train_amp.py"],
    "channels_last": ["train_channels_last.py"],
    "compile": ["train_compile.py"],
    "checkpoint": ["train_checkpoint.py"],
    "all": [*TORCHRUN, "train_all.py"],
    "dali": ["train.py", "--loader", "dali"],
    "synthetic": ["train.py", "--data", "{synthetic}"],
    "amp-synthetic": ["train_amp.py", "--data", "{synthetic}"],
}
LOADERS = {"loader": "loader.py", "loader_dali": "loader_dali.py"}
MULTI_GPU = {"dp", "ddp"}  # their speed-up needs 2 GPUs or more; with fewer, their rows show the overhead only
DISTRIBUTED = {"ddp", "all"}  # run by torchrun, one process per GPU (2 on a CPU)
COMPILED = {"compile", "all"}  # one compile cache per variant and bench: the first repeat compiles cold, the rest warm

# the default work, by machine and workload; steps "auto": calibrated on the machine (GPU only)
DEFAULTS = {
    ("gpu", "small"): dict(model="resnet18", batch_size=256, steps="auto", warmup_steps=30, eval_samples=5000),
    ("gpu", "imagenet"): dict(model="resnet50", batch_size=256, steps="auto", warmup_steps=20, eval_samples=2000),
    ("gpu", "custom"): dict(model="resnet50", batch_size=256, steps="auto", warmup_steps=20, eval_samples=2000),
    ("cpu", "small"): dict(model="shufflenet_v2_x0_5", batch_size=64, steps=25, warmup_steps=5, eval_samples=1000),
    ("cpu", "imagenet"): dict(model="shufflenet_v2_x0_5", batch_size=16, steps=10, warmup_steps=3, eval_samples=100),
    ("cpu", "custom"): dict(model="shufflenet_v2_x0_5", batch_size=64, steps=25, warmup_steps=5, eval_samples=1000),
}
TIMEOUT = dict(gpu=900, cpu=600)  # seconds a run may take (a cold compile on 2 cores: minutes)
WINDOW_S = 7.0  # the mixed-precision ceiling's timed window, at least: a compiled row up to 1.4x faster keeps 5 s


@dataclass
class Run:
    name: str  # unique within the bench, e.g. "amp-2" (with several workloads "imagenet-amp-2")
    variant: str  # a key of TRAIN or LOADERS
    kind: str  # "train" or "loader"
    repeat: int
    processes: int
    cmd: list = field(default_factory=list)
    workload: str = "custom"
    env: dict = field(default_factory=dict)  # set for the run, e.g. TORCHINDUCTOR_CACHE_DIR


def workloads(args, gpu_count):
    """The workloads of this bench: --data DIR is one of the user's own ("custom")."""
    if args.data is not None:
        return ["custom"]
    if args.workload == "all" or (args.workload is None and gpu_count):
        return list(data.WORKLOADS)  # a GPU's default: both
    return [args.workload or "small"]


def work(args, gpu_count, workload):
    """The flags of a workload's runs: the user's where given, this machine's defaults elsewhere."""
    defaults = DEFAULTS[("gpu" if gpu_count else "cpu", workload)]
    chosen = {name: getattr(args, name, None) for name in defaults}
    chosen = {name: defaults[name] if value is None else value for name, value in chosen.items()}
    if chosen["steps"] != "auto" and chosen["warmup_steps"] >= chosen["steps"]:
        raise BenchError(f"--warmup-steps {chosen['warmup_steps']} leaves none of the {chosen['steps']} steps to time")
    chosen["timeout"] = args.timeout or TIMEOUT["gpu" if gpu_count else "cpu"]
    return chosen


def folder(args, workload, generate=True):
    """The data folder of a workload: the user's, or the generated one (made when missing, unless only planning)."""
    if workload == "custom":
        path = Path(args.data).resolve()
        if not path.exists():
            raise BenchError(f"data folder {args.data} does not exist")
        return str(path)
    return data.ensure(workload) if generate else str(ROOT / "data" / workload)


def describe(path, workload):
    """What loader.py finds in the data folder (checked here once, not in every run): image_size, classes, ...
    A generated workload not made yet is described from its parameters."""
    if not Path(path).exists() and workload in data.WORKLOADS:
        size = data.WORKLOADS[workload]["size"]
        return dict(image_size=size if size <= 64 else 224, classes=data.CLASSES, dataset="generated")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "info.json"
        probe = subprocess.run(
            [sys.executable, "loader.py", "--data", path, "--workers", "0", "--metrics-out", str(out)],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        if probe.returncode != 0:
            lines = probe.stderr.strip().splitlines() or ["no output"]
            raise BenchError(f"the data cannot be used: {lines[-1].split('error: ', 1)[-1]}")
        return json.loads(out.read_text())


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


def calibrate(path, info, chosen, gpu_count, variants, log, nproc=1):
    """Steps for every row: enough for the fastest one to time WINDOW_S seconds. The fastest single process is the
    mixed-precision ceiling; DDP rows on nproc GPUs split each step over them, so they may be up to nproc times
    faster still, and the steps are multiplied by nproc where such rows are planned."""
    variant = next((v for v in ("amp-synthetic", "synthetic") if v in variants), variants[0])
    steps, warmup = chosen["warmup_steps"] + 60, chosen["warmup_steps"]
    run = training_run(variant, 0, path, info, dict(chosen, steps=steps), gpu_count, 1, None, 1, "custom")
    out = Path(log) / "calibration.json"
    probe = subprocess.run([*run.cmd, "--metrics-out", str(out)], cwd=ROOT, capture_output=True, text=True)
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["no output"]
        raise BenchError(f"calibration ({' '.join(run.cmd[1:3])}) failed: {lines[-1]}")
    step_s = json.loads(out.read_text())["step_time_median_ms"] / 1e3
    split = nproc if gpu_count and DISTRIBUTED & set(variants) else 1
    timed = max(50, math.ceil(WINDOW_S * split / step_s))
    over = f" ({split} DDP processes may split a step)" if split > 1 else ""
    print(f"calibrated: {variant} takes {step_s * 1e3:.1f} ms a step: {timed} steps timed after {warmup}{over}",
          flush=True)  # fmt: skip
    return warmup + timed


def training_run(
    variant, repeat, path, info, chosen, gpu_count, nproc, workers, cores, workload, prefix="", cache=None
):
    device = "cuda" if gpu_count else "cpu"
    processes = nproc if variant in DISTRIBUTED else 1
    workers = workers if workers is not None else default_workers(cores, processes, bool(gpu_count))
    parts = (part.format(nproc=nproc, synthetic=synthetic_spec(info)) for part in TRAIN[variant])
    cmd = [sys.executable, *parts]
    if "--data" not in cmd:
        cmd += ["--data", path]
    cmd += ["--model", chosen["model"], "--batch-size", chosen["batch_size"], "--steps", chosen["steps"]]
    cmd += ["--warmup-steps", chosen["warmup_steps"], "--workers", workers, "--eval-samples", chosen["eval_samples"]]
    cmd += ["--device", device, "--seed", chosen.get("seed", 0), "--no-progress"]
    run = Run(f"{prefix}{variant}-{repeat}", variant, "train", repeat, processes, list(map(str, cmd)), workload)
    if variant in COMPILED and cache is not None:
        run.env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(cache) / "compile-cache" / f"{prefix}{variant}")
    return run


def loader_run(variant, repeat, path, chosen, gpu_count, workers, cores, workload, prefix=""):
    workers = workers if workers is not None else default_workers(cores, 1, bool(gpu_count))
    steps = chosen["loader_steps"]
    if steps is None:  # as many batches as the training runs time
        steps = "auto" if chosen["steps"] == "auto" else chosen["steps"] - chosen["warmup_steps"]
    cmd = [sys.executable, LOADERS[variant], "--bench", "--data", path, "--batch-size", chosen["batch_size"]]
    cmd += ["--steps", steps, "--warmup-steps", 5, "--workers", workers, "--device", "cuda" if gpu_count else "cpu"]
    return Run(f"{prefix}{variant}-{repeat}", variant, "loader", repeat, 1, list(map(str, cmd)), workload)


def make_plan(args, gpu_count, cores, log=None, dry_run=False):
    """The runs of the bench for the parsed arguments on a machine with gpu_count GPUs, workload after workload,
    and what each workload's work is ({workload: flags}); steps "auto" is calibrated here unless dry_run."""
    runs, works = [], {}
    names = workloads(args, gpu_count)
    nproc = args.nproc or gpu_count or 2
    if gpu_count and nproc > gpu_count:
        raise BenchError(f"--nproc {nproc}: DDP runs one process per GPU and this machine has {gpu_count} GPU(s)")
    for workload in names:
        chosen = work(args, gpu_count, workload)
        chosen.update(seed=args.seed, loader_steps=args.loader_steps)
        path = folder(args, workload, generate=not dry_run)
        info = describe(path, workload)
        if chosen["batch_size"] > info.get("train_size", math.inf):
            raise BenchError(f"--batch-size {chosen['batch_size']} is larger than the training set of {path} "
                             f"({info['train_size']} images)")  # fmt: skip
        if not dry_run:
            check_model(chosen["model"], info)
        if chosen["steps"] == "auto" and not dry_run:
            chosen["steps"] = calibrate(path, info, chosen, gpu_count, args.variants, log, nproc)
        works[workload] = dict(chosen, data=path, image_size=info["image_size"], classes=len(info["classes"]))
        prefix = f"{workload}-" if len(names) > 1 else ""
        for repeat in range(1, args.repeats + 1):
            for variant in args.variants:
                where = (path, info, chosen, gpu_count, nproc, args.workers, cores, workload, prefix, log)
                runs.append(training_run(variant, repeat, *where))
            for variant in args.loaders:
                runs.append(loader_run(variant, repeat, path, chosen, gpu_count, args.workers, cores, workload, prefix))
    return runs, works


def save(path, bench_id, machine_class, runs, works):
    """plan.json: what --resume needs to finish the bench as it was planned."""
    plan = dict(bench_id=bench_id, machine_class=machine_class, works=works, runs=[asdict(run) for run in runs])
    write_whole(path, lambda tmp: Path(tmp).write_text(json.dumps(plan, indent=1) + "\n"))


def load(path):
    plan = json.loads(Path(path).read_text())
    return plan, [Run(**run) for run in plan["runs"]]
