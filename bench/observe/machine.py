"""What a bench ran on and from which code: CPU, GPUs, driver, versions, git commit and dirty flag."""

import glob
import hashlib
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import psutil

import cpu
from bench import BenchError
from bench.observe import nvml

ROOT = Path(__file__).resolve().parents[2]


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# CPU features that decide the answers, as /proc/cpuinfo names them -> as the bench names them. bf16 autocast on a
# CPU is native only with AVX-512-BF16 or AMX (x86) or the bf16 extension (Arm); without, it is emulated and slow.
CPU_FEATURES = {"avx2": "avx2", "avx512f": "avx512", "avx512_bf16": "avx512_bf16", "amx_bf16": "amx",
                "asimd": "neon", "sve": "sve", "bf16": "bf16"}  # fmt: skip
NATIVE_BF16 = {CPU_FEATURES[flag] for flag in cpu.NATIVE_BF16}  # cpu.py's rule, in the bench's names of the features
TIERS = ("amx", "avx512_bf16", "avx512", "avx2", "bf16", "sve", "neon")  # the first held names the machine class

GPUS = """import json, torch
gpus = []
for i in range(torch.cuda.device_count()):
    cc = torch.cuda.get_device_capability(i)
    gpus.append(dict(name=torch.cuda.get_device_name(i), capability=f"{cc[0]}.{cc[1]}", bf16=cc >= (8, 0)))
print(json.dumps(gpus))"""


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU's feature flags (x86 `flags`, Arm `Features`), read by cpu.py as the scripts read them (CPUINFO_FLAGS
    stands for this machine's: a test, or `make test-fast CPU=avx2`, sees the machine of the class it names); an empty
    set where the system does not say. A CPUINFO_FLAGS set to nothing is a BenchError, one line."""
    try:
        found = cpu.flags(cpuinfo)
    except cpu.FlagsError as e:
        raise BenchError(str(e)) from None
    return found or set()


def cpu_isa(flags):
    """The features of CPU_FEATURES the CPU has, as the bench names them, in a fixed order."""
    return [name for flag, name in CPU_FEATURES.items() if flag in flags]


# a CUDA GPU (NVIDIA's; AMD's ROCm, which torch also calls cuda; WSL's) is a device file; without one torch sees none
GPU_DEVICES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg")


def gpus():
    """([{name, capability, bf16}] of the GPUs torch can see, NVIDIA driver version or None).

    torch is asked in a process of its own: imported by the runner, its libraries' pages would be
    shared with every run, and a run's host memory (PSS) would be charged only half of them. Where
    there is neither an NVIDIA driver nor a GPU's device file, there is nothing for torch to see and
    it is not asked (that process takes 2 s). bf16 (and TF32) are native from compute capability 8.0
    (Ampere) on.
    """
    try:
        nvml.call("nvmlInit")
        driver = nvml.text(nvml.call("nvmlSystemGetDriverVersion"))
    except nvml.Unavailable:  # no NVML library or no driver: a CPU-only machine, unless a device file says not
        driver = None
    if driver is None and not any(glob.glob(pattern) for pattern in GPU_DEVICES):
        if importlib.util.find_spec("torch") is None:
            raise BenchError(f"torch is not installed in {sys.executable}: see requirements.txt")
        return [], None
    probe = subprocess.run([sys.executable, "-c", GPUS], capture_output=True, text=True)
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["no output"]
        raise BenchError(f"torch does not import in {sys.executable}: {lines[-1]}")
    return json.loads(probe.stdout.strip().splitlines()[-1]), driver


def git_info():
    """(commit, dirty) of the code being measured; (None, None) outside a git checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit.stdout.strip(), bool(status.stdout.strip())


def code_fingerprint():
    """A digest of the code being measured: its commit, and any change not committed (the diff, the files git does
    not know); None outside a git checkout. Two runs with the same digest ran the same code."""
    try:
        parts = [
            subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True).stdout
            for cmd in (["git", "rev-parse", "HEAD"], ["git", "status", "--porcelain"], ["git", "diff", "HEAD"])
        ]
    except (OSError, subprocess.CalledProcessError):
        return None
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def machine_info():
    found, driver = gpus()
    commit, dirty = git_info()
    isa = cpu_isa(cpu_flags())
    first = found[0] if found else {}
    return dict(
        cpu_model=cpu_model(),
        cpu_cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        cpu_isa=" ".join(isa) or None,
        cpu_bf16_native=bool(NATIVE_BF16 & set(isa)),
        ram_gb=round(psutil.virtual_memory().total / 2**30, 1),
        gpu_count=len(found),
        gpu_name=first.get("name"),
        gpu_capability=first.get("capability"),
        gpu_bf16_native=first.get("bf16"),
        gpu_tf32=first.get("bf16"),  # TF32 Tensor Cores came with bf16, in Ampere (compute capability 8.0)
        driver_version=driver,
        python_version=platform.python_version(),
        platform=platform.platform(),
        git_commit=commit,
        git_dirty=dirty,
    )


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


TIER_WORDS = dict(amx="AMX", avx512_bf16="AVX-512-BF16", avx512="AVX-512 (no BF16)", avx2="AVX2 only",
                  bf16="Arm bf16", sve="Arm SVE", neon="Arm NEON", base="no AVX2")  # fmt: skip


def where(info):
    """What decides a table's numbers on this machine, for its title: the GPUs and their class, or the CPU, its
    cores, its top feature and whether it computes bf16 natively (AVX2-only and AVX-512-BF16 machines share a model
    name, and their amp rows differ 5x)."""
    bf16 = {True: "bf16 native", False: "bf16 emulated"}
    if info.get("gpu_count"):
        cc = f"compute capability {info['gpu_capability']}, " if info.get("gpu_capability") else ""
        native = bf16.get(info.get("gpu_bf16_native"), "bf16 unknown")
        return f"{info['gpu_count']}x {info.get('gpu_name')} ({cc}{native})"
    isa = (info.get("cpu_isa") or "").split()
    tier = next((t for t in TIERS if t in isa), "base") if info.get("cpu_isa") is not None else None
    said = f"{TIER_WORDS[tier]}, {bf16[bool(NATIVE_BF16 & set(isa))]}" if tier else "CPU features unknown"
    return f"CPU only: {info.get('cpu_model')}, {info.get('cpu_cores')} cores, {said}"


def machine_class(info):
    """A name for the hardware class, used to find the matching saved baseline. A GPU's name fixes its capabilities;
    a CPU's does not (one model name covers AVX2-only and AVX-512-BF16 machines), so its top feature is named too."""
    if info["gpu_count"]:
        return f"{info['gpu_count']}x-{slug(info['gpu_name'])}"
    isa = (info.get("cpu_isa") or "").split()
    tier = next((t for t in TIERS if t in isa), "base")
    return f"cpu-{info['cpu_cores']}core-{slug(info['cpu_model'])}-{slug(tier)}"
