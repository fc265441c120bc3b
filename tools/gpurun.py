"""python tools/gpurun.py: the next GPU run, prepared so that it needs no thinking on the GPU machine.

A lent GPU gives 15 minutes of device time and 10 a command, and the machine goes back 30 s after a command ends.
The run is one device command of at most PART_SECONDS[1] (9.5 minutes) on a bare machine, then, at once (the machine
warm, its data and compile caches still there), one that spends what the session has left (PART_SECONDS[2]: the
session's 13 minutes with the machine's start, PLAN_S, less part 1 and the pause between):

    python3 tools/gpurun.py --part 1 --out $OUT   # the environment, the data, the recipe over each loader, paired
    python3 tools/gpurun.py --part 2 --out $OUT   # at once after it: its rounds finished, the loaders alone, vit
    python3 tools/gpurun.py --carry               # a call that carries .dali/N alone (one per part: N = 1 to 3)
    python3 tools/gpurun.py --part 3 --out $OUT   # the recipe over DALI, once its parts are all there (a session
                                                  # of its own)
    python tools/gpurun.py --dry-run              # each part's steps, their commands, time limits and estimates
    python3 tools/gpurun.py --part 2 --seconds 150 --out $OUT     # a part cut to the device time that is left

What it measures, in order of value (the rows already settled in baseline/ are not run again): the baseline and the
whole recipe with compile (train_all.py in one process: amp, channels_last, torch.compile) over each loader, in
paired rounds: the torchvision DataLoader (loader.py) and the GPU's own JPEG decode (loader_nvjpeg.py: rows nvjpeg
and all:no-ddp+nvjpeg), with the recipe's ceiling (all-synthetic: the same recipe on batches already on the device,
how far the recipe is from its compute limit) in the same rounds; then each loader alone (loader.py and
loader_nvjpeg.py --bench: images/s with no training); then vit's ddp and fsdp rows (FSDP has never run on a GPU).
DALI's rows need its wheels carried in three calls first: a session of their own (part 3).

Part 1 writes the environment (in the background), generates the imagenet workload (before any run and outside
every run's time limit: bench/data.py, seconds on 16 cores), then runs the recipe's rows in paired rounds until the
part's clock ends them (SIGTERM: the bench keeps its finished rows and writes its tables). Every row is kept: no
budget drops a row by the saved runs' costs. Part 2 goes on in part 1's folder: the same bench resumed (--resume: its
rows' next rounds, in the compile caches the first rounds filled) where more than its reserve is left, then the
loaders alone, then vit's rows, each where its least time is left. Each step is a process with its own time limit
(SIGTERM at the limit; SIGKILL GRACE_S later); a step may keep time for the steps after it (reserve_s), and a step
that no longer fits is skipped and said. Everything is written under /tmp/gpurun/part-N (the machine keeps /tmp while
it is warm) and packed into OUT/part-N.tar.gz as it goes (every MIRROR_S seconds where something changed, each pack
written whole, and after each step: a command killed at its limit leaves what it had measured in one file, as a
device call brings back at most 8), the compile caches and generated data left out, with OUT/part-N.md beside it:
each step, its command, exit code, seconds and last line.

DALI's wheels exceed a call's carry (64 MiB with the working tree): --pack-dali unpacks them as pip --target would,
keeps what the pipeline of loader_dali.py loads on the GPU machine's Python (PRUNED: no other Python's binaries,
headers, JPEG 2000, TIFF or compression libraries: 144 MB compressed with xz, against 196 MB whole), and cuts them
into parts that fit beside the tree, .dali/1..N (ignored by git). Each call that carries one keeps it in /tmp/dali
(--carry does only that), and the part whose call brings the last unpacks DALI into /tmp/site (or $DALI_SITE), which
every step finds (PYTHONPATH). What a carry costs is the call: the machine warm, its transfer and a command of a
second (CARRY_S each, as the first GPU run's five calls measured them). The GPU machine has no network; what
requirements.txt needs beyond DALI it has, so no other wheel is carried unless .wheels/ holds some (--fetch-wheels
fills it, for another machine).

The environment step writes environment.json: the versions (Python, torch, torchvision, CUDA, cuDNN, NCCL, the
driver), every GPU's name, capability and memory, nvidia-smi's report, /dev/shm's size (the DataLoader's workers
pass batches through it), the cores and memory, whether NVML's process list shows the PID of a process of ours that
holds CUDA memory (if not, the bench reads GPU memory as the device's rise and GPU sharing as unknown), and whether
DALI imports.
"""

import argparse
import importlib.util
import io
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the bench package, beside tools/
from bench import NEEDED  # noqa: E402
from bench.observe.machine import ROOT  # noqa: E402

PART_S = 570  # a device command may run 600 s: the rest for the machine's start and the transfers
START_S = 33  # the machine's start and a call's transfers (the fourth GPU run: 577 s held after 545 s of command)
BETWEEN_S = 26  # the next call asked at once: the machine idle, the transfers (the same run: 843 - 577 - 240 s)
PLAN_S = 13 * 60  # the GPU seconds a session's calls take at most: the rest of its 15 minutes is slack
# a session has 15 minutes of device time: part 1 in one command (9.5 min), part 2 at once after it with the rest of
# PLAN_S; DALI's carries and its part 3 need a session of their own
PART_SECONDS = {1: 570, 2: PLAN_S - START_S - 570 - BETWEEN_S, 3: 420}
CONTINUES = {2: 1}  # part 2 goes on in part 1's folder (its bench resumed), which it does not empty
CARRY_S = 15  # a call that carries one of DALI's parts, the machine warm (assumed: the first GPU run's start and
# five carries took 61 s)
DALI_CALLS = 3  # DALI's parts (--pack-dali: 144 MB in parts of about 60 MiB)
GRACE_S = 15  # after SIGTERM, before SIGKILL
PACK_S = 15  # the packing at the part's end
MIRROR_S = 10  # the part's folder copied to OUT this often: a command killed at its limit keeps what it measured
WORK = Path("/tmp/gpurun")
LEFT_OUT = {"compile-cache", "data", "tensorboard"}  # folders not packed: large, and rebuilt by any run
# --profile's traces are not packed either (megabytes each): their operators are in the metrics
TRACE = ".pt.trace.json.gz"
DALI_PARTS = (
    ROOT / ".dali"
)  # here: .dali/N/ one part a call (--pack-dali); there: each call copies its part to /tmp/dali
DALI_TMP = Path("/tmp/dali")
CARRY_MIB = 64  # a device call's working tree and carry together, at most


@dataclass
class Step:
    name: str
    part: int
    limit_s: int  # at most; less where the part's end (less reserve_s) comes first
    cmd: list  # after `python`; {work} is the part's folder, {minutes} the minutes left to the step
    env: dict = field(default_factory=dict)
    least_s: int = 30  # skipped when less than this is left of the part
    background: bool = False  # started, not waited for: it runs on beside the next steps (and parts)
    reserve_s: int = 0  # seconds of the part kept for the steps after it


def bench(flags):
    """A bench step: its flags, one round unless they say, and no budget of its own: the part's clock cuts it (SIGTERM
    keeps its finished rows and writes its tables)."""
    return ["-m", "bench", *flags.split(), "--budget", "none"]


# the recipe over each loader, with its ceiling: the baseline and the recipe (train_all.py without DDP, compile on)
# over torchvision's DataLoader and over the GPU's own JPEG decode
RECIPE = "baseline,nvjpeg,all:no-ddp,all:no-ddp+nvjpeg,all-synthetic"
DALI = "baseline,dali,all:no-ddp,all:no-ddp+dali,all-synthetic"  # part 3: the same over DALI
# 120 steps, 20 of them warm-up: a window of 100 steps, inside the generated imagenet's first epoch (156 steps: no
# epoch start), 12 s of the baseline's (119 ms a step on the H200) and 4-6 s of the recipe's
WORK_FLAGS = "--workload imagenet --steps 120 --warmup-steps 20"
DATA_S = 30  # the imagenet workload's 42,000 photos on 16 cores (its 22,000 took 15 s on the H200 machine)
LOADERS_S = 45  # each loader alone, one run of each: 15 s a run (bench/stages/cost.py), their start
VIT_S = 150  # vit's ddp and fsdp rows, one round: two runs of 35-40 s by the saved H200 runs, a cold start each
STEPS = [
    Step("environment", 1, 60, ["tools/gpurun.py", "--environment", "{work}/environment.json"], background=True,
         least_s=0),
    Step("imagenet-data", 1, 150, ["-m", "bench.data", "--workload", "imagenet"], least_s=0),
    # the recipe's rows' paired rounds until the part's clock ends them: every row kept, none dropped by the saved
    # runs' costs (a budget would keep 3 rounds of fewer rows)
    Step("recipe-rounds", 1, PART_S, bench(f"{WORK_FLAGS} --variants {RECIPE} --loaders none --repeats 3 --out"
                                           " {work}/recipe")),
    # the next command, at once: the same bench's next rounds (budget none: the resumed bench counts the first
    # rounds' time as spent), the loaders' and vit's time kept
    Step("recipe-more", 2, PART_S, ["-m", "bench", "--resume", "--out", "{work}/recipe", "--budget", "none"],
         reserve_s=LOADERS_S, least_s=45),
    Step("loaders-alone", 2, LOADERS_S + 30, ["-m", "bench", *WORK_FLAGS.split(), "--variants", "", "--loaders",
                                              "loader,loader_nvjpeg", "--repeats", "1", "--budget", "none", "--out",
                                              "{work}/loaders"], least_s=LOADERS_S),
    Step("vit-fsdp", 2, VIT_S, bench("--workload vit --variants ddp,fsdp --repeats 1 --loaders none --out {work}/vit"),
         least_s=120),
    Step("dali-rounds", 3, PART_S, bench(f"{WORK_FLAGS} --variants {DALI} --loaders loader_dali --repeats 2 --out"
                                         " {work}/dali")),
]  # fmt: skip
PARTS = sorted({s.part for s in STEPS})


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


# DALI and what it needs that the GPU machine lacks (it has numpy, packaging, six): ../shared/gpu/dali-wheels.sh's list
DALI_WHEELS = ["nvidia-dali-cuda130==2.4.0", "astunparse==1.6.3", "gast==0.7.0", "optree", "makefun", "libcst~=1.8",
               "nvtx", "nvidia-nvimgcodec-cu13>=0.9.0,<0.10.0", "nvidia-libnvcomp-cu13==5.3.0.16", "nvidia-nvjpeg",
               "nvidia-nvjpeg2k-cu13", "nvidia-nvtiff-cu13"]  # fmt: skip
MANYLINUX = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64",
             "manylinux_2_35_x86_64"]  # fmt: skip
# several wheels hold nvidia/__init__.py, which would hide the GPU machine's own nvidia.* packages: one that joins them
NAMESPACE = '__path__ = __import__("pkgutil").extend_path(__path__, __name__)\n'


def tree_bytes():
    """The bytes of the working tree a device call sends (tracked, and untracked but not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.split(b"\0")  # fmt: skip
    return sum((ROOT / name.decode()).stat().st_size for name in listed if name and (ROOT / name.decode()).is_file())


# what --pack-dali leaves out of DALI's unpacked wheels, which loader_dali.py's pipeline (a file reader, the JPEG
# decoder, crops, flips, normalisation) never loads on the GPU machine's CPython 3.12: other Pythons' extension modules
# (76 MB), C headers (17 MB), the compression library nvCOMP (33 MB; no DALI library links it) and JPEG 2000's and
# TIFF's codecs with nvimgcodec's extensions for the formats the pipeline does not read. Kept: every library DALI's
# own link to (readelf -d: its .libs, cloud storage's and video's among them), nvimgcodec and its JPEG extensions,
# nvJPEG. The pruned tree read and trained on the CPU here (loader_dali.py --bench, train.py --loader dali, with its
# Python's modules kept instead of 3.12's); 144 MB compressed against 196 MB: 3 calls of carrying rather than 4.
PYTHON_TAG = "cpython-312-"  # the GPU machine's Python (KINDS.md)
PRUNED = (
    "nvidia/libnvcomp",
    "nvidia/nvjpeg2k",
    "nvidia/nvtiff",
    "nvidia/dali/include",
    "nvidia/nvimgcodec/include",
    "nvidia/nvimgcodec/tools",
    "nvidia/cu13/include",
    *(
        f"nvidia/nvimgcodec/extensions/lib{name}_ext"
        for name in ("nvjpeg2k", "nvtiff", "tiff", "opencv", "nvbmp", "nvpnm")
    ),
)


def prune(site, python_tag=PYTHON_TAG):
    """Leave out of an unpacked DALI what its pipeline never loads here (PRUNED, and the extension modules of every
    Python but python_tag's); returns the bytes left out."""
    site, gone = Path(site), 0
    doomed = [p for p in site.rglob("*cpython-3*") if p.is_file() and python_tag not in p.name]
    for pattern in PRUNED:
        doomed += [p for p in site.glob(pattern + "*")]
    for path in doomed:
        if path.is_dir():
            gone += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            shutil.rmtree(path)
        elif path.exists():
            gone += path.stat().st_size
            path.unlink()
    return gone


def pack_dali(wheels=None, parts_dir=DALI_PARTS, part_bytes=None):
    """Here, once: DALI's wheels (downloaded for the GPU machine's Python 3.12, or those in the folder wheels)
    unpacked as pip --target would, compressed with xz (a third smaller than the wheels) and cut into parts that
    each fit one call beside the working tree, in parts_dir/1..N; returns N. Ignored by git (.git/info/exclude)."""
    import lzma
    import tempfile
    import zipfile

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if wheels is None:
            wheels = tmp / "wheels"
            platforms = [flag for name in MANYLINUX for flag in ("--platform", name)]
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(wheels),
                            *DALI_WHEELS], check=True)  # fmt: skip
        site = tmp / "site"
        for wheel in sorted(Path(wheels).glob("*.whl")):
            with zipfile.ZipFile(wheel) as z:
                z.extractall(site)
        prune(site)
        if (site / "nvidia").is_dir():
            (site / "nvidia" / "__init__.py").write_text(NAMESPACE)
        packed = tmp / "dali.tar.xz"
        with lzma.open(packed, "wb", preset=6) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
            tar.add(site, arcname=".")
        part_bytes = part_bytes or CARRY_MIB * 2**20 - tree_bytes() - 2 * 2**20  # 2 MiB to spare
        data = packed.read_bytes()
        count = -(-len(data) // part_bytes)
        shutil.rmtree(parts_dir, ignore_errors=True)
        for i in range(count):
            folder = Path(parts_dir) / str(i + 1)
            folder.mkdir(parents=True)
            (folder / f"dali.tar.xz.{i + 1:02d}-of-{count:02d}").write_bytes(
                data[i * part_bytes : (i + 1) * part_bytes]
            )
    exclude = ROOT / ".git" / "info" / "exclude"
    if exclude.parent.is_dir() and "/.dali/" not in (exclude.read_text() if exclude.exists() else ""):
        with open(exclude, "a") as f:
            f.write("/.dali/\n")
    print(f"{count} parts of at most {part_bytes / 2**20:.1f} MiB in {parts_dir}/: carry .dali/N in part N's call")
    return count


def unpack_dali(site, parts_dir=DALI_PARTS, gathered=DALI_TMP):
    """There, at every part's start: the DALI part this call carried is kept in gathered (the machine keeps /tmp
    while warm); once every part is there, DALI is unpacked into site. Returns what was said."""
    carried = sorted(Path(parts_dir).glob("*/dali.tar.xz.*"))
    gathered = Path(gathered)
    gathered.mkdir(parents=True, exist_ok=True)
    for part in carried:
        shutil.copy(part, gathered / part.name)
    if (Path(site) / "nvidia" / "dali").is_dir():
        return f"DALI is in {site}"
    parts = sorted(gathered.glob("dali.tar.xz.*"))
    if not parts:
        return "no DALI part carried (python tools/gpurun.py --pack-dali makes them)"
    count = int(parts[0].name.rsplit("-of-", 1)[1])
    if len(parts) < count:
        return f"DALI: {len(parts)} of its {count} parts are here; the rest come with the next parts' calls"
    import lzma

    with lzma.open(_Joined(parts)) as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
        tar.extractall(site, filter="tar")
    return f"DALI unpacked into {site} from its {count} parts"


class _Joined(io.RawIOBase):
    """The parts' bytes, one after the other, as one file to read."""

    def __init__(self, paths):
        self.files = [open(p, "rb") for p in paths]

    def readable(self):
        return True

    def readinto(self, buffer):
        while self.files:
            n = self.files[0].readinto(buffer)
            if n:
                return n
            self.files.pop(0).close()
        return 0


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
    left = deadline - time.monotonic() - step.reserve_s
    if left < step.least_s:
        log.write_text(f"skipped: {left:.0f} s were left of the part, the step needs {step.least_s} s\n")
        return "skipped", 0.0
    limit = min(step.limit_s, left)
    cmd = [sys.executable, *(fill(part, work, max(limit - 30, 30) / 60) for part in step.cmd)]
    env = {**env, **{k: fill(v, work, 0) for k, v in step.env.items()}}
    started = time.monotonic()
    with open(log, "w") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        process = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        if step.background:  # its own session: it outlives this command (the machine keeps it while warm)
            return f"started in the background (pid {process.pid})", 0.0
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


def kept(path):
    """A file of the part's folder that comes back: not a compile cache, the data, TensorBoard's or a trace."""
    return not (set(Path(path).parts) & LEFT_OUT) and not str(path).endswith(TRACE)


def packed(work):
    """{relative path: (size, time)} of work's files that come back (kept()): a pack is written again only where
    this changed. A file that goes while it is listed is left out (the next pass sees it)."""
    found = {}
    for path in sorted(Path(work).rglob("*")):
        relative = path.relative_to(work)
        try:
            if path.is_file() and kept(relative):
                stat = path.stat()
                found[relative] = (stat.st_size, stat.st_mtime_ns)
        except OSError:
            continue
    return found


def pack(work, target, files):
    """files (packed()) of work into the tar.gz target, written whole (beside it, then renamed): what a command
    killed at its limit leaves is the last whole pack. A file that goes while it is packed is left out."""
    partial = Path(target).with_name(Path(target).name + ".part")
    with tarfile.open(partial, "w:gz") as tar:
        for relative in files:
            try:
                tar.add(Path(work) / relative, arcname=str(Path(Path(work).name) / relative))
            except OSError:
                continue
    os.replace(partial, target)


class Packer(threading.Thread):
    """pack() every MIRROR_S seconds where work changed, until stop(), then once more."""

    def __init__(self, work, target):
        super().__init__(daemon=True)
        self.work, self.target, self.packed, self.done = work, target, None, threading.Event()
        self.lock = threading.Lock()

    def run(self):
        while not self.done.wait(MIRROR_S):
            self.pack()

    def pack(self):
        with self.lock:
            now = packed(self.work)
            if now != self.packed:
                pack(self.work, self.target, now)
                self.packed = now

    def stop(self):
        self.done.set()
        self.join()
        self.pack()


def write_report(part, rows, work):
    report = [f"# A GPU run, part {part}: {platform.node()}", "", "| step | exit | seconds | last line |"]
    report += ["|---|---|---|---|"] + [
        f"| {r['step']} | {r['code']} | {r['seconds']:.0f} | {r['last']} |" for r in rows
    ]
    commands = [(r["log"][:-4], command_of(work / r["log"])) for r in rows]
    report += [""] + [f"- `{name}`: " + (f"`{cmd}`" if cmd else "not run") for name, cmd in commands]
    (work / steps_md(part)).write_text("\n".join(report) + "\n")


def folder_of(part):
    """The part's folder: its own, or that of the part it goes on from (CONTINUES)."""
    return WORK / f"part-{CONTINUES.get(part, part)}"


def steps_md(part):
    return "steps.md" if part not in CONTINUES else f"steps-{part}.md"


def run_part(part, out, dali_site, steps=None):
    """Run a part's steps in order under its deadline, its folder packed into out/part-N.tar.gz as it goes, and
    out/part-N.md beside it. Returns the steps' rows."""
    steps = [s for s in (steps or STEPS) if s.part == part]
    work = folder_of(part)
    if part not in CONTINUES:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + PART_SECONDS.get(part, PART_S) - GRACE_S - PACK_S  # the part's clock starts now
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    packer = Packer(work, out / f"part-{part}.tar.gz")
    packer.start()
    said, _ = install_wheels(dali_site)
    print(f"{said}; {unpack_dali(dali_site)}", flush=True)
    env, rows = environment_of(dali_site), []
    prefix = "" if part not in CONTINUES else f"{part}-"  # a part that goes on in another's folder: its own logs
    for i, step in enumerate(steps, 1):
        log = work / f"{prefix}{i:02d}-{step.name}.log"
        print(f"part {part}, step {i} of {len(steps)}: {step.name} (at most {step.limit_s} s)", flush=True)
        code, seconds = run_step(step, work, deadline, env, log)
        rows.append(dict(step=step.name, code=code, seconds=seconds, last=last_line(log), log=log.name))
        print(f"  {code} after {seconds:.0f} s: {rows[-1]['last']}", flush=True)
        write_report(part, rows, work)
        shutil.copy(work / steps_md(part), out / f"part-{part}.md")
        packer.pack()
    packer.stop()
    print(f"part {part}: {out}/part-{part}.tar.gz and part-{part}.md", flush=True)
    return rows


def command_of(log):
    """The command a step's log begins with ("$ python3 ..."), the interpreter's path left out; "" where none ran."""
    first = log.read_text(errors="replace").split("\n", 1)[0] if log.exists() else ""
    if not first.startswith("$ "):
        return ""
    program, _, rest = first[2:].partition(" ")
    return f"{Path(program).name} {rest}".strip()


def wait_for(path, poll_s=0.2):
    """--wait FILE: return when FILE exists (a background step's last write); the step's limit ends a wait in vain."""
    started = time.monotonic()
    while not Path(path).exists():
        time.sleep(poll_s)
    print(f"{path} is there after {time.monotonic() - started:.0f} s of waiting")


def environment(path):
    """environment.json: what the first GPU run is read against (see the module's docstring)."""
    import psutil
    import torch
    import torchvision

    from bench.observe import sample

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
    from bench.observe import nvml

    holds = "import time, torch; torch.ones(1, device='cuda'); print('ready', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", holds], stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            return "the child process could not use CUDA"
        try:
            pids = {
                p.pid for h in sample.visible_handles() for p in nvml.call("nvmlDeviceGetComputeRunningProcesses", h)
            }
        except nvml.Unavailable as e:
            return f"NVML cannot be asked: {e}"
        return "yes" if child.pid in pids else f"no: NVML lists {sorted(pids)}, ours was {child.pid}"
    finally:
        child.kill()


def estimates(part):
    """(step, seconds) of a part's steps, as the part's clock gives them out: the data at the rate bench/data.py
    measured (DATA_S), each step with a reserve leaving it, the last what is left; a background step none."""
    steps = [s for s in STEPS if s.part == part]
    left = PART_SECONDS.get(part, PART_S) - GRACE_S - PACK_S
    found = []
    for step in steps:
        seconds = (
            0 if step.background else DATA_S if "bench.data" in step.cmd else min(step.limit_s, left - step.reserve_s)
        )
        found.append((step, seconds))
        left -= seconds
    return found


def planned(step, part):
    """What a bench step's own plan says on one GPU (its --dry-run: where its windows lie, its estimate from the saved
    GPU runs and what it assumes), or [] for a step that is no new bench."""
    if step.cmd[:2] != ["-m", "bench"] or "--resume" in step.cmd:
        return []
    cmd = [sys.executable, *(fill(c, folder_of(part), 10) for c in step.cmd), "--dry-run", "--gpus", "1"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        return [f"its plan fails: {last_words(done.stderr)}"]
    keep = ("estimate: ", "  windows: ", "  assumed: ")
    return [line.strip() for line in done.stdout.splitlines() if line.startswith(keep)]


def dry_run():
    """Each part's steps with their commands, limits and estimated seconds (which sum to the part's or less), and the
    session's calls with what each costs in device seconds."""
    for part in PARTS:
        print(f"part {part} (at most {PART_SECONDS.get(part, PART_S)} s; python3 tools/gpurun.py --part {part}"
              " --out $OUT):")  # fmt: skip
        rows = estimates(part)
        for step, seconds in rows:
            cmd = shlex.join(["python", *(fill(c, folder_of(part), max(seconds - 30, 30) / 60) for c in step.cmd)])
            when = "in the background" if step.background else f"about {seconds:.0f} s"
            if not step.background and seconds < step.least_s:
                when = f"skipped unless {step.least_s} s are left for it"
            print(f"  {step.name} (at most {step.limit_s} s; {when}): {cmd}")
            for line in planned(step, part):
                print(f"    {line}")
        total = sum(seconds for _, seconds in rows) + GRACE_S + PACK_S
        print(f"  in all about {total:.0f} s with the grace and the packing ({GRACE_S + PACK_S} s)\n")
    session = START_S + PART_SECONDS[1] + BETWEEN_S + PART_SECONDS[2]
    dali = START_S + DALI_CALLS * CARRY_S + PART_SECONDS[3]
    print(
        f"the session: the machine's start {START_S} s, part 1 {PART_SECONDS[1]} s, {BETWEEN_S} s between, part 2"
        f" {PART_SECONDS[2]} s at once after it: about {session} s of the {PLAN_S} planned; DALI's rows, in a session"
        f" of their own: the start, {DALI_CALLS} calls carrying DALI's parts ({CARRY_S} s each: python3"
        f" tools/gpurun.py --carry) and part 3 {PART_SECONDS[3]} s, about {dali} s"
    )


def main(argv=None):
    p = argparse.ArgumentParser(prog="python tools/gpurun.py", description=__doc__.splitlines()[0])
    p.add_argument("--part", type=int, choices=PARTS, help="the part to run")
    p.add_argument("--out", default="results/gpurun", help="where part-N.tar.gz and part-N.md go (the device: $OUT)")
    p.add_argument("--dry-run", action="store_true", help="print each part's steps and stop")
    p.add_argument("--seconds", type=int, help="the part's seconds, where less device time is left than it plans")
    p.add_argument("--dali-site", default=os.environ.get("DALI_SITE", "/tmp/site"), help="where DALI was installed")
    p.add_argument("--fetch-wheels", action="store_true", help="here, once: the wheels the GPU machine lacks")
    p.add_argument("--pack-dali", action="store_true", help="here, once: DALI in parts that fit a call, in .dali/N")
    p.add_argument("--carry", action="store_true", help="there: keep the DALI part this call carried, and stop")
    p.add_argument("--environment", metavar="FILE", help=argparse.SUPPRESS)  # the first step, in its own process
    p.add_argument("--wait", metavar="FILE", help=argparse.SUPPRESS)  # a step that waits for a background one
    args = p.parse_args(argv)
    if args.wait:
        return wait_for(args.wait)
    if args.fetch_wheels:
        return fetch_wheels()
    if args.pack_dali:
        return pack_dali()
    if args.environment:
        return environment(args.environment)
    if args.carry:
        return print(f"{unpack_dali(args.dali_site)}", flush=True)
    if args.dry_run or args.part is None:
        return dry_run()
    if args.seconds is not None:
        if not GRACE_S + PACK_S < args.seconds <= PART_S:
            print(f"gpurun: error: --seconds {args.seconds}: more than {GRACE_S + PACK_S} (the grace and the packing)"
                  f" and at most {PART_S}", file=sys.stderr)  # fmt: skip
            sys.exit(2)
        PART_SECONDS[args.part] = args.seconds
    run_part(args.part, args.out, args.dali_site)
    return None


if __name__ == "__main__":
    main()
