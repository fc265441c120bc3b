"""Shared fixtures: tiny generated data sets, and running a script as a user would."""

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
# metrics fields every training script writes (DESIGN.md, "Metrics JSON")
SCHEMA = """script variant world_size device device_name model dataset image_size batch_size
global_batch_size steps_timed samples_per_s compute_samples_per_s step_time_ms_median
step_time_ms_p90 data_wait_frac epoch_time_s train_loss_final val_acc val_samples
peak_mem_allocated_mb peak_mem_reserved_mb peak_mem_allocated_mb_sum torch_version
torchvision_version cuda_version cudnn_version dali_version amp_dtype seed argv""".split()
SMALL_MODEL = "shufflenet_v2_x0_5"  # learns in seconds on a CPU; BN momentum 0.1, so eval works early


def run(*args, timeout=600, env=None, cwd=ROOT, memory_limit=None):
    """Run `python ARGS...` the way a user would, from the repository root; return CompletedProcess.
    memory_limit: bytes of address space for it and the processes it starts (RLIMIT_AS)."""
    cmd = [PY, *map(str, args)]
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    preexec = limit if memory_limit else None
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env, preexec_fn=preexec
    )


def assert_no_orphans(marker):
    """No process whose command line holds marker (a path unique to the test) is left running."""
    left = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True).stdout.split()
    assert not left, f"orphan processes left: {left}"


def check_clean_failure(result, metrics, *words):
    """Exit code 2, one line on stderr holding every word, no traceback, no metrics file (or its .tmp)."""
    lines = result.stderr.strip().splitlines()
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


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """10 classes x (12 train + 4 val) images of 16 px: enough to run every code path quickly."""
    return generate(tmp_path_factory.mktemp("data") / "tiny")


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """10 classes x (100 train + 20 val) images of 32 px: enough for a model to learn."""
    return generate(tmp_path_factory.mktemp("data") / "small", train=100, val=20, size=32)


LEARN = ("--epochs", 3, "--batch-size", 32)  # on small_data: enough for accuracy far above chance


@pytest.fixture(scope="session")
def baseline_small(small_data, tmp_path_factory):
    """The baseline's metrics after LEARN on small_data: what every variant is compared with."""
    result, metrics = train("train.py", small_data, tmp_path_factory.mktemp("baseline") / "m.json", *LEARN)
    assert result.returncode == 0, result.stderr
    return metrics


def train(script, data, metrics, *args, timeout=600, env=None):
    """Run a training script on data with the small model; return (CompletedProcess, metrics or None)."""
    cmd = [script, "--data", data, "--model", SMALL_MODEL, "--metrics-out", metrics, "--no-progress"]
    cmd += ["--batch-size", 16, "--workers", 1, *args]  # later flags win
    result = run(*cmd, timeout=timeout, env=env)
    written = json.loads(Path(metrics).read_text()) if Path(metrics).exists() else None
    return result, written
