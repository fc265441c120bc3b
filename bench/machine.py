"""What a bench ran on and from which code: CPU, GPUs, driver, versions, git commit and dirty flag."""

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import psutil

from bench import BenchError, nvml

ROOT = Path(__file__).resolve().parents[1]


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


GPU_NAMES = (
    "import json, torch; print(json.dumps([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]))"
)


def gpus():
    """(names of the GPUs torch can see, NVIDIA driver version or None).

    torch is asked in a process of its own: imported by the runner, its libraries' pages would be
    shared with every run, and a run's host memory (PSS) would be charged only half of them.
    """
    probe = subprocess.run([sys.executable, "-c", GPU_NAMES], capture_output=True, text=True)
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["no output"]
        raise BenchError(f"torch does not import in {sys.executable}: {lines[-1]}")
    names = json.loads(probe.stdout.strip().splitlines()[-1])
    try:
        nvml.call("nvmlInit")
        driver = nvml.text(nvml.call("nvmlSystemGetDriverVersion"))
    except nvml.Unavailable:  # no NVML library or no driver: a CPU-only machine
        driver = None
    return names, driver


def git_info():
    """(commit, dirty) of the code being measured; (None, None) outside a git checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit.stdout.strip(), bool(status.stdout.strip())


def machine_info():
    names, driver = gpus()
    commit, dirty = git_info()
    return dict(
        cpu_model=cpu_model(),
        cpu_cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        ram_gb=round(psutil.virtual_memory().total / 2**30, 1),
        gpu_count=len(names),
        gpu_name=names[0] if names else None,
        driver_version=driver,
        python_version=platform.python_version(),
        platform=platform.platform(),
        git_commit=commit,
        git_dirty=dirty,
    )


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def machine_class(info):
    """A name for the hardware class, used to find the matching saved baseline."""
    if info["gpu_count"]:
        return f"{info['gpu_count']}x-{slug(info['gpu_name'])}"
    return f"cpu-{info['cpu_cores']}core-{slug(info['cpu_model'])}"
