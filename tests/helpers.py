"""What the tests share: running a script as a user would, tiny generated data, clean-failure checks."""

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SMALL_MODEL = "shufflenet_v2_x0_5"  # learns in seconds on a CPU; BN momentum 0.1, so eval works early
LEARN = ("--epochs", 3, "--batch-size", 32)  # on small_data: enough for accuracy far above chance
# every way of training, as the command after `python`: each train*.py (train_ddp.py as one process,
# without torchrun), and the base with the DALI loader; bad input is tried on all of them
SCRIPTS = {
    "train": ("train.py",),
    "dp": ("train_dp.py",),
    "ddp": ("train_ddp.py",),
    "amp": ("train_amp.py",),
    "channels_last": ("train_channels_last.py",),
    "compile": ("train_compile.py",),
    "checkpoint": ("train_checkpoint.py",),
    "all": ("train_all.py",),
    "dali": ("train.py", "--loader", "dali"),
}
LOADERS = ("loader.py", "loader_dali.py")


def fast_first(values):
    """Parameters of which only the first runs in make test-fast; the others are marked slow (make test runs all).
    A tuple is the values of several parameters."""
    slow = [pytest.param(*v if isinstance(v, tuple) else (v,), marks=pytest.mark.slow) for v in values[1:]]
    return [*values[:1], *slow]


def run(*args, timeout=600, env=None, cwd=ROOT, memory_limit=None, file_limit=None):
    """Run `python ARGS...` the way a user would, from the repository root; return CompletedProcess.
    memory_limit: bytes of address space for it and the processes it starts (RLIMIT_AS);
    file_limit: the largest file they may write, in bytes (RLIMIT_FSIZE): a disk that fills up."""
    cmd = [PY, *map(str, args)]
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}

    def limit():
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        if file_limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    preexec = limit if memory_limit or file_limit else None
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env, preexec_fn=preexec
    )


def assert_no_orphans(marker):
    """No process whose command line holds marker (a path unique to the test) is left running."""
    left = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True).stdout.split()
    assert not left, f"orphan processes left: {left}"


def check_clean_failure(result, metrics, *words):
    """Exit code 2, one line on stderr holding every word, no traceback, no metrics file (or its .tmp). A run that
    started training said first, in a line of its own, when this CPU only emulates bf16 (train_amp.py, train_all.py):
    that warning is not the error, and is left out."""
    lines = [line for line in result.stderr.strip().splitlines() if "has no native bf16" not in line]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert str(word) in lines[0], lines[0]
    assert not metrics.exists() and not metrics.with_name(metrics.name + ".tmp").exists()


def generate(out, train=12, val=4, size=16, seed=0):
    result = run("-m", "bench.data", out, "--train", train, "--val", val, "--size", size, "--seed", seed)
    assert result.returncode == 0, result.stderr
    return Path(out)


TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 2)  # two CPU processes (gloo)


def train(script, data, metrics, *args, timeout=600, env=None, file_limit=None, launcher=()):
    """Run a training script on data with the small model (under launcher, e.g. TORCHRUN, if given); return
    (CompletedProcess, metrics or None)."""
    cmd = [*launcher, script, "--data", data, "--model", SMALL_MODEL, "--metrics-out", metrics, "--no-progress"]
    cmd += ["--batch-size", 16, "--workers", 1, *args]  # later flags win
    result = run(*cmd, timeout=timeout, env=env, file_limit=file_limit)
    written = json.loads(Path(metrics).read_text()) if Path(metrics).is_file() else None
    return result, written
