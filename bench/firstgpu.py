"""python -m bench.firstgpu: the first GPU run, prepared so that it needs no thinking on the GPU machine.

A lent GPU gives 30 minutes and 10 a command, and no second try. This runs what the first look needs, in two parts
of at most PART_S seconds each (one device command each), in this order:

    python3 -m bench.firstgpu --part 1 --out $OUT    # the environment, --check, one round of the small workload
    python3 -m bench.firstgpu --part 2 --out $OUT    # --max-batch on two variants, the loader rate at 224 px
                                                     # (resnet50's input), resnet50's cold compile
    python -m bench.firstgpu --dry-run               # each part's steps, their commands and time limits (any machine)

Each step is a process with its own time limit (SIGTERM at the limit, which the bench answers by keeping its finished
rows and writing its tables; SIGKILL 20 s later), never past the part's end; a step that no longer fits is skipped
and said. Everything is written under one folder, /tmp/firstgpu/part-N (the machine keeps /tmp while it is warm),
then packed into OUT/part-N.tar.gz, the compile caches and generated data left out, with OUT/part-N.md beside it: each
step, its command, exit code, seconds and last line. What comes back from the device is these two files.

The GPU machine has no network and lacks some of what the bench needs (requirements.txt: scipy, jinja2, pygments,
filelock, tqdm; the scripts need tqdm). Here, once: `python -m bench.firstgpu --fetch-wheels` downloads their wheels for
its Python 3.12 into .wheels/ (git-ignored, about 40 MB: one call's carry); carry it (carry [".wheels"]) in each
part's call, and the part installs them with --target into the DALI folder below before its first step.

The environment step writes environment.json: the versions (Python, torch, torchvision, CUDA, cuDNN, NCCL, the
driver), every GPU's name, capability and memory, nvidia-smi's report, /dev/shm's size (the DataLoader's workers
pass batches through it), the cores and memory, whether NVML's process list shows the PID of a process of ours that
holds CUDA memory (if not, the bench reads GPU memory as the device's rise and GPU sharing as unknown), and whether
DALI imports. DALI has no wheel on the GPU machine: bring it with ../shared/gpu/dali-wheels.sh, install it with
--target into /tmp/site (or $DALI_SITE), and every step here finds it there (PYTHONPATH).
"""

import argparse
import importlib.util
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import NEEDED
from bench.machine import ROOT

PART_S = 570  # a device command may run 600 s: 30 to spare for the start and the packing
GRACE_S = 20  # after SIGTERM, before SIGKILL
WORK = Path("/tmp/firstgpu")
LEFT_OUT = {"compile-cache", "data", "tensorboard"}  # folders not packed: large, and rebuilt by any run
# --profile's traces are not packed either (megabytes each): their operators are in the metrics
TRACE = ".pt.trace.json.gz"


@dataclass
class Step:
    name: str
    part: int
    limit_s: int  # at most; less where the part's end comes first
    cmd: list  # after `python`; {work} is the part's folder, {minutes} the minutes left to the step
    env: dict = field(default_factory=dict)
    least_s: int = 30  # skipped when less than this is left of the part


STEPS = [
    Step("environment", 1, 90, ["-m", "bench.firstgpu", "--environment", "{work}/environment.json"]),
    Step("check", 1, 300, ["-m", "bench", "--check", "--out", "{work}/check"], least_s=120),
    # one round of the GPU plan's small workload, rows left out from the end to fit what is left of the part; each
    # training run profiled after its window (its kernels, the traces in the logs) and its energy read (NVML)
    Step(
        "bench-small",
        1,
        PART_S,
        [
            "-m",
            "bench",
            "--workload",
            "small",
            "--repeats",
            "1",
            "--loaders",
            "loader",
            "--profile",
            "--budget",
            "{minutes}",
            "--out",
            "{work}/bench",
        ],
        least_s=120,
    ),  # fmt: skip
    Step(
        "max-batch",
        2,
        240,
        [
            "-m",
            "bench",
            "--max-batch",
            "--workload",
            "small",
            "--variants",
            "baseline,amp",
            "--budget",
            "3",
            "--out",
            "{work}/max-batch",
        ],
        least_s=120,
    ),  # fmt: skip
    Step("imagenet-data", 2, 120, ["-m", "bench.data", "--workload", "imagenet"]),
    Step(
        "loader-rate",
        2,
        100,
        [
            "-m",
            "bench",
            "--workload",
            "imagenet",
            "--variants",
            "",
            "--loaders",
            "loader,loader_dali",
            "--repeats",
            "1",
            "--out",
            "{work}/loaders",
        ],
    ),  # fmt: skip
    Step(
        "cold-compile",
        2,
        150,
        [
            "train_compile.py",
            "--model",
            "resnet50",
            "--data",
            "synthetic:224:1000",
            "--batch-size",
            "128",
            "--steps",
            "6",
            "--warmup-steps",
            "2",
            "--workers",
            "0",
            "--no-progress",
            "--metrics-out",
            "{work}/cold-compile.json",
        ],
        env={"TORCHINDUCTOR_CACHE_DIR": "{work}/compile-cache"},
    ),  # fmt: skip
]


WHEELS = ROOT / ".wheels"
FETCHED = [
    "scipy==1.17.1",
    "jinja2==3.1.6",
    "markupsafe==3.0.3",
    "pygments==2.21.0",
    "filelock==4.2.11",
    "tqdm==4.70.1",
]  # fmt: skip  (requirements.txt's, that the GPU machine lacks)


def fetch_wheels():
    """Download FETCHED for the GPU machine (CPython 3.12, x86-64 Linux) into .wheels/ (in .gitignore)."""
    platforms = [flag for p in ("manylinux_2_28_x86_64", "manylinux2014_x86_64") for flag in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           "3.12", "--implementation", "cp", *platforms, "-d", str(WHEELS), *FETCHED]  # fmt: skip
    subprocess.run(cmd, check=True)
    print(f"{WHEELS}: {sum(p.stat().st_size for p in WHEELS.glob('*.whl')) / 2**20:.0f} MiB; carry it with each part")


def install_wheels(site, wheels=None):
    """Install the carried wheels (if any) into site, with no network: (what was said, ok)."""
    found = sorted(Path(wheels or WHEELS).glob("*.whl"))
    if not found:
        return "no wheels carried (.wheels/): the machine's own packages", True
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target",
           str(site), *map(str, found)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        return f"installing the carried wheels failed: {last_words(done.stderr)}", False
    return f"installed {len(found)} carried wheels into {site}", True


def fill(text, work, minutes):
    return text.format(work=work, minutes=f"{minutes:.1f}")


def environment_of(dali_site):
    """The step's environment: DALI's folder on PYTHONPATH where it was installed."""
    env = dict(os.environ)
    if Path(dali_site).is_dir():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (dali_site, env.get("PYTHONPATH")) if p)
    return env


def run_step(step, work, deadline, env, log):
    """(exit code or a word, seconds): the step under its limit, its output in log."""
    left = deadline - time.monotonic()
    if left < step.least_s:
        log.write_text(f"skipped: {left:.0f} s were left of the part, the step needs {step.least_s} s\n")
        return "skipped", 0.0
    limit = min(step.limit_s, left)
    cmd = [sys.executable, *(fill(part, work, (limit - 30) / 60) for part in step.cmd)]
    env = {**env, **{k: fill(v, work, 0) for k, v in step.env.items()}}
    started = time.monotonic()
    with open(log, "w") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        process = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)  # the bench keeps its finished rows and writes its tables
            try:
                process.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            code = f"stopped at its limit of {limit:.0f} s"
    return code, time.monotonic() - started


def last_line(log):
    lines = [line for line in Path(log).read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def run_part(part, out, dali_site, steps=None):
    """Run a part's steps in order under its deadline; pack its folder into out. Returns the steps' rows."""
    steps = [s for s in (steps or STEPS) if s.part == part]
    work = WORK / f"part-{part}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    said, _ = install_wheels(dali_site)
    print(said, flush=True)
    env, deadline, rows = environment_of(dali_site), time.monotonic() + PART_S, []
    for i, step in enumerate(steps, 1):
        log = work / f"{i:02d}-{step.name}.log"
        print(f"part {part}, step {i} of {len(steps)}: {step.name} (at most {step.limit_s} s)", flush=True)
        code, seconds = run_step(step, work, deadline, env, log)
        rows.append(dict(step=step.name, code=code, seconds=seconds, last=last_line(log), log=log.name))
        print(f"  {code} after {seconds:.0f} s: {rows[-1]['last']}", flush=True)
    report = [f"# The first GPU run, part {part}: {platform.node()}", "", "| step | exit | seconds | last line |"]
    report += ["|---|---|---|---|"] + [
        f"| {r['step']} | {r['code']} | {r['seconds']:.0f} | {r['last']} |" for r in rows
    ]
    (work / "steps.md").write_text("\n".join(report) + "\n")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "steps.md", out / f"part-{part}.md")
    with tarfile.open(out / f"part-{part}.tar.gz", "w:gz") as tar:
        tar.add(
            work,
            arcname=f"part-{part}",
            filter=lambda info: None if Path(info.name).name in LEFT_OUT or info.name.endswith(TRACE) else info,
        )
    print(f"part {part}: {out}/part-{part}.tar.gz and part-{part}.md", flush=True)
    return rows


def environment(path):
    """environment.json: what the first GPU run is read against (see the module's docstring)."""
    import psutil
    import torch
    import torchvision

    from bench import sample

    found = dict(python=platform.python_version(), torch=torch.__version__, torchvision=torchvision.__version__)
    found.update(cuda=torch.version.cuda, cuda_available=torch.cuda.is_available(), cores=os.cpu_count())
    found["ram_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    if torch.cuda.is_available():
        found["cudnn"] = torch.backends.cudnn.version()
        nccl = torch.cuda.nccl.version() if hasattr(torch.cuda, "nccl") else None
        found["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
        found["gpus"] = [
            dict(name=p.name, capability=f"{p.major}.{p.minor}", memory_gib=round(p.total_memory / 2**30, 1))
            for p in map(torch.cuda.get_device_properties, range(torch.cuda.device_count()))
        ]
    shm = shutil.disk_usage("/dev/shm") if Path("/dev/shm").exists() else None
    found["dev_shm_gib"] = round(shm.total / 2**30, 2) if shm else None
    found["nvidia_smi"] = command_output(["nvidia-smi"])
    found["nvml_sees_our_pids"] = nvml_sees_our_pids(sample) if torch.cuda.is_available() else "no GPU"
    dali = subprocess.run([sys.executable, "-c", "import nvidia.dali as d; print(d.__version__)"], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    found["dali"] = dali.stdout.strip() if dali.returncode == 0 else f"does not import: {last_words(dali.stderr)}"
    found["missing"] = [package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None]
    Path(path).write_text(json.dumps(found, indent=1) + "\n")
    print(json.dumps({k: v for k, v in found.items() if k != "nvidia_smi"}, indent=1))


def command_output(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"not run: {e}"


def last_words(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def nvml_sees_our_pids(sample):
    """Does NVML's process list hold the PID of a child of ours that holds CUDA memory? yes, no (and what it saw),
    or why it could not be asked."""
    holds = "import time, torch; torch.ones(1, device='cuda'); print('ready', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", holds], stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            return "the child process could not use CUDA"
        try:
            pids = {
                p.pid for h in sample.visible_handles() for p in sample.call("nvmlDeviceGetComputeRunningProcesses", h)
            }
        except sample.Unavailable as e:
            return f"NVML cannot be asked: {e}"
        return "yes" if child.pid in pids else f"no: NVML lists {sorted(pids)}, ours was {child.pid}"
    finally:
        child.kill()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.firstgpu", description=__doc__.splitlines()[0])
    p.add_argument("--part", type=int, choices=[1, 2], help="the part to run")
    p.add_argument("--out", default="results/firstgpu", help="where part-N.tar.gz and part-N.md go (the device: $OUT)")
    p.add_argument("--dry-run", action="store_true", help="print each part's steps and stop")
    p.add_argument("--dali-site", default=os.environ.get("DALI_SITE", "/tmp/site"), help="where DALI was installed")
    p.add_argument("--fetch-wheels", action="store_true", help="here, once: the wheels the GPU machine lacks")
    p.add_argument("--environment", metavar="FILE", help=argparse.SUPPRESS)  # the first step, in its own process
    args = p.parse_args(argv)
    if args.fetch_wheels:
        return fetch_wheels()
    if args.environment:
        return environment(args.environment)
    if args.dry_run or args.part is None:
        for part in 1, 2:
            steps = [s for s in STEPS if s.part == part]
            print(f"part {part} (at most {PART_S} s; python3 -m bench.firstgpu --part {part} --out $OUT):")
            for step in steps:
                cmd = shlex.join(["python", *(fill(c, WORK / f"part-{part}", step.limit_s / 60) for c in step.cmd)])
                print(f"  {step.name} (at most {step.limit_s} s): {cmd}")
            print()
        return None
    run_part(args.part, args.out, args.dali_site)
    return None


if __name__ == "__main__":
    main()
